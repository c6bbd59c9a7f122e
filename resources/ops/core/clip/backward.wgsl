// core/signal/clip@1, declared VJP on the device: dx = dy where lo <= x <= hi, else 0
// (the subgradient convention: at x == lo or x == hi the cotangent passes through).
struct Params {
    n: u32,
    lo: f32,
    hi: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let j = gid.x + gid.y * nwg.x * 64u;
    if (j >= p.n) { return; }
    let inside = x[j] >= p.lo && x[j] <= p.hi;
    dx[j] = select(0.0, dy[j], inside);
}
