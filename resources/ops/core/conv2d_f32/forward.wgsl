// core/nn/conv2d_f32@1: f32 2-D convolution (NCHW, n x n images, stride s, zero padding p), per example: y[b,o,i1,i2] = sum_c,j1,j2 f[o,c,j1,j2] xp[b,c,s*i1+j1,s*i2+j2].
// The f32 twin of core/nn/conv2d_bf16_strided@1 (docs/bf16.md): the same loop, the same order of the terms,
// f32 operands and an f32 result with no rounding beyond f32's own (rnd = id).
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

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> f: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    // one invocation per output y[bi, oi, t1, t2]; the terms in the order (ci, j1, j2), padded ones skipped
    if (i >= p.b * p.o * p.m1 * p.m2) { return; }
    let t2 = i % p.m2;
    let t1 = (i / p.m2) % p.m1;
    let oi = (i / (p.m2 * p.m1)) % p.o;
    let bi = i / (p.m2 * p.m1 * p.o);
    var acc = 0.0;
    for (var ci = 0u; ci < p.c; ci = ci + 1u) {
        for (var j1 = 0u; j1 < p.k; j1 = j1 + 1u) {
            let r1 = p.s * t1 + j1;          // a row of the padded image: the input's row r1 - pad
            if (r1 < p.pad || r1 - p.pad >= p.h) { continue; }
            for (var j2 = 0u; j2 < p.k; j2 = j2 + 1u) {
                let r2 = p.s * t2 + j2;
                if (r2 < p.pad || r2 - p.pad >= p.w) { continue; }
                acc = acc + f[((oi * p.c + ci) * p.k + j1) * p.k + j2] * x[((bi * p.c + ci) * p.h + r1 - p.pad) * p.w + r2 - p.pad];
            }
        }
    }
    y[i] = acc;
}
