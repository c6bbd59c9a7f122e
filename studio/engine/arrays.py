"""User arrays in and out: ``.npy`` (numpy's own format, no pickles) and ``.csv`` (numbers, one
sample per row). The one reader and writer of the CLI, the Studio and the engine; every write is
crash-safe (temp, fsync, rename).

Reading is bounded (docs/reliability.md, "Hostile files"): the file's type and size come from
``stat`` before it is opened (a FIFO or a device is never opened, so nothing blocks), it is opened
O_NONBLOCK and checked again with ``fstat``, and a ``.npy``'s header (shape and dtype) is judged
against the limit and the signature before a byte of data is read; the data is then read once,
into the array. ``check_input`` judges an array against the signature's tensor (its dtype and its
value domain: no NaN or ±inf in a ``finite`` input)."""
from __future__ import annotations

import errno
import io
import math
import os
import re
import stat
import warnings
from pathlib import Path

import numpy as np

from .atomic import write_bytes
from .errors import StudioError
from .precision import INT_RANGE, is_float, numpy_dtype

MAX_ARRAY_BYTES = 1 << 31         # the most one input may allocate unless the caller knows a tighter limit
MAX_CSV_BYTES = 256 << 20         # a bigger table belongs in a .npy
_NPY_MAGIC, _ZIP_MAGIC = b"\x93NUMPY", b"PK\x03\x04"
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_KINDS = {"c": "complex numbers", "M": "dates and times (datetime64)", "m": "time spans (timedelta64)",
          "U": "text (a string dtype)", "S": "bytes (a string dtype)", "V": "records (a structured dtype)",
          "O": "Python objects", "b": "true/false values (bool)"}
_CSV_POS = (re.compile(r"at row (\d+), column (\d+)"), re.compile(r"at row (\d+)"))
_CHUNK = 1 << 20                  # elements checked at a time (bounded extra memory)
_HINT = "a .npy saved by numpy (np.save), or numbers in a .csv"


def available_memory() -> int:
    """Bytes of memory this machine has available now (psutil: MemAvailable on Linux): what a
    learner's vectors and a workflow's values are planned against before anything is allocated."""
    import psutil
    try:
        return int(psutil.virtual_memory().available)
    except (psutil.Error, OSError, RuntimeError):
        return 1 << 34


def file_kind(mode: int) -> str:
    """'a FIFO (named pipe)', 'a character device', ... for a stat mode (for messages)."""
    for test, what in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symlink"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "a special file"


def input_beneath(base: str | Path, rel: str) -> Path:
    """A file that a shared file (a workflow, a learner) names as an input: a relative path with no
    ``..``, no ``~`` and no drive, beneath ``base`` (that file's folder), and no part of it a
    symlink, so what is read is a file of that folder and never one a link leads to (the seal
    key, a credentials file). Its type (a regular file, never a FIFO or a device) is the reader's
    check. A StudioError without a position: the caller names the field."""
    parts = rel.replace("\\", "/").split("/")
    if (not rel.strip() or rel.startswith(("/", "~")) or "\0" in rel or Path(rel).is_absolute()
            or ".." in parts or re.match(r"[A-Za-z]:", rel)):
        raise StudioError(f"'{rel[:200]}' is not a path inside the folder of the file that names it",
                          hint="a relative path without '..', e.g. \"data/signal.npy\"; copy the input there")
    p = Path(base)
    names = [q for q in parts if q not in ("", ".")]
    for k, part in enumerate(names):
        p = p / part
        try:
            st = os.lstat(p)
        except (OSError, ValueError):
            break                              # missing: the reader says so
        if stat.S_ISLNK(st.st_mode):
            how = "is a symlink" if k == len(names) - 1 else f"goes through a symlink ({'/'.join(names[:k + 1])})"
            raise StudioError(f"'{rel[:200]}' {how}: an input is read only from a regular file of the folder "
                              "itself", file=str(p), hint="replace the symlink by the file itself (a copy)")
    return Path(base) / rel


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    """An fd of a regular file, found so without opening anything else and without blocking."""
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            fd = os.open(path, _OPEN_FLAGS)
            st = os.fstat(fd)                   # what was opened, not what was there a moment ago
            if stat.S_ISREG(st.st_mode):
                return fd, st
            os.close(fd)
    except FileNotFoundError:
        raise StudioError(f"no such file: {path}", file=str(path), hint="give a .npy or .csv file") from None
    except (OSError, ValueError) as e:          # ValueError: a NUL in the name
        raise StudioError(f"cannot read it: {getattr(e, 'strerror', None) or e}", file=str(path),
                          hint=_HINT) from None
    raise StudioError(f"this is {file_kind(st.st_mode)}, not a regular file", file=str(path), hint=_HINT)


def _read_exact(f, buf: memoryview, path: Path) -> None:
    got = 0
    while got < len(buf):
        n = f.readinto(buf[got:])
        if not n:
            raise StudioError(f"the file is truncated: its header promises {len(buf)} bytes of data, the file "
                              f"holds {got}", file=str(path), hint="save the array again (np.save)")
        got += n


def _npy_header(f, path: Path) -> tuple[tuple[int, ...], bool, np.dtype]:
    head = f.read(8)
    if not head:
        raise StudioError("the file is empty (0 bytes), not a .npy array", file=str(path), hint=_HINT)
    if head.startswith(_ZIP_MAGIC):
        raise StudioError("the file is an .npz archive (several arrays), not one array", file=str(path),
                          hint="save the one array with np.save(path, a), or take it out: np.load(npz)['name']")
    if not head.startswith(_NPY_MAGIC) or len(head) < 8:
        raise StudioError("the file is not a .npy file (it does not start with numpy's magic bytes)", file=str(path),
                          hint=_HINT)            # never its bytes: they may be anyone's secret
    version = (head[6], head[7])
    try:
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f".npy format version {version[0]}.{version[1]} (1.0 and 2.0 hold arrays of numbers)")
    except (ValueError, EOFError, OSError, SyntaxError) as e:      # numpy's message quotes the header: not shown
        raise StudioError(f"the file has no valid .npy header ({_header_fault(e)})", file=str(path),
                          hint="save the array again (np.save)") from None
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise StudioError(f"the file's header gives the shape {shape}", file=str(path), hint="save it again")
    return tuple(shape), bool(fortran), dtype


def _header_fault(e: Exception) -> str:
    """What is wrong with a .npy header, in words of our own (numpy's quote the header's text)."""
    msg = str(e)
    if isinstance(e, EOFError) or "EOF" in msg:
        return "it ends too early"
    if "format version" in msg:
        return msg[:120]                 # our own message: the version numbers only
    if "keys" in msg:
        return "it lacks the keys descr, fortran_order and shape"
    if "descr" in msg or "dtype" in msg:
        return "its dtype is not one numpy knows"
    if "shape" in msg:
        return "its shape is not a tuple of whole numbers"
    return "it is not a header numpy wrote"


def array_header(path: str | Path, *, spec=None) -> tuple[tuple[int, ...] | None, np.dtype]:
    """(shape, dtype) of a .npy from its header alone, judged like load_array judges it (the file
    is regular, an array of numbers the ``spec`` admits); (None, float32) for a .csv, whose shape is
    known once parsed. Cheap: it reads at most the header."""
    p = Path(path)
    fd, st = _open_regular(p)
    with os.fdopen(fd, "rb") as f:
        if p.suffix.lower() == ".csv":
            if st.st_size > MAX_CSV_BYTES:
                raise StudioError(f"the file is {st.st_size} bytes, over the limit for a .csv ({MAX_CSV_BYTES} bytes)",
                                  file=str(p), hint="save a large input as .npy (np.save)")
            return None, np.dtype(np.float32)
        shape, _, dtype = _npy_header(f, p)
    check_dtype(dtype, spec, file=str(p))
    return shape, dtype


def load_array(path: str | Path, *, max_bytes: int = MAX_ARRAY_BYTES, why: str = "the limit for one input",
               spec=None) -> np.ndarray:
    """The array in a .npy or .csv file. ``max_bytes`` bounds what loading it may allocate (and,
    with ``spec``, the signature's tensor, its size on the device); ``why`` names that limit in the
    message. With ``spec`` the file's dtype is judged before its data is read."""
    p = Path(path)
    fd, st = _open_regular(p)
    with os.fdopen(fd, "rb") as f:
        if p.suffix.lower() == ".csv":
            return _load_csv(f, p, st.st_size, max_bytes, why, spec)
        shape, fortran, dtype = _npy_header(f, p)
        check_dtype(dtype, spec, file=str(p))
        count = math.prod(shape)
        need = max(count * dtype.itemsize, count * (numpy_dtype(spec.dtype).itemsize if spec is not None else 0))
        if need > max_bytes:
            raise StudioError(f"the file holds {'x'.join(map(str, shape)) or 'one'} {dtype} values ({need} bytes), "
                              f"over {why} ({max_bytes} bytes)", file=str(p),
                              field=getattr(spec, "name", None), hint="give a smaller input")
        if f.tell() + count * dtype.itemsize > st.st_size:
            raise StudioError(f"the file is truncated: its header promises {count * dtype.itemsize} bytes of data, "
                              f"the file holds {max(0, st.st_size - f.tell())}", file=str(p),
                              hint="save the array again (np.save)")
        end = f.tell() + count * dtype.itemsize
        if end != st.st_size:            # np.save writes the data and nothing after it
            raise StudioError(f"the file has {st.st_size - end} bytes after its data (the header promises "
                              f"{count * dtype.itemsize} bytes of data): it is not one .npy array", file=str(p),
                              hint="save the array again (np.save), one array per file")
        flat = np.empty(count, dtype)
        _read_exact(f, memoryview(flat).cast("B"), p)
        return flat.reshape(shape, order="F" if fortran else "C")


def _load_csv(f, p: Path, size: int, max_bytes: int, why: str, spec) -> np.ndarray:
    limit = min(MAX_CSV_BYTES, max_bytes)
    if size > limit:
        raise StudioError(f"the file is {size} bytes, over the limit for a .csv ({limit} bytes)", file=str(p),
                          hint="save a large input as .npy (np.save)")
    raw = f.read(limit + 1)
    if len(raw) > limit:
        raise StudioError(f"the file is over {limit} bytes (the limit for a .csv)", file=str(p),
                          hint="save a large input as .npy (np.save)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            integers = spec is not None and not is_float(spec.dtype)
            a = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.int64 if integers else np.float32, ndmin=1)
    except ValueError as e:             # numpy's message quotes the text it could not read: not shown
        line = col = None
        if (m := _CSV_POS[0].search(str(e))) is not None:
            line, col = int(m.group(1)) + 1, int(m.group(2))
        elif (m := _CSV_POS[1].search(str(e))) is not None:
            line = int(m.group(1))
        cols = re.search(r"number of columns changed from (\d+) to (\d+)", str(e))
        what = (f"the number of columns changes from {cols.group(1)} to {cols.group(2)}" if cols else
                "it is not UTF-8 text" if isinstance(e, UnicodeDecodeError) else
                "a value is not a number" if "convert" in str(e) else "it is not a table of numbers")
        raise StudioError(f"cannot read the .csv: {what}", file=str(p), line=line, col=col,
                          hint="numbers separated by commas, the same count on every row") from None
    if a.size == 0:
        raise StudioError("the file holds no numbers", file=str(p), hint="one sample per row, values separated by commas")
    check_dtype(a.dtype, spec, file=str(p))
    if a.nbytes > max_bytes:
        raise StudioError(f"the file holds {a.size} values ({a.nbytes} bytes), over {why} ({max_bytes} bytes)",
                          file=str(p), hint="give a smaller input")
    return a


def input_limit(limits: dict | None = None, budget: int | None = None) -> tuple[int, str]:
    """(bytes, what they are) the most one input may take: MAX_ARRAY_BYTES, the device's largest
    bindable buffer (its profile's ``limits``, less the canary words runs append), the run's budget."""
    limits = limits or {}
    options = [(MAX_ARRAY_BYTES, "the limit for one input")]
    if "max-storage-buffer-binding-size" in limits:
        options.append((int(limits["max-storage-buffer-binding-size"]) - 64, "what the device binds in one buffer"))
    if "max-buffer-size" in limits:
        options.append((int(limits["max-buffer-size"]), "the device's max buffer size"))
    if budget is not None:
        options.append((int(budget), "the run's memory budget"))
    return min(options)


def load_input(path: str | Path, spec, *, limits: dict | None = None, budget: int | None = None) -> np.ndarray:
    """The array for the signature's input ``spec`` from a file: refused from its header when it is
    over input_limit(limits, budget) or of a dtype the signature does not admit, and after reading
    when a value lies outside the input's domain (check_input)."""
    limit, why = input_limit(limits, budget)
    a = load_array(path, max_bytes=limit, why=why, spec=spec)
    check_input(a, spec, file=str(path))
    return a


# ------------------------------------------------------------------ judged against the signature
def check_dtype(dtype: np.dtype, spec, *, file: str | None = None) -> None:
    """Refuse an element type the tensor ``spec`` (a signature's TensorSpec) does not admit: a
    floating tensor takes real numbers (floating or integer), an integer tensor integers. Without
    ``spec`` only arrays of numbers are admitted. Raises StudioError naming the file and the input."""
    dtype = np.dtype(dtype)
    name = getattr(spec, "name", None)
    if dtype.name == "bfloat16":            # ml_dtypes' bf16 (kind 'V'): floating point, docs/bf16.md
        return
    if dtype.kind not in "fiu" or dtype.subdtype is not None or dtype.names:
        what = _KINDS.get(dtype.kind, f"values of dtype {dtype}")
        want = f"the signature declares {spec}" if spec is not None else "an input holds numbers"
        raise StudioError(f"{'the file' if file else 'the input'} holds {what} ({dtype}), but {want}", file=file, field=name,
                          hint="convert it to numbers first, e.g. np.save(path, a.astype(np.float32))")
    if spec is not None and not is_float(spec.dtype) and dtype.kind == "f":
        raise StudioError(f"{'the file' if file else 'the input'} holds floating-point values ({dtype}), but the signature declares "
                          f"{spec}", file=file, field=name, hint=f"convert the data to {spec.dtype} (integers)")


def check_input(array: np.ndarray, spec, *, file: str | None = None) -> None:
    """Refuse ``array`` as the value of the signature's input ``spec`` when its dtype is not
    admitted (check_dtype), when an integer does not fit the tensor's type, or when a value lies
    outside the input's domain: NaN or ±inf (or a number too large for the type) in a ``finite``
    input, a negative one in a ``nonneg`` one, one outside ``in [lo, hi]``. Memory: a chunk at a time."""
    a = np.asarray(array)
    check_dtype(a.dtype, spec, file=file)
    domain = spec.domain
    flat = a.reshape(-1)
    if is_float(spec.dtype):
        target = numpy_dtype(spec.dtype)
        lo, hi = (domain.lo, domain.hi) if domain.kind == "in" else (0, None) if domain.kind == "nonneg" else (None, None)
        if domain.kind == "any":
            return
        for start in range(0, flat.size, _CHUNK):
            with np.errstate(over="ignore", invalid="ignore"):     # too large for the type: becomes inf
                chunk = flat[start:start + _CHUNK].astype(target).astype(np.float64)
            bad = ~np.isfinite(chunk)
            if lo is not None:
                bad |= chunk < lo
            if hi is not None:
                bad |= chunk > hi
            if bad.any():
                k = int(np.argmax(bad))
                _refuse(a, start + k, flat[start + k], spec, file)
        return
    lo, hi = INT_RANGE.get(spec.dtype, (None, None))
    if domain.kind == "nonneg":
        lo = max(lo, 0) if lo is not None else 0
    elif domain.kind == "in":
        lo, hi = max(lo, math.ceil(domain.lo)), min(hi, math.floor(domain.hi))
    for start in range(0, flat.size, _CHUNK):
        chunk = flat[start:start + _CHUNK]
        bad = np.zeros(chunk.shape, bool)
        if lo is not None:
            bad |= chunk < lo
        if hi is not None:
            bad |= chunk > hi
        if bad.any():
            k = int(np.argmax(bad))
            _refuse(a, start + k, flat[start + k], spec, file)


def _refuse(a: np.ndarray, flat_index: int, value, spec, file: str | None) -> None:
    where = ", ".join(map(str, np.unravel_index(flat_index, a.shape))) if a.ndim else ""
    kind = spec.domain.kind
    if not is_float(spec.dtype):
        why = f"outside {spec.dtype}" + (f" {spec.domain}" if kind in ("nonneg", "in") else "")
    elif isinstance(value, (float, np.floating)) and not np.isfinite(value):
        why = f"not finite, and the input is declared {spec.domain}"
    elif kind == "finite" or (kind != "any" and abs(float(value)) > float(np.finfo(numpy_dtype(spec.dtype)).max)):
        why = f"too large for {spec.dtype} (it would become ±inf), and the input is declared {spec.domain}"
    else:
        why = f"outside the declared domain {spec.domain}"
    shown = repr(float(value)) if is_float(spec.dtype) or a.dtype.kind == "f" else str(int(value))
    raise StudioError(f"{spec.name}[{where}] = {shown} is {why} ({spec})", file=file, field=spec.name,
                      hint="remove or replace such values (e.g. np.nan_to_num, np.clip) before the run")


# ------------------------------------------------------------------ writing
def check_writable(path: str | Path) -> Path:
    """Refuse a target that is not a regular file or a new name: a folder, a symlink, a device, a
    FIFO or a socket is never replaced (as root, ``--out /dev/null`` would replace /dev/null), and
    a path through a file is named. The write itself (save_array) names what else goes wrong."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        parent = next((q for q in p.absolute().parents if q.exists() or q.is_symlink()), None)
        if parent is not None and not parent.is_dir():
            raise StudioError(f"cannot write here: {parent} is not a folder", file=str(p),
                              hint="name a file in a folder") from None
        return p
    except (OSError, ValueError) as e:      # ENOTDIR (a path through a file), a NUL in the name
        raise StudioError(f"cannot write here: {getattr(e, 'strerror', None) or e}", file=str(p),
                          hint="name a file in a folder") from None
    if not stat.S_ISREG(st.st_mode):
        raise StudioError(f"this is {file_kind(st.st_mode)}: only a regular file is written or replaced", file=str(p),
                          hint="name a new file or an existing regular one"
                               + (f", e.g. {p / 'out.npy'}" if stat.S_ISDIR(st.st_mode) else ""))
    return p


def save_array(path: str | Path, arr) -> None:
    """.csv (one value per row, or one row per sample) or .npy, by extension. Only a regular file
    is written or replaced (check_writable), and a write that fails (a read-only or full filesystem)
    is a StudioError naming the file; nothing is left half written (studio/engine/atomic.py)."""
    p = check_writable(path)
    arr = np.asarray(arr)
    if arr.dtype.name == "bfloat16":    # np.save writes ml_dtypes' bf16 as raw 2-byte void ('<V2'), which
        arr = arr.astype(np.float32)    # np.load cannot read as numbers: widen, exactly (docs/bf16.md)
    buf = io.BytesIO()
    if str(path).lower().endswith(".csv"):
        np.savetxt(buf, arr.reshape(arr.shape[0], -1) if arr.ndim else arr.reshape(1, 1), delimiter=",", fmt="%.9g")
    else:
        np.save(buf, arr, allow_pickle=False)
    try:
        write_bytes(p, buf.getvalue())
    except OSError as e:
        full = e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
        raise StudioError(f"cannot write it: {e.strerror or e}", file=str(p),
                          hint="free some space there, or write elsewhere" if full
                          else "write to a folder you may write to") from None
