"""Precision: the one table of element types — their size, numpy type, whether they are floating
point and how they are stored on the device — the guard words conformance fills buffers with, and
the reference path's precisions. Every module asks here instead of branching on "f32"; a new kind
(bf16, LEARNER.md §10) lands as a row of this table and the functions below."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    bytes: int
    numpy: str          # numpy's name (bfloat16 comes from ml_dtypes)
    floating: bool
    device: bool        # the device layer stores it (one 32-bit word per element today)


DTYPES = {d.name: d for d in (
    DType("f32", 4, "float32", True, True),
    DType("i32", 4, "int32", False, True),
    DType("u32", 4, "uint32", False, True),
    DType("bf16", 2, "bfloat16", True, False),
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


def to_reference(a: np.ndarray, dtype: str, precision: str) -> np.ndarray:
    """An input as the reference sees it: rounded to its own type, then widened to f64 when the
    contract's reference precision says so (floating types only)."""
    a = np.asarray(a)
    if not is_float(dtype):
        return a.astype(numpy_dtype(dtype))
    a = a.astype(numpy_dtype(dtype))
    return a.astype(np.float64) if precision == "f64" else a


def to_f64(a: np.ndarray, dtype: str) -> np.ndarray:
    """Unrounded f64 for floating types (the VJP's and gradcheck's view), the exact type otherwise."""
    return np.asarray(a).astype(np.float64 if is_float(dtype) else numpy_dtype(dtype))
