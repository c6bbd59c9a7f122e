// core/shape/unfold@1, declared VJP on the device: dx[j] = sum_i du[i, j - i] over the windows
// i in [max(0, j - w + 1), min(j, n - w)], in increasing i. One invocation per element of dx,
// gathering (no atomics): deterministic, and the same order as the reference.
struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> du: array<f32>;
@group(0) @binding(1) var<storage, read_write> dx: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = gid.x + gid.y * nwg.x * 64u;
    if (j >= p.n) { return; }
    let lo = select(0u, j + 1u - p.w, j + 1u >= p.w);
    let hi = min(j, p.n - p.w);
    var acc = 0.0;
    for (var i = lo; i <= hi; i = i + 1u) {
        acc = acc + du[i * p.w + (j - i)];
    }
    dx[j] = acc;
}
