"""One canonical form for every record: the bytes a seal and a digest cover, and the one digest of
an array (dtype, shape, C-order bytes), so the same value always hashes the same way everywhere."""
from __future__ import annotations

import hashlib
import json

import numpy as np

ARRAY_HASH = "sha256(b'scellis-array/1\\0' + dtype + b'\\0' + json(shape) + b'\\0' + C-order bytes)"


def canonical(value) -> bytes:
    """Sorted keys, no whitespace, ASCII; floats as Python's repr (which round-trips exactly), so a
    record read back gives the same bytes. NaN and infinities are refused (records hold none)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def digest(value) -> str:
    """sha256 of the canonical bytes of a JSON value."""
    return hashlib.sha256(canonical(value)).hexdigest()


def array_digest(a) -> dict:
    """An array's identity: its sha256 (ARRAY_HASH), dtype name and shape. bf16 hashes its 16 bits."""
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(b"scellis-array/1\0")
    h.update(a.dtype.str.encode() + b"\0" + json.dumps(list(a.shape)).encode() + b"\0")
    bits = a.view(np.uint16) if a.dtype.name == "bfloat16" else a     # bf16: no buffer protocol of its own
    h.update(memoryview(bits).cast("B") if a.size else b"")
    return {"sha256": h.hexdigest(), "dtype": a.dtype.name, "shape": list(a.shape)}


def array_hash(a) -> str:
    return array_digest(a)["sha256"]
