// core/shape/unfold@1: u[i, j] = x[i + j], one invocation per output element (row-major).
struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> u: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let t = gid.x + gid.y * nwg.x * 64u;
    if (t >= (p.n - p.w + 1u) * p.w) { return; }
    let i = t / p.w;
    let j = t % p.w;
    u[t] = x[i + j];
}
