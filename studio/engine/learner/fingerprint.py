"""Fingerprints of the learner's data: sha256 over length-prefixed parts, and of an array's dtype,
shape and C-order bytes (the same bits give the same hash). Checkpoints, contracts and the
agreement check are built from these."""
from __future__ import annotations

import hashlib

import numpy as np

from ..records.canonical import array_hash as records_array_hash


def digest(*parts: bytes | str | memoryview) -> str:
    """sha256 over the parts, each prefixed by its length; a buffer (an array's memoryview) is read
    where it lies, not copied."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode("utf-8") if isinstance(p, str) else memoryview(p).cast("B")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def array_hash(a: np.ndarray) -> str:
    """The one array digest (studio/engine/records/canonical.py): dtype, shape and C-order bytes."""
    return records_array_hash(a)
