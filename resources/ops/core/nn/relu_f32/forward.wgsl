// core/nn/relu_f32@1: f32 ReLU, one invocation per element: y = x where x > 0, else +0.0; a NaN
// stays NaN. The f32 twin of core/nn/relu_bf16@1 (docs/bf16.md, "At f32"): the same decision, taken
// on the word's bits, not by a float comparison (WGSL lets an implementation assume no NaN reaches
// one): positive and not zero keeps x, a NaN keeps x, else +0. No rounding: x's word is stored as it is.
struct Params {
    total: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

// x > 0 (or NaN) on the bits of the word: sign clear and not +0, or the magnitude past inf
fn kept(w: u32) -> bool {
    return ((w & 0x80000000u) == 0u && w != 0u) || (w & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.total) { return; }
    let v = x[i];
    var out = 0.0;
    if (kept(bitcast<u32>(v))) { out = v; }
    y[i] = out;
}
