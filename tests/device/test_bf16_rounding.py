"""bf16 rounding (studio/engine/bfloat16.py): exhaustively over all 2^32 f32 inputs against two
independent implementations, and from f64 directly on the edge cases (docs/bf16.md)."""
import math

import ml_dtypes
import numpy as np
import pytest

from studio.engine import bfloat16 as bf

CHUNK = 1 << 18            # small enough to stay in cache (chunks of 2^24 took 268 s on this machine)
BASE = np.arange(CHUNK, dtype=np.uint32)


def by_remainder(bits: np.ndarray) -> np.ndarray:
    """An independent f32 -> bf16 rounding: keep the high half, compare the dropped low half with
    one half-ulp (0x8000), round up above it and at it when the kept half is odd."""
    hi = bits >> np.uint32(16)
    lo = bits & np.uint32(0xFFFF)
    up = (lo > 0x8000) | ((lo == 0x8000) & ((hi & np.uint32(1)) == 1))
    return (hi + up).astype(np.uint16)


def by_fractions(x: float) -> int:
    """Round an f64 to bf16 in exact rational arithmetic (math.frexp, integers): the slow oracle."""
    from fractions import Fraction
    if math.isnan(x):
        return -1
    if math.isinf(x):
        return 0xFF80 if x < 0 else 0x7F80
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    f = Fraction(abs(x))
    if f == 0:
        return sign
    e = math.frexp(abs(x))[1]
    q = Fraction(2) ** (max(e, -125) - 8)
    k, r = divmod(f, q)
    k = int(k) + (1 if r > q / 2 or (r == q / 2 and int(k) % 2 == 1) else 0)
    v = k * q
    if v >= Fraction(2) ** 128:
        return sign | 0x7F80
    return sign | int(np.float32(float(v)).view(np.uint32) >> 16)


def check_chunk(start: int) -> None:
    bits = BASE + np.uint32(start)
    got = bf.from_f32_bits(bits)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    want = by_remainder(bits)
    with np.errstate(invalid="ignore"):
        theirs = bits.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    ok = nan | ((got == want) & (got == theirs))
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise AssertionError(f"f32 0x{int(bits[i]):08x}: bit ops 0x{int(got[i]):04x}, remainder "
                             f"0x{int(want[i]):04x}, ml_dtypes 0x{int(theirs[i]):04x}")
    # NaN: stays NaN, quiet, with the sign and the high payload bits kept
    quiet = (bits[nan] >> np.uint32(16)).astype(np.uint16) | np.uint16(0x0040)
    assert np.array_equal(got[nan], quiet)


@pytest.mark.slow
def test_every_f32_rounds_as_the_independent_implementations_do():
    """All 2^32 f32 bit patterns, in 16,384 chunks of 2^18."""
    for start in range(0, 1 << 32, CHUNK):
        check_chunk(start)


def test_the_binades_around_one():
    """2^24 patterns from 0.5 up (1.0 and its ties among them): the fast subset of the exhaustive test."""
    for start in range(0x3F000000, 0x40000000, CHUNK):
        check_chunk(start)


def test_the_remainder_oracle_is_not_the_bit_trick():
    """The oracle would catch a rounding that truncates or rounds ties up."""
    bits = np.array([0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001], np.uint32)
    assert [hex(v) for v in by_remainder(bits)] == ["0x3f80", "0x3f82", "0x3f80", "0x3f81"]
    truncate = (bits >> np.uint32(16)).astype(np.uint16)
    assert not np.array_equal(truncate, by_remainder(bits))


F64_CASES = [
    (1 + 2.0 ** -8 + 2.0 ** -40, 0x3F81),   # ml_dtypes' f32 detour: 1 + 2^-8 is a tie -> 1.0 (0x3f80)
    (1 + 2.0 ** -8, 0x3F80),                # a tie, to even (down)
    (1 + 3 * 2.0 ** -8, 0x3F82),            # a tie, to even (up)
    (1 + 2.0 ** -8 - 2.0 ** -52, 0x3F80),   # just below a tie
    (-(1 + 2.0 ** -8 + 2.0 ** -40), 0xBF81),
    (0.0, 0x0000), (-0.0, 0x8000),
    (2.0 ** -133, 0x0001),                  # the smallest subnormal
    (2.0 ** -134, 0x0000),                  # half of it: a tie, to even (zero)
    (2.0 ** -134 + 2.0 ** -160, 0x0001),    # just above the tie
    (-2.0 ** -134, 0x8000),                 # to -0
    (3 * 2.0 ** -134, 0x0002),              # 1.5 subnormal ulps: a tie, to even (2)
    (2.0 ** -126, 0x0080),                  # the smallest normal
    (2.0 ** -126 - 2.0 ** -134, 0x0080),    # a tie between the largest subnormal and the smallest normal
    (1e-300, 0x0000),
    (bf.MAX, 0x7F7F),
    (bf.MAX + 2.0 ** 119 - 2.0 ** 80, 0x7F7F),   # just under the overflow threshold
    (bf.MAX + 2.0 ** 119, 0x7F80),          # the tie at the top: to even, which is inf
    (1e300, 0x7F80), (-1e300, 0xFF80),
    (math.inf, 0x7F80), (-math.inf, 0xFF80),
]


@pytest.mark.parametrize("x, bits", F64_CASES, ids=[repr(c[0]) for c in F64_CASES])
def test_rounding_from_f64_directly(x, bits):
    got = int(bf.from_f64(np.array([x]))[0])
    assert got == bits, f"{x!r}: 0x{got:04x}, want 0x{bits:04x}"
    assert by_fractions(x) == bits


def test_the_f32_detour_double_rounds():
    """Why the f64 path exists: going through f32 first gives 1.0, not 1.0078125."""
    x = 1 + 2.0 ** -8 + 2.0 ** -40
    via_f32 = int(bf.from_f32(np.array([x], np.float32))[0])
    assert via_f32 == 0x3F80 and int(bf.from_f64(np.array([x]))[0]) == 0x3F81
    assert float(bf.to_f32(bf.from_f64(np.array([x])))[0]) == 1.0078125


def test_nan_from_f64_stays_nan_and_quiet():
    payloads = np.array([0x7FF8000000000000, 0x7FF0000000000001, 0xFFF4000000000000, 0x7FFFE00000000000],
                        np.uint64).view(np.float64)
    got = bf.from_f64(payloads)
    assert all((int(g) & 0x7F80) == 0x7F80 and (int(g) & 0x0040) for g in got)   # NaN, quiet
    assert int(got[2]) & 0x8000 and not int(got[0]) & 0x8000                  # sign kept
    assert int(got[3]) & 0x3F == 0x3F                                           # high payload kept
    assert np.isnan(bf.to_f32(got)).all()


def test_from_f64_matches_the_rational_oracle_on_random_values():
    rng = np.random.default_rng(5)
    scale = 2.0 ** rng.integers(-140, 130, size=3000)
    xs = rng.normal(size=3000) * scale
    ties = (rng.integers(128, 256, size=500) * 2 + 1) * 2.0 ** rng.integers(-140, 110, size=500)  # exact midpoints
    for x in [*xs, *ties, *(-ties)]:
        assert int(bf.from_f64(np.array([x]))[0]) == by_fractions(float(x)), repr(x)


def test_from_f64_on_every_bf16_neighbourhood():
    """Every finite bf16 b, and the f64 values just around the midpoints next to it, round as the
    f32 path does where f32 holds them exactly (the midpoint and its neighbours at 2^-24 relative)."""
    b = np.arange(0, 0x7F80, dtype=np.uint32)
    for lo in (0x0000, 0x7FFF, 0x8000, 0x8001, 0xFFFF):
        bits = (b << np.uint32(16)) | np.uint32(lo)
        f = bits.view(np.float32)
        assert np.array_equal(bf.from_f64(f.astype(np.float64)), bf.from_f32_bits(bits))
        assert np.array_equal(bf.from_f64(-f.astype(np.float64)), bf.from_f32_bits(bits | np.uint32(0x80000000)))


def test_ulp_and_words():
    assert bf.ulp(np.array([1.0, 1.5, 2.0, 0.0, 2.0 ** -130]))[:4].tolist() == [2.0 ** -7, 2.0 ** -7, 2.0 ** -6, 2.0 ** -133]
    bits = bf.from_f64(np.array([1.0, -2.5, math.inf]))
    words = bf.to_words(bits)
    assert words.tolist() == [0x3F800000, 0xC0200000, 0x7F800000]
    back, bad = bf.from_words(np.array([0x3F800000, 0x3F800001], np.uint32))
    assert back.tolist() == [0x3F80, 0x3F80] and bad.tolist() == [1]


def test_from_f64_on_random_words_rounds_as_the_rational_oracle_whole_array_and_one_by_one():
    """Any 64-bit pattern (huge, tiny, subnormal, NaN with payloads): the array call's bits are the
    rational oracle's, and each element alone gives the same bits as in the array."""
    rng = np.random.default_rng(11)
    words = np.frombuffer(rng.bytes(8 * 4000), np.uint64).copy()
    words[:400] = (words[:400] & np.uint64(0x800FFFFFFFFFFFFF)) | (rng.integers(0x370, 0x390, 400).astype(np.uint64) << np.uint64(52))
    x = words.view(np.float64)                             # a tenth of them near 2^-126, where the two paths meet
    got = bf.from_f64(x)
    for i, v in enumerate(x):
        want = by_fractions(float(v))
        if want < 0:
            assert (int(got[i]) & 0x7FC0) == 0x7FC0, hex(int(words[i]))
        else:
            assert int(got[i]) == want, hex(int(words[i]))
        assert int(bf.from_f64(np.array([v]))[0]) == int(got[i])
    assert bf.from_f64(np.float64(1.5)).shape == () and bf.from_f64(x.reshape(40, 100)).shape == (40, 100)
