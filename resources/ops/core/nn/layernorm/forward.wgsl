// core/nn/layernorm@1: one invocation per row of x[rows, cols]; two passes: the mean, then the
// biased variance of x - mean (divided by cols), then y = (x - mean) * inverseSqrt(var + eps).
struct Params {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

const EPS: f32 = 1e-5;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * 64u;
    if (r >= p.rows) { return; }
    let base = r * p.cols;
    let n = f32(p.cols);
    var s = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        s = s + x[base + j];
    }
    let mu = s / n;
    var acc = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        let c = x[base + j] - mu;
        acc = acc + c * c;
    }
    let rs = inverseSqrt(acc / n + EPS);
    for (var j = 0u; j < p.cols; j = j + 1u) {
        y[base + j] = (x[base + j] - mu) * rs;
    }
}
