// core/nn/conv2d_f32_input_vjp@1: f32 2-D convolution's input VJP (NCHW, stride s, padding p), per example: dx[b,c,s*i1+j1-p,s*i2+j2-p] += f[o,c,j1,j2] dy[b,o,i1,i2].
// The f32 twin of core/nn/conv2d_bf16_input_vjp_strided@1 (docs/bf16.md): the same loop, the same order of the
// terms, f32 operands and an f32 result with no rounding beyond f32's own (rnd = id).
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
    dx[i] = acc;
}
