// core/signal/spiky_signal@1: deterministic synthetic signal, one invocation per sample.
// Two triangle waves + small noise, ~0.5% of samples replaced by spikes of magnitude 5..10.
// All randomness is u32 integer hashing; every float is an integer < 2^24 times a power of
// two and every sum fits in 24 bits, so this matches the numpy reference bit for bit.
struct Params {
    n: u32,
    seed: u32,
}

@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

// lowbias32 (Chris Wellons); u32 arithmetic wraps in WGSL
fn hash(v0: u32) -> u32 {
    var v = v0;
    v = v ^ (v >> 16u);
    v = v * 0x7feb352du;
    v = v ^ (v >> 15u);
    v = v * 0x846ca68bu;
    v = v ^ (v >> 16u);
    return v;
}

// |2t - period| for t in [0, period)
fn triangle(t: u32, period: u32) -> i32 {
    return abs(i32(2u * t) - i32(period));
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) { return; }
    let mix = hash(p.seed ^ 0x9e3779b9u);
    let ph1 = mix % 4096u;
    let ph2 = (mix >> 12u) % 256u;
    let slow = f32(triangle((i + ph1) % 4096u, 4096u) * 2 - 4096) * 0.000244140625;  // 2^-12
    let fast = f32(triangle((i + ph2) % 256u, 256u) * 2 - 256) * 0.0009765625;       // 2^-10
    let h = hash(i ^ mix);
    let noise = (f32(h >> 16u) * 0.0000152587890625 - 0.5) * 0.125;                  // 2^-16, 2^-3
    var v = (slow + fast) + noise;
    let g = hash(h ^ 0x85ebca6bu);
    if (g % 200u == 0u) {
        let mag = 5.0 + f32(5u * (g >> 16u)) * 0.0000152587890625;                   // 2^-16
        v = select(mag, -mag, ((g >> 8u) & 1u) == 1u);
    }
    y[i] = v;
}
