// core/signal/fir@1, declared VJP on the device, one invocation per gradient element
// (no atomics; each sum runs sequentially in a fixed order):
//   j <  n:      dx[j]        = sum_i dy[i] * taps[j - i],  i = max(0, j - k + 1) .. min(j, m - 1)
//   j >= n:      dtaps[j - n] = sum_i dy[i] * x[i + j - n], i = 0 .. m - 1
// where m = n - k + 1 is the length of y.
struct Params {
    n: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> taps: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@group(0) @binding(4) var<storage, read_write> dtaps: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let j = gid.x + gid.y * nwg.x * 64u;
    let m = p.n - p.k + 1u;
    if (j < p.n) {
        let lo = select(0u, j + 1u - p.k, j + 1u >= p.k);
        let hi = min(j, m - 1u);
        var acc = 0.0;
        for (var i = lo; i <= hi; i = i + 1u) {
            acc = acc + dy[i] * taps[j - i];
        }
        dx[j] = acc;
    } else if (j < p.n + p.k) {
        let t = j - p.n;
        var acc = 0.0;
        for (var i = 0u; i < m; i = i + 1u) {
            acc = acc + dy[i] * x[i + t];
        }
        dtaps[t] = acc;
    }
}
