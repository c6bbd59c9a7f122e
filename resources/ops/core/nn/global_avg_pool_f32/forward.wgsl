// core/nn/global_avg_pool_f32@1: one invocation per image (b, c): y = (sum of its n * n pixels) / (n * n).
// The f32 twin of core/nn/global_avg_pool_bf16@1 (docs/bf16.md, "At f32"): the same order, the pixels in
// (i, j) row-major order, added to an f32 accumulator that starts at +0; then one f32 division by n * n.
struct Params {
    images: u32,
    pixels: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * nwg.x * 64u;
    if (g >= p.images) { return; }
    let base = g * p.pixels;
    var acc = 0.0;
    for (var t = 0u; t < p.pixels; t = t + 1u) {
        acc = acc + x[base + t];
    }
    y[g] = acc / f32(p.pixels);
}
