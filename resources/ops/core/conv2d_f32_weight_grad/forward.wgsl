// core/nn/conv2d_f32_weight_grad@1: f32 2-D convolution's weight gradient (NCHW, stride s, padding p), contracting the batch: df[o,c,j1,j2] = sum_b,i1,i2 dy[b,o,i1,i2] xp[b,c,s*i1+j1,s*i2+j2].
// The f32 twin of core/nn/conv2d_bf16_weight_grad_strided@1 (docs/bf16.md, "At f32"): one invocation per output,
// its terms in the order (b, i1, i2) row-major, padded ones skipped, added one after the other to an f32
// accumulator that starts at +0; stored as it is (rnd = id). The signature keeps b * m1 * m2 <= 4,096 terms per
// output, far below lavapipe's 65,535 loop iterations per invocation.
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
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> df: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * nwg.x * 64u;
    if (g >= p.o * p.c * p.k * p.k) { return; }
    let j2 = g % p.k;
    let j1 = (g / p.k) % p.k;
    let ci = (g / (p.k * p.k)) % p.c;
    let oi = g / (p.k * p.k * p.c);
    var acc = 0.0;
    for (var bi = 0u; bi < p.b; bi = bi + 1u) {
        for (var i1 = 0u; i1 < p.m1; i1 = i1 + 1u) {
            let r1 = p.s * i1 + j1;          // a row of the padded image: the input's row r1 - pad
            if (r1 < p.pad || r1 - p.pad >= p.h) { continue; }
            for (var i2 = 0u; i2 < p.m2; i2 = i2 + 1u) {
                let r2 = p.s * i2 + j2;
                if (r2 < p.pad || r2 - p.pad >= p.w) { continue; }
                acc = acc + dy[((bi * p.o + oi) * p.m1 + i1) * p.m2 + i2] * x[((bi * p.c + ci) * p.h + r1 - p.pad) * p.w + r2 - p.pad];
            }
        }
    }
    df[g] = acc;
}
