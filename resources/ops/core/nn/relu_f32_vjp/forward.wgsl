// core/nn/relu_f32_vjp@1: the f32 ReLU's VJP, one invocation per element: dx = dy where x > 0,
// else +0.0. The f32 twin of core/nn/relu_bf16_vjp@1 (docs/bf16.md, "At f32"): x > 0 is decided on
// x's bits, not by a float comparison (WGSL lets an implementation assume no NaN reaches one): sign
// clear, not +0 and not a NaN. No rounding: dy's word is stored as it is.
struct Params {
    total: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// x > 0 on the bits of the word: sign clear, not +0, and not a NaN (magnitude at most inf)
fn positive(w: u32) -> bool {
    return (w & 0x80000000u) == 0u && w != 0u && w <= 0x7f800000u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.total) { return; }
    var out = 0.0;
    if (positive(bitcast<u32>(x[i]))) { out = dy[i]; }
    dx[i] = out;
}
