// core/nn/linear@1: one invocation per output y[bi, oi] = (sum_j x[bi, j] * w[oi, j]) + bias[oi]:
// the d products added in the order j = 0 .. d - 1 to an f32 accumulator that starts at +0, then the bias.
struct Params {
    b: u32,
    d: u32,
    o: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.b * p.o) { return; }
    let oi = i % p.o;
    let bi = i / p.o;
    var acc = 0.0;
    for (var j = 0u; j < p.d; j = j + 1u) {
        acc = acc + x[bi * p.d + j] * w[oi * p.d + j];
    }
    y[i] = acc + bias[oi];
}
