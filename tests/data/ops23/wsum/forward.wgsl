// user/test/wsum@1: y[i] = sum_j w[j] * x[i + j], one invocation per output.
struct Params {
    n: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * 64u + gid.x;
    if (i >= p.n - p.k + 1u) { return; }
    var acc = 0.0;
    for (var j = 0u; j < p.k; j = j + 1u) {
        acc = acc + w[j] * x[i + j];
    }
    y[i] = acc;
}
