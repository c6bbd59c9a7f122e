// core/nn/logsumexp@1, declared VJP on the device: dx[r, j] = dy[r] * exp(x_j - m) / S, the row's
// softmax recomputed from x as the forward computes it. One invocation per row.
struct Params {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

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
        dx[base + j] = dy[r] * (exp(x[base + j] - m) / s);
    }
}
