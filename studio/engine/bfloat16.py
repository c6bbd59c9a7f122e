"""bfloat16 rounding (``rnd``, docs/requirements.md L10-L13): round to nearest, ties to even, to 8 significant
bits with f32's exponent range; NaN stays NaN and comes out quiet. Two ways in:

- from f32 by bit operations (``from_f32_bits``), the same three operations the kernels' WGSL
  helper does (shaders/bf16.wgsl);
- from f64 *directly* (``from_f64``): the value is scaled by its own bf16 quantum (a power of two,
  so exactly), rounded to an integer half-even, and scaled back. Never through f32 first: that is
  a double rounding (1 + 2^-8 + 2^-40 -> f32 1 + 2^-8, a tie -> 1.0, where the correct answer is
  1.0078125) — which is what ``ml_dtypes``' f64 -> bfloat16 cast does.

A bf16 is carried as its 16 bits (uint16) or as the f32 with the same value (the bits in the high
half of a 32-bit word, the low half zero): every bf16 is exactly an f32. On the device each element
is one such 32-bit word (docs/bf16.md)."""
from __future__ import annotations

import numpy as np

EXP_MIN = -125            # np.frexp's exponent of the smallest normal bf16 (2^-126 = 0.5 * 2^-125)
SIG_BITS = 8              # significant bits, the hidden one included
OVERFLOW = 2.0 ** 128     # a rounded magnitude this large is past the largest finite bf16
MAX = float.fromhex("0x1.fe00000000000p+127")   # the largest finite bf16
QUIET = 0x0040            # the quiet bit of a bf16 NaN
UNIT = 2.0 ** -8          # unit roundoff: |rnd(x) - x| <= UNIT * |x| in the normal range


def from_f32_bits(bits: np.ndarray) -> np.ndarray:
    """The bf16 bits (uint16) of f32 bit patterns (uint32), by bit operations: add 0x7fff plus the
    lowest kept bit, drop the low half. A carry runs into the exponent (and to inf past the
    largest bf16) as rounding requires. NaN: the high half with the quiet bit set."""
    b = np.asarray(bits, dtype=np.uint32)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (b >> np.uint32(16)) | np.uint32(QUIET)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def from_f32(a: np.ndarray) -> np.ndarray:
    """bf16 bits of f32 values (a single rounding: f32 -> bf16)."""
    return from_f32_bits(np.ascontiguousarray(a, dtype=np.float32).view(np.uint32))


def from_f64(a: np.ndarray) -> np.ndarray:
    """bf16 bits of f64 values, correctly rounded from f64 in one step (no detour through f32).
    Where the result is a normal bf16 or zero (every value but the tiny ones below 2^-126), by bit
    operations on the f64 word, as from_f32_bits does on the f32 word: add 2^44 - 1 plus the lowest
    kept bit, drop the low 45 bits (a carry runs into the exponent, past the largest f64 to inf);
    the result has 8 significant bits, so its f32 is exact, or inf past the largest bf16. The tiny
    ones, whose quantum is fixed at 2^-133, take the scaled rounding below."""
    shape = np.shape(a)
    a = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    b = a.view(np.uint64)
    kept = (b + np.uint64((1 << 44) - 1) + ((b >> np.uint64(45)) & np.uint64(1))) & ~np.uint64((1 << 45) - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        hi = (kept.view(np.float64).astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    mag = b & np.uint64(0x7FFFFFFFFFFFFFFF)
    tiny = (mag != 0) & (mag < np.uint64(0x3810000000000000))           # 0 < |a| < 2^-126
    nan = mag > np.uint64(0x7FF0000000000000)
    if tiny.any():
        hi[tiny] = _scaled(a[tiny])
    if nan.any():
        sign = ((b >> np.uint64(63)) << np.uint64(15)).astype(np.uint16)
        payload = ((b >> np.uint64(45)) & np.uint64(0x7F)).astype(np.uint16)  # the top 7 fraction bits
        hi = np.where(nan, sign | np.uint16(0x7F80 | QUIET) | payload, hi).astype(np.uint16)
    return hi.reshape(shape)


def _scaled(a: np.ndarray) -> np.ndarray:
    """bf16 bits of finite f64 values by scaling: each scaled by its own bf16 quantum (a power of two,
    so exactly), rounded to an integer half-even, and scaled back."""
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(a)                                  # |a| = m * 2^e, m in [0.5, 1)
        quantum = np.ldexp(1.0, np.maximum(e, EXP_MIN) - SIG_BITS)
        r = np.rint(a / quantum) * quantum                  # both steps exact in f64; rint is half-even
        r = np.where(np.isfinite(a) & (np.abs(r) >= OVERFLOW), np.copysign(np.inf, a), r)
    return (r.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)   # exact: r is a bf16


def rnd(a: np.ndarray) -> np.ndarray:
    """``rnd`` on values: f64 (or wider) from f64 directly, f32 by bits; bf16 and integers as given.
    Returns bf16 bits (uint16)."""
    a = np.asarray(a)
    if a.dtype == np.float32:
        return from_f32(a)
    if a.dtype.name == "bfloat16":
        return np.ascontiguousarray(a).view(np.uint16)
    return from_f64(a.astype(np.float64))


def to_f32(bits: np.ndarray) -> np.ndarray:
    """The f32 of each bf16 (exact): its bits in the high half of the word."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_words(bits: np.ndarray) -> np.ndarray:
    """The device's storage of bf16 bits: one 32-bit word each, the bf16 in the high half."""
    return np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)


def from_words(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bf16 bits, indices of malformed words) from device words: a word whose low half is not zero
    is no bf16 (a kernel that wrote an f32 without rounding it)."""
    w = np.asarray(words, dtype=np.uint32).reshape(-1)
    return (w >> np.uint32(16)).astype(np.uint16), np.flatnonzero(w & np.uint32(0xFFFF))


def as_bfloat16(bits: np.ndarray) -> np.ndarray:
    """bf16 bits as an ``ml_dtypes.bfloat16`` array (a view: no conversion, so no rounding)."""
    import ml_dtypes
    return np.ascontiguousarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16)


def ulp(a: np.ndarray) -> np.ndarray:
    """The bf16 ulp at each |value| (f64): the spacing of bf16 values in its binade, 2^-133 below
    the normal range."""
    a = np.abs(np.asarray(a, dtype=np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(a)
        e = np.where(a == 0, EXP_MIN, e)
        return np.ldexp(1.0, np.maximum(e, EXP_MIN) - SIG_BITS)
