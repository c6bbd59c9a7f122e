// core/nn/logsumexp@1: one invocation per row of x[rows, cols]; the row's maximum m first (every
// exp argument is then <= 0: nothing overflows), then y = m + log(sum_j exp(x_j - m)).
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
    y[r] = m + log(s);
}
