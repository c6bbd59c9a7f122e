"""The frame codec between the engine and a confined reference host (both sides use it: the
engine imports it as ``studio.engine.trust.codec``, the host loads this file by its path).

A frame is ``u32 header length | header (JSON, utf-8) | per buffer: u64 length | bytes``. The
header holds the message and the value, in which every array is ``{"__nd__": i, "dtype",
"shape"}`` naming buffer ``i``. There is no pickle in either direction: a reply from code we do
not trust is decoded as JSON and numeric numpy buffers only.

Decoding is bounded before anything is allocated: the header's own size is capped; then every
buffer's size is computed from the dtype and shape the header gives it, each buffer must be
named exactly once, and their total must fit the reader's limit for this frame (the caller
derives it from the op's signature, studio/engine/trust/reference.py) — all before the first
buffer byte is read. Each buffer is then read straight from the pipe into the array it becomes
(one copy: kernel to array), and arrays are sent from their own memory (no copy on encoding).

Like the host, this file imports only the standard library at its top level (numpy inside the
functions) and nothing of the engine.
"""
from __future__ import annotations

import json
import os
import struct

_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
MAX_HEADER = 16 << 20
MIN_HEADER = 1 << 20                  # a header may always be this long, whatever the limit
NUMERIC_KINDS = "biufc"
MAX_DEPTH = 32
MAX_BUFFERS = 1 << 16
MAX_DIMS = 32


class ReplyTooLarge(ValueError):
    """A frame whose arrays (as its header declares them) exceed the reader's limit."""

    def __init__(self, size: int, limit: int, what: str = "its arrays hold"):
        super().__init__(f"{what} {size} bytes, more than the {limit} bytes allowed")
        self.size, self.limit = size, limit


# ----------------------------------------------------------------------------- encoding
def _encode_value(obj, buffers: list, depth: int = 0):
    import numpy as np
    if depth > MAX_DEPTH:
        raise ValueError("value nests too deeply")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return obj if not isinstance(obj, float) or obj == obj and abs(obj) != float("inf") else {"__float__": repr(obj)}
    if isinstance(obj, (np.ndarray, np.generic)):
        a = np.asarray(obj)
        if a.dtype.kind not in NUMERIC_KINDS or a.dtype.hasobject or a.dtype.fields is not None:
            raise TypeError(f"an array of dtype {a.dtype} cannot cross (numeric arrays only)")
        a = np.ascontiguousarray(a).reshape(-1)           # a view when already contiguous
        buffers.append(memoryview(a.view(np.uint8)))
        return {"__nd__": len(buffers) - 1, "dtype": a.dtype.str, "shape": list(np.shape(obj))}
    if isinstance(obj, (list, tuple)):
        items = [_encode_value(v, buffers, depth + 1) for v in obj]
        return items if isinstance(obj, list) else {"__tuple__": items}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("only dicts with string keys can cross")
        return {"__dict__": {k: _encode_value(v, buffers, depth + 1) for k, v in obj.items()}}
    raise TypeError(f"a value of type {type(obj).__name__} cannot cross (arrays, numbers, strings, "
                    f"lists, tuples and dicts only)")


def encode_parts(msg: dict, payload=None) -> list:
    """A frame as a list of bytes and memoryviews (the arrays' own memory), to be written in order."""
    buffers: list = []
    header = {"msg": msg}
    if payload is not None:
        header["value"] = _encode_value(payload, buffers)
    header["buffers"] = len(buffers)
    head = json.dumps(header).encode("utf-8")
    parts = [_U32.pack(len(head)) + head]
    for b in buffers:
        parts += [_U64.pack(b.nbytes), b]
    return parts


def encode_frame(msg: dict, payload=None) -> bytes:
    return b"".join(encode_parts(msg, payload))


def parts_size(parts: list) -> int:
    return sum(memoryview(p).nbytes for p in parts)


# ----------------------------------------------------------------------------- decoding
def _plan(obj, nbuf: int, plan: dict, depth: int = 0) -> None:
    """Collect every array the value declares (buffer index -> dtype, shape, bytes), refusing a
    buffer named twice, a dtype that is not numeric, and shapes that are not lists of sizes."""
    import numpy as np
    if depth > MAX_DEPTH:
        raise ValueError("value nests too deeply")
    if isinstance(obj, list):
        for v in obj:
            _plan(v, nbuf, plan, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    if "__nd__" in obj:
        i = obj["__nd__"]
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < nbuf:
            raise ValueError(f"an array names buffer {i!r}, which the frame does not have")
        if i in plan:
            raise ValueError(f"buffer {i} is named by more than one array")
        if not isinstance(obj.get("dtype"), str):
            raise ValueError("an array without a dtype")
        try:
            dt = np.dtype(obj["dtype"])
        except (TypeError, ValueError):
            raise ValueError(f"refused dtype {obj['dtype'][:40]!r}") from None
        if dt.kind not in NUMERIC_KINDS or dt.hasobject or dt.fields is not None or dt.subdtype is not None:
            raise ValueError(f"refused dtype {dt}")
        shape = obj.get("shape")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS or \
                not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise ValueError("an array's shape is not a list of sizes")
        count = 1
        for s in shape:
            count *= s
        plan[i] = (dt, tuple(shape), count * dt.itemsize)
        return
    for key in ("__tuple__", "__dict__"):
        if key in obj:
            inner = obj[key]
            _plan(list(inner.values()) if isinstance(inner, dict) else inner, nbuf, plan, depth + 1)


def _decode_value(obj, arrays: dict, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ValueError("value nests too deeply")
    if isinstance(obj, list):
        return [_decode_value(v, arrays, depth + 1) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__nd__" in obj:
        a = arrays[obj["__nd__"]]
        return a[()] if a.shape == () else a
    if "__tuple__" in obj and isinstance(obj["__tuple__"], list):
        return tuple(_decode_value(v, arrays, depth + 1) for v in obj["__tuple__"])
    if "__dict__" in obj and isinstance(obj["__dict__"], dict):
        return {str(k): _decode_value(v, arrays, depth + 1) for k, v in obj["__dict__"].items()}
    if "__float__" in obj and isinstance(obj["__float__"], str):
        return float(obj["__float__"])
    raise ValueError("unknown value marker")


class FrameReader:
    """Reads frames from a file descriptor, with a deadline and a cap on the bytes accepted:
    ``max_bytes`` for every frame, narrowed per frame by ``read(limit=…)``."""

    def __init__(self, fd: int, max_bytes: int):
        self.fd = fd
        self.max_bytes = max_bytes

    def _wait(self, deadline: float | None) -> None:
        if deadline is None:
            return
        import select
        import time
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.fd], [], [], left)[0]:
            raise TimeoutError

    def _read_into(self, view: memoryview, deadline: float | None) -> None:
        pos, n = 0, view.nbytes
        readv = getattr(os, "readv", None)
        while pos < n:
            self._wait(deadline)
            if readv is not None:
                got = readv(self.fd, [view[pos:]])
            else:                                  # no readv (Windows): bounded chunks
                chunk = os.read(self.fd, min(n - pos, 1 << 24))
                got = len(chunk)
                view[pos:pos + got] = chunk
            if not got:
                raise EOFError
            pos += got

    def _read(self, n: int, deadline: float | None) -> bytes:
        buf = bytearray(n)
        self._read_into(memoryview(buf), deadline)
        return bytes(buf)

    def read(self, deadline: float | None = None, limit: int | None = None):
        """One frame: (message, value). ``limit`` caps the bytes its arrays may hold; a frame over
        it raises ReplyTooLarge before any of its buffers is read."""
        import numpy as np
        limit = self.max_bytes if limit is None else min(int(limit), self.max_bytes)
        (hlen,) = _U32.unpack(self._read(4, deadline))
        hcap = min(MAX_HEADER, MIN_HEADER + limit)
        if hlen > hcap:
            raise ReplyTooLarge(hlen, hcap, "its header is")
        try:
            header = json.loads(self._read(hlen, deadline).decode("utf-8"))
        except RecursionError:
            raise ValueError("header nests too deeply") from None
        if not isinstance(header, dict) or not isinstance(header.get("msg"), dict):
            raise ValueError("frame without a message")
        nbuf = header.get("buffers", 0)
        if not isinstance(nbuf, int) or isinstance(nbuf, bool) or not 0 <= nbuf <= MAX_BUFFERS:
            raise ValueError(f"frame with {nbuf!r} buffers")
        plan: dict = {}
        if "value" in header:
            _plan(header["value"], nbuf, plan)
        if len(plan) != nbuf:
            raise ValueError(f"{nbuf - len(plan)} of the frame's {nbuf} buffers belong to no array")
        total = sum(size for _, _, size in plan.values())
        if total > limit:
            raise ReplyTooLarge(total, limit)
        arrays = {}
        for i in range(nbuf):
            dt, shape, size = plan[i]
            (blen,) = _U64.unpack(self._read(8, deadline))
            if blen != size:
                raise ValueError(f"buffer {i} has {blen} bytes, its dtype and shape say {size}")
            a = np.empty(shape, dtype=dt)
            if size:
                self._read_into(memoryview(a.reshape(-1).view(np.uint8)), deadline)
            if dt.kind == "b" and size and a.view(np.uint8).max() > 1:
                raise ValueError(f"buffer {i} is not a valid boolean array")
            arrays[i] = a
        value = _decode_value(header["value"], arrays) if "value" in header else None
        return header["msg"], value
