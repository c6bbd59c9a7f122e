// user/test/half@1: y = 0.5 * x.
struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * 64u + gid.x;
    if (i >= p.n) { return; }
    let v = x[i];
    var r = 0.5 * v;
    if (v > 0.0) {
        r = v * 0.5;
    }
    y[i] = r;
}
