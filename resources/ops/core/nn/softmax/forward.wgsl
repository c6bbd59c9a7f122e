// core/nn/softmax@1: one invocation per row of x[rows, cols]; the row's maximum first, so no exp
// overflows (every argument is <= 0), then the sum of exp(x - m), then each exp(x - m) / sum.
struct Params {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * 64u;
    if (r >= p.rows) { return; }
    let base = r * p.cols;
    var m = x[base];
    for (var j = 1u; j < p.cols; j = j + 1u) {
        m = max(m, x[base + j]);
    }
    var s = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        s = s + exp(x[base + j] - m);
    }
    for (var j = 0u; j < p.cols; j = j + 1u) {
        y[base + j] = exp(x[base + j] - m) / s;
    }
}
