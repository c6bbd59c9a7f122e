// BROKEN ON PURPOSE: insertion sort compares with >= instead of >, reversing equal values: wrong sign of zero at ties
// user/demo/median_tie_mishandled@1: one invocation per output element; gather the window
// into a fixed-size local array (w <= 31), insertion sort, take the middle.
struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n - p.w + 1u) { return; }
    var win: array<f32, 31>;
    for (var j = 0u; j < p.w; j = j + 1u) {
        win[j] = x[i + j];
    }
    // insertion sort with '>=': equal values (-0.0, +0.0) end up in reverse input order
    for (var a = 1u; a < p.w; a = a + 1u) {
        let v = win[a];
        var b = a;
        while (b > 0u && win[b - 1u] >= v) {
            win[b] = win[b - 1u];
            b = b - 1u;
        }
        win[b] = v;
    }
    y[i] = win[p.w / 2u];
}
