// core/nn/global_avg_pool_f32_vjp@1: one invocation per output pixel: dx[b,c,i,j] = dy[b,c] / (n * n).
// The f32 twin of core/nn/global_avg_pool_bf16_vjp@1 (docs/bf16.md, "At f32"): the same f32 quotient
// (exact when n is a power of two), stored as it is (rnd = id).
struct Params {
    total: u32,
    pixels: u32,
}

@group(0) @binding(0) var<storage, read> dy: array<f32>;
@group(0) @binding(1) var<storage, read_write> dx: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.total) { return; }
    dx[i] = dy[i / p.pixels] / f32(p.pixels);
}
