// user/demo/windowed_median@1, declared VJP on the device: dx[j] = sum of dy[i] over the
// windows i in [j - w + 1, j] whose argmedian is j. One invocation per element of dx,
// gathering (no atomics); windows are visited in increasing i, so the sum is deterministic.
// The argmedian is recomputed with the forward's stable insertion sort, carrying indices.
struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// offset in [0, w) of the element the forward selects for window i
fn argmedian(i: u32) -> u32 {
    var val: array<f32, 31>;
    var idx: array<u32, 31>;
    for (var j = 0u; j < p.w; j = j + 1u) {
        val[j] = x[i + j];
        idx[j] = j;
    }
    for (var a = 1u; a < p.w; a = a + 1u) {
        let v = val[a];
        let k = idx[a];
        var b = a;
        while (b > 0u && val[b - 1u] > v) {
            val[b] = val[b - 1u];
            idx[b] = idx[b - 1u];
            b = b - 1u;
        }
        val[b] = v;
        idx[b] = k;
    }
    return idx[p.w / 2u];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = gid.x + gid.y * nwg.x * 64u;
    if (j >= p.n) { return; }
    // windows containing x[j]: i in [max(0, j - w + 1), min(j, n - w)]
    let lo = select(0u, j + 1u - p.w, j + 1u >= p.w);
    let hi = min(j, p.n - p.w);
    var acc = 0.0;
    for (var i = lo; i <= hi; i = i + 1u) {
        if (i + argmedian(i) == j) {
            acc = acc + dy[i];
        }
    }
    dx[j] = acc;
}
