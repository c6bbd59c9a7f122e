// core/signal/clip@1: y[i] = x[i] clamped to [lo, hi] by compare-and-select.
// Not clamp()/min()/max(): their choice between -0.0 and +0.0 is unspecified;
// explicit strict comparisons keep x whenever it compares equal to a bound.
struct Params {
    n: u32,
    lo: f32,
    hi: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) { return; }
    var v = x[i];
    if (v < p.lo) { v = p.lo; }
    if (v > p.hi) { v = p.hi; }
    y[i] = v;
}
