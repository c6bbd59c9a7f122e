// core/nn/add_bf16@1: bf16 elementwise sum, one invocation per element: y = rnd(a + b2).
// bf16 tensors are array<f32>: each word holds a bf16 in its high half (docs/bf16.md), so reading is
// exact; the sum is f32 (exact when the exponents differ by at most 15, and rounding to the larger
// operand either way past that); the one rounding to bf16 is bf16_round.
struct Params {
    total: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b2: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// bf16 rounding by bit operations (docs/bf16.md). A bf16 lives in the HIGH half of a 32-bit word
// with the low half zero, so a bf16 binding is declared array<f32> and read as it is. Every value a
// kernel stores into a bf16 binding goes through bf16_round: round to nearest, ties to even, NaN
// kept and made quiet; a carry runs into the exponent (to inf past the largest bf16). The bf16 ops'
// kernels carry this function verbatim (tests/device/test_bf16_device.py checks the copies).
fn bf16_round(v: f32) -> f32 {
    let b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return bitcast<f32>((b | 0x00400000u) & 0xffff0000u);
    }
    return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.total) { return; }
    y[i] = bf16_round(a[i] + b2[i]);
}
