"""What crosses between the device worker and its parent: arrays of SHM_MIN_BYTES or more
through shared memory (multiprocessing.shared_memory), everything else pickled. The side that
creates a segment unlinks it; the reader copies it out once."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHM_MIN_BYTES = 1 << 16          # arrays this large or larger cross through shared memory


@dataclass(frozen=True)
class Shared:
    name: str
    dtype: str
    shape: tuple


def pack(obj, segments: list):
    """Replace large arrays (anywhere in dicts, lists, tuples) by shared-memory segments."""
    from multiprocessing import shared_memory
    if isinstance(obj, np.ndarray) and obj.nbytes >= SHM_MIN_BYTES and obj.dtype.kind in "biufc":
        seg = shared_memory.SharedMemory(create=True, size=obj.nbytes)
        segments.append(seg)
        np.ndarray(obj.shape, obj.dtype, buffer=seg.buf)[...] = obj
        return Shared(seg.name, obj.dtype.str, tuple(obj.shape))
    if isinstance(obj, dict):
        return {k: pack(v, segments) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(pack(v, segments) for v in obj)
    return obj


def unpack(obj, *, unlink: bool):
    """Copy shared-memory arrays out; ``unlink`` when this side is the last reader."""
    from multiprocessing import shared_memory
    if isinstance(obj, Shared):
        seg = shared_memory.SharedMemory(name=obj.name)
        try:
            return np.ndarray(obj.shape, np.dtype(obj.dtype), buffer=seg.buf).copy()
        finally:
            seg.close()
            if unlink:
                seg.unlink()
    if isinstance(obj, dict):
        return {k: unpack(v, unlink=unlink) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unpack(v, unlink=unlink) for v in obj)
    return obj


def discard(obj) -> None:
    """Unlink the segments of a reply nobody will read (a stale or failed request)."""
    from multiprocessing import shared_memory
    if isinstance(obj, Shared):
        try:
            seg = shared_memory.SharedMemory(name=obj.name)
            seg.close()
            seg.unlink()
        except FileNotFoundError:
            pass
    elif isinstance(obj, dict):
        for v in obj.values():
            discard(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            discard(v)
