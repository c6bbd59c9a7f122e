// user/test/soft_threshold@1: y = x - t above t, x + t below -t, +0.0 in between.
// Strict comparisons, as the reference: |x| == t falls in the dead zone.
struct Params {
    n: u32,
    t: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) { return; }
    let v = x[i];
    var r = 0.0;
    if (v > p.t) {
        r = v - p.t;
    } else if (v < -p.t) {
        r = v + p.t;
    }
    y[i] = r;
}
