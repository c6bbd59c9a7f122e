// core/nn/softmax@1, declared VJP on the device: dx_i = s_i dy_i - s_i c, c = sum_j dy_j s_j, with
// s recomputed from x as the forward does. One invocation per row. The cotangents are scaled by a
// power of two (exact) so that no intermediate overflows where the gradient itself does not.
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
    var t = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        m = max(m, x[base + j]);
        t = max(t, abs(dy[base + j]));
    }
    let e = frexp(max(t, 1e-30)).exp;
    var s = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        s = s + exp(x[base + j] - m);
    }
    var c = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        c = c + ldexp(dy[base + j], -e) * (exp(x[base + j] - m) / s);
    }
    for (var j = 0u; j < p.cols; j = j + 1u) {
        let sj = exp(x[base + j] - m) / s;
        dx[base + j] = ldexp(sj * ldexp(dy[base + j], -e) - sj * c, e);
    }
}
