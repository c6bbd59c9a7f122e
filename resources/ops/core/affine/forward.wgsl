// core/signal/affine@1: y[i] = round(round(scale * x[i]) + offset), one invocation per element.
// zero: always 0 (the descriptor sets it to 0); see main
struct Params {
    n: u32,
    scale: f32,
    offset: f32,
    zero: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) { return; }
    // Round the product to f32 before the add on every device. WGSL lets a compiler
    // contract `a * b + c` into an fma (one rounding); when scale * x nearly cancels
    // offset the two results differ by many ulps. XOR with a uniform the compiler cannot
    // see is 0 is a bitwise no-op that stops the contraction.
    let prod = bitcast<f32>(bitcast<u32>(x[i] * p.scale) ^ p.zero);
    y[i] = prod + p.offset;
}
