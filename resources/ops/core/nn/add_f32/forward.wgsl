// core/nn/add_f32@1: f32 elementwise sum, one invocation per element: y = a + b2 (one f32 addition,
// which WGSL requires to be correctly rounded). The f32 twin of core/nn/add_bf16@1 (docs/bf16.md,
// "At f32"): the same sum, with no rounding beyond f32's own (rnd = id).
struct Params {
    total: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b2: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.total) { return; }
    y[i] = a[i] + b2[i];
}
