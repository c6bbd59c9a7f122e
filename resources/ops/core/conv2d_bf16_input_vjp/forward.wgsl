// core/nn/conv2d_bf16_input_vjp@1: bf16 2-D convolution's input VJP (NCHW, padding p), per example: dx[b,c,t1,t2] = rnd(sum_o,j1,j2 f[o,c,j1,j2] dy[b,o,t1+p-j1,t2+p-j2]).
// bf16 tensors are array<f32>: each word holds a bf16 in its high half (docs/bf16.md), so reading is exact;
// products of two bf16 are exact in f32; the sum is f32; the one rounding to bf16 is bf16_round.
struct Params {
    b: u32,
    c: u32,
    h: u32,
    w: u32,
    o: u32,
    k: u32,
    m1: u32,
    m2: u32,
    s: u32,
    pad: u32,
}

@group(0) @binding(0) var<storage, read> dy: array<f32>;
@group(0) @binding(1) var<storage, read> f: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
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
    // one invocation per output dx[bi, ci, t1, t2]: the terms with t + pad = s*q + j, 0 <= q < m, in the order (oi, j1, j2)
    if (i >= p.b * p.c * p.h * p.w) { return; }
    let t2 = i % p.w;
    let t1 = (i / p.w) % p.h;
    let ci = (i / (p.w * p.h)) % p.c;
    let bi = i / (p.w * p.h * p.c);
    var acc = 0.0;
    for (var oi = 0u; oi < p.o; oi = oi + 1u) {
        for (var j1 = 0u; j1 < p.k; j1 = j1 + 1u) {
            let r1 = t1 + p.pad;
            if (r1 < j1 || (r1 - j1) % p.s != 0u || (r1 - j1) / p.s >= p.m1) { continue; }
            let q1 = (r1 - j1) / p.s;
            for (var j2 = 0u; j2 < p.k; j2 = j2 + 1u) {
                let r2 = t2 + p.pad;
                if (r2 < j2 || (r2 - j2) % p.s != 0u || (r2 - j2) / p.s >= p.m2) { continue; }
                let q2 = (r2 - j2) / p.s;
                acc = acc + f[((oi * p.c + ci) * p.k + j1) * p.k + j2] * dy[((bi * p.o + oi) * p.m1 + q1) * p.m2 + q2];
            }
        }
    }
    dx[i] = bf16_round(acc);
}
