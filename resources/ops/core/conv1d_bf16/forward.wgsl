// core/nn/conv1d_bf16@1: bf16 1-D convolution (valid correlation), per example: y[b,o,i] = rnd(sum_c,j w[o,c,j] x[b,c,i+j]).
// bf16 tensors are array<f32>: each word holds a bf16 in its high half (docs/bf16.md), so reading is exact;
// products of two bf16 are exact in f32; the sum is f32; the one rounding to bf16 is bf16_round.
struct Params {
    b: u32,
    c: u32,
    n: u32,
    o: u32,
    k: u32,
    m: u32,
    s: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// bf16 rounding by bit operations (docs/bf16.md). A bf16 lives in the HIGH half of a 32-bit word
// with the low half zero, so a bf16 binding is declared array<f32> and read as it is. Every value a
// kernel stores into a bf16 binding goes through bf16_round: round to nearest, ties to even, NaN
// kept and made quiet; a carry runs into the exponent (to inf past the largest bf16). The bf16 ops'
// kernels carry this function verbatim (tests/device/test_bf16_device.py checks the copies).
fn bf16_round(v: f32) -> f32 {
    let b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return bitcast<f32>((b | 0x00400000u) & 0xffff0000u);
    }
    return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    // one invocation per output y[bi, oi, t]
    if (i >= p.b * p.o * p.m) { return; }
    let t = i % p.m;
    let oi = (i / p.m) % p.o;
    let bi = i / (p.m * p.o);
    var acc = 0.0;
    for (var ci = 0u; ci < p.c; ci = ci + 1u) {
        for (var j = 0u; j < p.k; j = j + 1u) {
            acc = acc + w[(oi * p.c + ci) * p.k + j] * x[(bi * p.c + ci) * p.n + p.s * t + j];
        }
    }
    y[i] = bf16_round(acc);
}
