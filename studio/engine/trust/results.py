"""Cached reference results: what an op's Python reference answered, keyed by its reference hash
(code.py: the files its confined process receives, the reference file's path and bytes and the
``[reference]`` table of op.toml), the reference file, the function and a digest of the arguments
(every array's dtype, shape and bytes, every number). So a result is found again only for the same
Python, never for another package's reference that merely has the same file name. A kernel edit
changes none of these, so conformance after a kernel edit asks the reference nothing
(docs/performance.md).

Two levels: memory (bounded, MEMORY_BYTES, least recently used first out) and the user folder
(``cache/reference/<reference hash>/``, studio/engine/records/places.py). On disk an entry lives in
a pack: the arrays in ``<pack>.npz`` (no pickles) beside a sealed JSON index
(``scellis-reference-results/1``: the user folder's HMAC seal, studio/engine/records/seal.py) that
holds each array's digest. A pack whose index is not sealed by this folder, or an array whose
bytes do not hash to the sealed digest, is refused: never used, deleted, and counted in
``refused``; the reference then runs again. The confined reference process cannot reach the user
folder (host.py denies it), so only this user's own processes write there.

The cache is used only where the caller asks for it (``References.caching``): conformance, whose
verdicts are the same whichever run of a deterministic reference they use. The category check that
a generator is deterministic calls the reference twice on purpose and never reads it.

``remember``/``recall`` keep derived verdicts (backward conformance, the category check,
gradcheck) in memory by the hashes they depend on."""
from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import secrets
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..atomic import write_bytes
from ..errors import StudioError
from ..records.canonical import array_hash
from ..records.places import cache_folder
from ..records.reader import read_record
from ..records.seal import Seal
from ..records.writer import write_record

SCHEMA = "scellis-reference-results/1"
MEMORY_BYTES = 512 << 20        # results kept in this process
DISK_BYTES = 1 << 30            # per reference hash in the user folder; the oldest packs go first
TOTAL_DISK_BYTES = 4 << 30      # all reference hashes together (a user proving many ops); oldest first too
OPEN_PACKS = 16                 # packs kept open for reading in this process
ENTRY_MAX_BYTES = 64 << 20      # a larger result stays in memory only
INDEX_MAX_BYTES = 16 << 20
VERDICTS = 256
_HEX = frozenset("0123456789abcdef")


def _arg_digest(h, value) -> bool:
    """Feed one argument into ``h``; False when it is of a kind the cache does not key on."""
    if isinstance(value, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(value)
        if a.dtype.hasobject:
            return False
        h.update(b"A" + a.dtype.str.encode() + b"\0" + json.dumps(list(a.shape)).encode() + b"\0")
        h.update(memoryview(a.view(np.uint8) if a.dtype.name == "bfloat16" else a).cast("B") if a.size else b"")
        return True
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        h.update(b"S" + repr((type(value).__name__, value)).encode() + b"\0")
        return True
    if isinstance(value, (list, tuple)):
        h.update(b"L" if isinstance(value, list) else b"T")
        h.update(str(len(value)).encode() + b"\0")
        return all(_arg_digest(h, v) for v in value)
    if isinstance(value, dict):
        h.update(b"D" + str(len(value)).encode() + b"\0")
        for k in sorted(value, key=str):
            if not isinstance(k, str):
                return False
            h.update(k.encode() + b"\0")
            if not _arg_digest(h, value[k]):
                return False
        return True
    return False


def result_key(code: str, reference_file: str, fn: str, kwargs: dict) -> str | None:
    """The cache key of one call, or None when an argument cannot be keyed (then nothing is cached)."""
    h = hashlib.sha256(b"scellis-reference-call/2\0" + f"{code}\0{reference_file}\0{fn}\0".encode())
    return h.hexdigest() if _arg_digest(h, dict(kwargs)) else None


def _nbytes(value) -> int:
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values()) + 64
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value) + 64
    return 64


def _flatten(value, arrays: list) -> dict | None:
    """A JSON structure for ``value`` whose arrays go to ``arrays``; None when it holds anything else."""
    if isinstance(value, np.ndarray) and not value.dtype.hasobject and value.dtype.name != "bfloat16":
        arrays.append(value)
        return {"t": "array", "i": len(arrays) - 1}
    if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, (str, bytes)):
        a = np.asarray(value)
        if a.dtype.hasobject:
            return None
        arrays.append(a)
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else \
            "float" if isinstance(value, float) else "numpy"
        return {"t": kind, "i": len(arrays) - 1}
    if value is None:
        return {"t": "none"}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, (list, tuple)):
        items = [_flatten(v, arrays) for v in value]
        return None if any(i is None for i in items) else {"t": type(value).__name__, "items": items}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _flatten(v, arrays) for k, v in value.items()}
        return None if any(i is None for i in items.values()) else {"t": "dict", "items": items}
    return None


def _rebuild(struct: dict, arrays: list):
    t = struct["t"]
    if t == "array":
        return arrays[struct["i"]]
    if t in ("bool", "int", "float"):
        return {"bool": bool, "int": int, "float": float}[t](arrays[struct["i"]].item())
    if t == "numpy":
        return arrays[struct["i"]][()]
    if t == "none":
        return None
    if t == "str":
        return struct["v"]
    if t in ("list", "tuple"):
        items = [_rebuild(s, arrays) for s in struct["items"]]
        return items if t == "list" else tuple(items)
    if t == "dict":
        return {k: _rebuild(s, arrays) for k, s in struct["items"].items()}
    raise ValueError(f"unknown structure {t!r}")


class ResultCache:
    """The reference results of one user folder (``home``), for one process."""

    def __init__(self, home: Path | None, *, memory_bytes: int = MEMORY_BYTES):
        self.home = Path(home) if home is not None else None
        self.seal = Seal(self.home) if self.home is not None else None
        self.memory_bytes = memory_bytes
        self._mem: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self._mem_total = 0
        self._pending: dict[str, dict[str, object]] = {}        # reference hash -> key -> value
        self._index: dict[str, dict[str, tuple[Path, dict, list, int]]] = {}   # reference hash -> key -> entry
        self._verdicts: OrderedDict[tuple, object] = OrderedDict()
        self._packs: OrderedDict[Path, object] = OrderedDict()   # open packs: a zip's directory is read once
        self.hits = self.disk_hits = self.misses = 0
        self.refused: list[str] = []          # why an entry on disk was not used

    # ---------------------------------------------------------------- memory
    def _keep(self, key: str, value, size: int) -> None:
        if size > self.memory_bytes:
            return
        old = self._mem.pop(key, None)
        if old is not None:
            self._mem_total -= old[1]
        self._mem[key] = (value, size)
        self._mem_total += size
        while self._mem_total > self.memory_bytes and self._mem:
            self._mem_total -= self._mem.popitem(last=False)[1][1]

    def get(self, code: str, key: str):
        """A copy of the cached result, or None (a miss)."""
        hit = self._mem.get(key)
        if hit is not None:
            self._mem.move_to_end(key)
            self.hits += 1
            return copy.deepcopy(hit[0])
        value = self._from_disk(code, key)
        if value is not None:
            self.disk_hits += 1
            self._keep(key, value, _nbytes(value))
            return copy.deepcopy(value)
        self.misses += 1
        return None

    def put(self, code: str, key: str, value) -> None:
        value = copy.deepcopy(value)
        size = _nbytes(value)
        self._keep(key, value, size)
        if self.home is not None and size <= ENTRY_MAX_BYTES:
            self._pending.setdefault(code, {})[key] = value

    # ---------------------------------------------------------------- derived verdicts
    def recall(self, key: tuple):
        hit = self._verdicts.get(key)
        if hit is not None:
            self._verdicts.move_to_end(key)
        return hit

    def remember(self, key: tuple, verdict) -> None:
        self._verdicts[key] = verdict
        while len(self._verdicts) > VERDICTS:
            self._verdicts.popitem(last=False)

    # ---------------------------------------------------------------- disk
    def folder(self, code: str) -> Path:
        if len(code) != 64 or not set(code) <= _HEX:
            raise ValueError(f"not a reference hash: {code!r}")
        return cache_folder(self.home, "reference") / code

    def _refuse(self, why: str, *paths: Path) -> None:
        self.refused.append(why)
        for p in paths:
            self._close(p)
            try:
                p.unlink()
            except OSError:
                pass

    def _load_index(self, code: str) -> dict:
        index = self._index.get(code)
        if index is not None:
            return index
        index = self._index[code] = {}
        if self.home is None:
            return index
        folder = self.folder(code)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return index
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            path, pack = folder / name, folder / (name[:-5] + ".npz")
            try:
                rec = read_record(path, self.seal, schema=SCHEMA, what="a cached reference result",
                                  hint="it is a cache: it is deleted and the reference runs again",
                                  max_bytes=INDEX_MAX_BYTES)
            except StudioError as e:
                self._refuse(e.message, path, pack)
                continue
            if not rec.seal.ok or rec.doc.get("reference_hash") != code:
                why = rec.seal.why or "it names another reference hash"
                self._refuse(f"{path}: not sealed by this user folder ({why})", path, pack)
                continue
            entries = rec.doc.get("entries")
            if not isinstance(entries, dict):
                self._refuse(f"{path}: no entries", path, pack)
                continue
            for key, e in entries.items():
                if isinstance(e, dict) and isinstance(e.get("arrays"), list) and \
                        isinstance(e.get("structure"), dict) and isinstance(e.get("first"), int):
                    index[key] = (pack, e["structure"], e["arrays"], e["first"])
        return index

    def _from_disk(self, code: str, key: str):
        if self.home is None:
            return None
        entry = self._load_index(code).get(key)
        if entry is None:
            return None
        pack, struct, digests, first = entry
        try:
            z = self._open(pack)
            arrays = [z[f"a{first + i}"] for i in range(len(digests))]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            self._close(pack)
            self._index[code].pop(key, None)
            self._refuse(f"{pack}: unreadable ({e})")
            return None
        for i, (a, d) in enumerate(zip(arrays, digests)):
            if not isinstance(d, dict) or array_hash(a) != d.get("sha256"):
                self._drop_pack(code, pack)
                self._refuse(f"{pack}: array {i} of an entry does not match its sealed digest (edited after it "
                             f"was written)", pack, pack.with_suffix(".json"))
                return None
        try:
            return _rebuild(struct, arrays)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            self._index[code].pop(key, None)
            self._refuse(f"{pack}: malformed entry ({e})")
            return None

    def _open(self, pack: Path):
        """The pack, opened once and kept (the few most recent): numpy reads a zip's whole directory at
        every open, which cost 12 ms a lookup in a pack of thousands of arrays. A pack is never
        rewritten (each flush writes a new name), and every array read is checked against its sealed
        digest, so a kept handle reads what the sealed index describes or is refused."""
        z = self._packs.get(pack)
        if z is not None:
            self._packs.move_to_end(pack)
            return z
        z = self._packs[pack] = np.load(pack, allow_pickle=False)
        while len(self._packs) > OPEN_PACKS:
            self._packs.popitem(last=False)[1].close()
        return z

    def _close(self, pack: Path) -> None:
        z = self._packs.pop(pack, None)
        if z is not None:
            z.close()

    def _drop_pack(self, code: str, pack: Path) -> None:
        self._close(pack)
        index = self._index.get(code, {})
        for k in [k for k, e in index.items() if e[0] == pack]:
            del index[k]

    def flush(self) -> int:
        """Write the results gathered since the last flush into one pack per reference hash;
        returns how many entries were written. A folder that cannot be written keeps them in
        memory only (the cache is an optimisation, never a reason to fail)."""
        written = 0
        pending, self._pending = self._pending, {}
        for code, entries in pending.items():
            arrays: list = []
            index = {}
            for key, value in entries.items():
                start = len(arrays)
                struct = _flatten(value, arrays)
                if struct is None:
                    del arrays[start:]
                    continue
                index[key] = {"structure": _shift(struct, -start),
                              "arrays": [{"sha256": array_hash(a), "dtype": a.dtype.name, "shape": list(a.shape)}
                                         for a in arrays[start:]]}
            if not index:
                continue
            folder = self.folder(code)
            name = secrets.token_hex(8)
            buf = io.BytesIO()
            flat = {}
            at = 0
            for e in index.values():
                n = len(e["arrays"])
                for j in range(n):
                    flat[f"a{len(flat)}"] = arrays[at + j]
                e["first"] = at
                at += n
            # one npz per pack: arrays are numbered across entries; each entry's structure is rebased
            np.savez(buf, **flat)
            pack = folder / f"{name}.npz"
            try:
                write_bytes(pack, buf.getvalue())
                write_record(folder / f"{name}.json", {"schema": SCHEMA, "reference_hash": code, "entries": {
                    k: {"structure": e["structure"], "arrays": e["arrays"], "first": e["first"]}
                    for k, e in index.items()}}, self.seal, what="the reference results cache")
            except (OSError, StudioError):
                continue
            written += len(index)
            self._index.pop(code, None)              # read again (sealed) on next use
            self._trim(folder)
        return written

    def _trim(self, folder: Path) -> None:
        """The oldest packs out: of ``folder`` (one reference hash) past DISK_BYTES, then of every
        reference hash's folder together past TOTAL_DISK_BYTES."""
        for packs, limit in ((folder.glob("*.npz"), DISK_BYTES), (folder.parent.glob("*/*.npz"), TOTAL_DISK_BYTES)):
            try:
                sized = sorted((st.st_mtime_ns, st.st_size, p) for p in packs for st in (p.stat(),))
            except OSError:
                return
            total = sum(size for _, size, _ in sized)
            for _, size, p in sized:
                if total <= limit:
                    break
                total -= size
                self._close(p)
                for q in (p, p.with_suffix(".json")):
                    try:
                        q.unlink()
                    except OSError:
                        pass


def _shift(struct: dict, by: int) -> dict:
    """``struct`` with its array indices moved by ``by`` (relative to the entry's first array)."""
    out = dict(struct)
    if "i" in out:
        out["i"] = out["i"] + by
    if isinstance(out.get("items"), list):
        out["items"] = [_shift(s, by) for s in out["items"]]
    elif isinstance(out.get("items"), dict):
        out["items"] = {k: _shift(s, by) for k, s in out["items"].items()}
    return out
