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
