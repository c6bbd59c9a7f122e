"""What crosses between the device worker and its parent: arrays of SHM_MIN_BYTES or more
through shared memory (multiprocessing.shared_memory), everything else pickled. The side that
creates a segment unlinks it; the reader copies it out once."""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass

import msgspec
import numpy as np

from ..errors import StudioError

SHM_MIN_BYTES = 1 << 16          # arrays this large or larger cross through shared memory
SHM_DIR = "/dev/shm"             # where Linux keeps POSIX shared memory (tmpfs)


@dataclass(frozen=True)
class Shared:
    name: str
    dtype: str
    shape: tuple


def pack(obj, segments: list):
    """Replace large arrays (anywhere in dicts, lists, tuples, msgspec Structs: services/requests.py's
    reports) by shared-memory segments. All or nothing: when a segment cannot be created or filled
    (no room in /dev/shm, too many open files) every segment this call created is unlinked and a
    StudioError says so; ``segments`` is as it was."""
    start = len(segments)
    try:
        return _pack(obj, segments, "")
    except BaseException:
        for seg in segments[start:]:
            _drop(seg)
        del segments[start:]
        raise


def _pack(obj, segments: list, where: str):
    if isinstance(obj, np.ndarray) and obj.nbytes >= SHM_MIN_BYTES and obj.dtype.kind in "biufc":
        seg = _segment(obj.nbytes, where or "an array")
        segments.append(seg)
        np.ndarray(obj.shape, obj.dtype, buffer=seg.buf)[...] = obj
        return Shared(seg.name, obj.dtype.str, tuple(obj.shape))
    if isinstance(obj, dict):
        return {k: _pack(v, segments, f"{where}.{k}" if where else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v, segments, f"{where}[{i}]") for i, v in enumerate(obj))
    if isinstance(obj, msgspec.Struct):
        return _fields(obj, lambda k, v: _pack(v, segments, f"{where}.{k}" if where else k))
    return obj


def _fields(obj: msgspec.Struct, fn) -> msgspec.Struct:
    """A copy with ``fn(name, value)`` for each field (not validated again: arrays are typed ``Any``)."""
    return msgspec.structs.replace(obj, **{k: fn(k, getattr(obj, k)) for k in obj.__struct_fields__})


def _segment(size: int, what: str):
    """A new segment of ``size`` bytes whose memory is really there. On Linux a segment is a file
    in /dev/shm (tmpfs), sparse until written: a segment larger than the free space is created
    happily, and the first write past it kills the process with SIGBUS. So its blocks are reserved
    first (posix_fallocate: ENOSPC instead of a bus error)."""
    from multiprocessing import shared_memory
    try:
        st = os.statvfs(SHM_DIR)
        total = st.f_blocks * st.f_frsize
    except (OSError, AttributeError):         # not Linux (no /dev/shm, or no statvfs)
        total = None
    if total and size > total:               # can never fit: refused before anything is created
        raise _no_room(size, what, OSError(errno.ENOSPC, f"{SHM_DIR} holds {total} bytes in all"))
    try:
        seg = shared_memory.SharedMemory(create=True, size=size)     # unlinks itself if mmap fails
    except (OSError, ValueError, OverflowError) as e:
        raise _no_room(size, what, e) from None
    try:
        _reserve(seg.name, size)
    except OSError as e:
        _drop(seg)
        raise _no_room(size, what, e) from None
    return seg


def _reserve(name: str, size: int) -> None:
    path = os.path.join(SHM_DIR, name.lstrip("/"))
    if not (hasattr(os, "posix_fallocate") and os.path.exists(path)):
        return                                  # not Linux's /dev/shm: no sparse segments to fear
    fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))  # atomic-ok: reserves blocks, writes no data
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)):
            raise
    finally:
        os.close(fd)


def _no_room(size: int, what: str, e: BaseException) -> StudioError:
    free = ""
    try:
        st = os.statvfs(SHM_DIR)
        free = f"; {st.f_bavail * st.f_frsize} bytes are free in {SHM_DIR}"
    except (OSError, AttributeError):
        pass
    reason = getattr(e, "strerror", None) or str(e)
    return StudioError(f"could not place {what} ({size} bytes) in shared memory: {reason}{free}",
                       field=what,
                       hint=f"free space in {SHM_DIR} (remove stale psm_* segments) or enlarge it "
                            "(in a container: --shm-size), or run on smaller inputs")


def _drop(seg) -> None:
    try:
        seg.close()
    except (BufferError, OSError):
        pass
    try:
        seg.unlink()
    except FileNotFoundError:
        pass


def unpack(obj, *, unlink: bool):
    """Copy shared-memory arrays out; ``unlink`` when this side is the last reader."""
    from multiprocessing import shared_memory
    if isinstance(obj, Shared):
        seg = shared_memory.SharedMemory(name=obj.name)
        try:
            dtype = np.dtype(obj.dtype)
            need = int(np.prod(obj.shape, dtype=object)) * dtype.itemsize
            if need > seg.size:
                raise StudioError(f"a shared-memory array of {obj.shape} {dtype} ({need} bytes) arrived in a "
                                  f"{seg.size}-byte segment", field="shared memory",
                                  hint="this is a bug in Scellis Studio or a tampered segment")
            return np.ndarray(obj.shape, dtype, buffer=seg.buf).copy()
        finally:
            seg.close()
            if unlink:
                seg.unlink()
    if isinstance(obj, dict):
        return {k: unpack(v, unlink=unlink) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unpack(v, unlink=unlink) for v in obj)
    if isinstance(obj, msgspec.Struct):
        return _fields(obj, lambda _k, v: unpack(v, unlink=unlink))
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
    elif isinstance(obj, msgspec.Struct):
        for k in obj.__struct_fields__:
            discard(getattr(obj, k))
