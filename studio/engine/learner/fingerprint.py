"""Fingerprints of the learner's data: sha256 over length-prefixed parts, and of an array's dtype,
shape and C-order bytes (the same bits give the same hash). Checkpoints, contracts and the
agreement check are built from these."""
from __future__ import annotations

import hashlib

import numpy as np


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        b = p.encode("utf-8") if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def array_hash(a: np.ndarray) -> str:
    """sha256 of an array's dtype, shape and C-order bytes: the same bits give the same hash."""
    a = np.ascontiguousarray(a)
    return digest(str(a.dtype), repr(a.shape), a.tobytes())
