// user/test/axpy@1: z = a * x + y. Indexes with gid.x only: wrong once the launch folds into 2-D.
struct Params {
    n: u32,
    a: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> z: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.n) { return; }
    z[i] = p.a * x[i] + y[i];
}
