"""Precision: the one table of element types — their size, numpy type, whether they are floating
point and how they are stored on the device — the guard words conformance fills buffers with, and
the reference path's precisions. Every module asks here instead of branching on "f32"; a new kind
(bf16, docs/bf16.md) lands as a row of this table and the functions below.

bf16 on the device: one 32-bit word per element, the bf16's 16 bits in the HIGH half and the low
half zero — so the word is the f32 of the same value, a kernel declares the binding
``array<f32>``, reads it as it is and writes only values it rounded with ``bf16_round``
(shaders/bf16.wgsl). A word read back with a non-zero low half is no bf16: the
kernel wrote an f32 it did not round (docs/bf16.md). Rounding into bf16 goes through
studio/engine/bfloat16.py (from f64 directly, never via f32)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import bfloat16


@dataclass(frozen=True)
class DType:
    name: str
    bytes: int
    numpy: str          # numpy's name (bfloat16 comes from ml_dtypes)
    floating: bool
    device: bool        # the device layer stores it (one 32-bit word per element; bf16 in the high half)


DTYPES = {d.name: d for d in (
    DType("f32", 4, "float32", True, True),
    DType("i32", 4, "int32", False, True),
    DType("u32", 4, "uint32", False, True),
    DType("bf16", 2, "bfloat16", True, True),
)}
DTYPE_BYTES = {k: d.bytes for k, d in DTYPES.items()}
NUMPY_DTYPE = {k: d.numpy for k, d in DTYPES.items()}
INT_RANGE = {"u32": (0, 2**32 - 1), "i32": (-2**31, 2**31 - 1)}
PRECISIONS = ("f64", "f32")          # the reference path's: f64 (declared) or the signature's own
WORD_BYTES = 4                       # a storage word on the device
POISON_WORD = 0x7FBADBAD             # a quiet NaN with a payload: "never written" under conformance
CANARY_WORD = 0xCA4A21E5             # the words after an output: "written past the end" when changed
CANARY_WORDS = 16


def is_float(dtype: str) -> bool:
    return DTYPES[dtype].floating


def numpy_dtype(dtype: str) -> np.dtype:
    if dtype == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(NUMPY_DTYPE[dtype])


def poison(dtype: str) -> int:
    """The 32-bit word an output element of ``dtype`` starts as under conformance."""
    return POISON_WORD


def round_to(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` rounded once to ``dtype``: bf16 correctly from f64 (or f32) by studio/engine/bfloat16.py
    (ml_dtypes' own casts are not used to round), every other type by numpy's cast."""
    a = np.asarray(a)
    if dtype == "bf16":
        with np.errstate(over="ignore", invalid="ignore"):
            return bfloat16.as_bfloat16(bfloat16.rnd(a)).reshape(a.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(numpy_dtype(dtype))


def to_reference(a: np.ndarray, dtype: str, precision: str) -> np.ndarray:
    """An input as the reference sees it: rounded to its own type, then widened to f64 when the
    contract's reference precision says so (floating types only). A bf16 operand reaches the
    reference widened (exactly) to f32 at its own precision: the confined host has numpy only."""
    a = np.asarray(a)
    if not is_float(dtype):
        return a.astype(numpy_dtype(dtype))
    a = round_to(a, dtype)
    if precision == "f64":
        return a.astype(np.float64)
    return a.astype(np.float32) if dtype == "bf16" else a


def to_device(a: np.ndarray, dtype: str) -> np.ndarray:
    """The words (or typed elements) a device buffer of ``dtype`` holds for ``a``: bf16 rounded,
    then in the high half of a u32."""
    a = np.asarray(a)
    if dtype == "bf16":
        return np.ascontiguousarray(bfloat16.to_words(bfloat16.rnd(a)).reshape(a.shape))
    return np.ascontiguousarray(a.astype(numpy_dtype(dtype)))


def from_device(words: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, indices of malformed words) from 32-bit device words. Only bf16 words can be
    malformed (a low half that is not zero); the poison word is left to the guard to name."""
    words = np.asarray(words, dtype=np.uint32)
    if dtype != "bf16":
        return words.view(numpy_dtype(dtype)), np.array([], int)
    bits, bad = bfloat16.from_words(words)
    bad = bad[words.reshape(-1)[bad] != POISON_WORD]
    return bfloat16.as_bfloat16(bits).reshape(words.shape), bad


def words_of(a: np.ndarray) -> np.ndarray:
    """The 32-bit device words of a typed array (flat): bf16 values in the high half."""
    a = np.ascontiguousarray(a).reshape(-1)
    if a.dtype.name == "bfloat16":
        return bfloat16.to_words(a.view(np.uint16))
    return a.view(np.uint32)


def to_f64(a: np.ndarray, dtype: str) -> np.ndarray:
    """Unrounded f64 for floating types (the VJP's and gradcheck's view), the exact type otherwise."""
    return np.asarray(a).astype(np.float64 if is_float(dtype) else numpy_dtype(dtype))
