// core/nn/layernorm@1, declared VJP on the device: dx = r * ((dy - mean(dy)) - y * mean(dy * y)),
// with mean, variance and r = inverseSqrt(var + eps) recomputed from x as the forward does. One
// invocation per row. The cotangents are scaled by a power of two (exact) so that no intermediate
// overflows where the gradient itself does not.
struct Params {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const EPS: f32 = 1e-5;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * 64u;
    if (r >= p.rows) { return; }
    let base = r * p.cols;
    let n = f32(p.cols);
    var s = 0.0;
    var t = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        s = s + x[base + j];
        t = max(t, abs(dy[base + j]));
    }
    let e = frexp(max(t, 1e-30)).exp;
    let mu = s / n;
    var acc = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        let c = x[base + j] - mu;
        acc = acc + c * c;
    }
    let rs = inverseSqrt(acc / n + EPS);
    var gbar = 0.0;
    var pm = 0.0;
    for (var j = 0u; j < p.cols; j = j + 1u) {
        let g = ldexp(dy[base + j], -e) / n;
        gbar = gbar + g;
        pm = pm + g * ((x[base + j] - mu) * rs);
    }
    for (var j = 0u; j < p.cols; j = j + 1u) {
        let yj = (x[base + j] - mu) * rs;
        dx[base + j] = ldexp(rs * ((ldexp(dy[base + j], -e) - gbar) - yj * pm), e);
    }
}
