"""The reference sandbox *host*: the program a confined process runs (the engine's side, which
starts and talks to these processes, is studio/engine/trust/pool.py).

The engine never executes a package's ``reference.py`` in its own interpreter. Each package
(keyed by content hash) gets a host: a fresh ``python`` process that

- drops into a private network namespace (no network at all) when the kernel allows
  unprivileged user namespaces,
- restricts itself with Landlock (Linux >= 5.13) so that it can create, write, rename or delete
  files only beneath its own temporary folder, and cannot connect or bind TCP sockets,
- runs under ``setrlimit`` limits: CPU seconds per call (and a lifetime cap), address space,
  the size of files it writes, open files, no core dumps,
- installs a Python audit hook refusing subprocesses, ``fork``/``exec``, sockets, ``ctypes``
  and writes outside the temporary folder (best effort: an audit hook is not a security
  boundary on its own; Landlock and the namespace are),
- works in a temporary folder (its cwd, ``HOME`` and ``TMPDIR``), removed when the host ends,
- dies with the process that started it (``PR_SET_PDEATHSIG``).

Which of these the running kernel actually enforced is reported by the host at start-up
(``Host.enforced``); docs/security.md lists them.

The host talks over its stdin/stdout with a small framed codec (``encode_frame`` and
``FrameReader``, used by both sides): a JSON header plus raw array buffers. There is no pickle
in either direction: a reply from code we do not trust is decoded as JSON and numeric numpy
buffers only, so a hostile reference cannot run code in the engine through its answers.

This file serves two ways: the engine starts it as a script, ``python -s -B -c "import runpy,
sys; runpy.run_path(sys.argv.pop(1), run_name='__scellis_sandbox_host__')" <this file> <json cfg>``,
and the pool imports it as ``studio.engine.trust.host`` for the codec. So its top level imports
only the standard library (numpy is imported inside the functions that need it) and nothing of
the engine.
"""
from __future__ import annotations

import json
import os
import struct
import sys

# ----------------------------------------------------------------------------- codec
# frame = u32 header length | header (JSON, utf-8) | per buffer: u64 length | bytes
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
MAX_HEADER = 16 << 20
NUMERIC_KINDS = "biufc"
MAX_DEPTH = 32


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
        if a.dtype.kind not in NUMERIC_KINDS:
            raise TypeError(f"an array of dtype {a.dtype} cannot cross (numeric arrays only)")
        a = np.ascontiguousarray(a)
        buffers.append(a.tobytes())
        return {"__nd__": len(buffers) - 1, "dtype": a.dtype.str, "shape": list(a.shape)}
    if isinstance(obj, (list, tuple)):
        items = [_encode_value(v, buffers, depth + 1) for v in obj]
        return items if isinstance(obj, list) else {"__tuple__": items}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("only dicts with string keys can cross")
        return {"__dict__": {k: _encode_value(v, buffers, depth + 1) for k, v in obj.items()}}
    raise TypeError(f"a value of type {type(obj).__name__} cannot cross (arrays, numbers, strings, "
                    f"lists, tuples and dicts only)")


def _decode_value(obj, buffers: list, depth: int = 0):
    import numpy as np
    if depth > MAX_DEPTH:
        raise ValueError("value nests too deeply")
    if isinstance(obj, list):
        return [_decode_value(v, buffers, depth + 1) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__nd__" in obj:
        dt = np.dtype(str(obj["dtype"]))
        if dt.kind not in NUMERIC_KINDS or dt.hasobject:
            raise ValueError(f"refused dtype {dt}")
        shape = tuple(int(s) for s in obj["shape"])
        if any(s < 0 for s in shape):
            raise ValueError("negative dimension")
        raw = buffers[int(obj["__nd__"])]
        count = 1
        for s in shape:
            count *= s
        if count * dt.itemsize != len(raw):
            raise ValueError("buffer size does not match shape")
        a = np.frombuffer(raw, dtype=dt).reshape(shape).copy()
        return a[()] if shape == () else a
    if "__tuple__" in obj:
        return tuple(_decode_value(v, buffers, depth + 1) for v in obj["__tuple__"])
    if "__dict__" in obj:
        return {str(k): _decode_value(v, buffers, depth + 1) for k, v in obj["__dict__"].items()}
    if "__float__" in obj:
        return float(obj["__float__"])
    raise ValueError("unknown value marker")


def encode_frame(msg: dict, payload=None) -> bytes:
    buffers: list[bytes] = []
    header = {"msg": msg}
    if payload is not None:
        header["value"] = _encode_value(payload, buffers)
    header["buffers"] = len(buffers)
    head = json.dumps(header).encode("utf-8")
    parts = [_U32.pack(len(head)), head]
    for b in buffers:
        parts += [_U64.pack(len(b)), b]
    return b"".join(parts)


class FrameReader:
    """Reads frames from a file descriptor, with a deadline and a cap on the bytes accepted."""

    def __init__(self, fd: int, max_bytes: int):
        self.fd = fd
        self.max_bytes = max_bytes
        self.buf = bytearray()

    def _read(self, n: int, deadline: float | None) -> bytes:
        import select
        import time
        while len(self.buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    raise TimeoutError
            chunk = os.read(self.fd, max(1 << 16, min(n - len(self.buf), 1 << 24)))
            if not chunk:
                raise EOFError
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read(self, deadline: float | None = None):
        (hlen,) = _U32.unpack(self._read(4, deadline))
        if hlen > MAX_HEADER:
            raise ValueError(f"header of {hlen} bytes")
        header = json.loads(self._read(hlen, deadline).decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
        nbuf = int(header.get("buffers", 0))
        buffers, total = [], 0
        for _ in range(nbuf):
            (blen,) = _U64.unpack(self._read(8, deadline))
            total += blen
            if total > self.max_bytes:
                raise ValueError(f"reply larger than {self.max_bytes} bytes")
            buffers.append(self._read(blen, deadline))
        msg = header.get("msg")
        if not isinstance(msg, dict):
            raise ValueError("frame without a message")
        value = _decode_value(header["value"], buffers) if "value" in header else None
        return msg, value


# ----------------------------------------------------------------------------- confinement and serving
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
# Landlock filesystem rights (uapi/linux/landlock.h): everything that creates, changes or removes
_LL_WRITE_FILE, _LL_REMOVE_DIR, _LL_REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_LL_MAKE = sum(1 << b for b in range(6, 13))          # char, dir, reg, sock, fifo, block, sym
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14


def _landlock(tmp: str, libc) -> str | None:
    import ctypes
    import platform
    nums = _SYS_LANDLOCK.get(platform.machine())
    if nums is None:
        return None
    create, add_rule, restrict = nums
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return None
    fs = _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE
    if abi >= 2:
        fs |= _LL_REFER
    if abi >= 3:
        fs |= _LL_TRUNCATE
    fields = [fs]
    if abi >= 4:
        fields.append((1 << 0) | (1 << 1))      # net: bind and connect TCP, with no rule allowing any
    if abi >= 6:
        fields.append((1 << 0) | (1 << 1))      # scoped: abstract unix sockets, signals outside
    attr = struct.pack("<" + "Q" * len(fields), *fields)
    ruleset = libc.syscall(create, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return None
    try:
        for path, rights, required in ((tmp, fs, True),
                                       ("/dev/null", _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0), False)):
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("<Qi", rights, pfd)          # struct landlock_path_beneath_attr (packed)
                ok = libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.c_char_p(rule),
                                  ctypes.c_uint32(0)) == 0
            finally:
                os.close(pfd)
            if required and not ok:
                return None
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return None
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return None
    finally:
        os.close(ruleset)
    return f"Landlock ABI {abi}: files may be created, written, renamed or removed only beneath the " \
           f"temporary folder" + ("; no TCP connect or bind" if abi >= 4 else "") \
           + ("; no signals to processes outside the sandbox" if abi >= 6 else "")


_BLOCKED_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "pty.spawn", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                   "socket.__new__", "ctypes.dlopen", "ctypes.dlsym", "os.kill", "os.killpg", "signal.pthread_kill",
                   "sys.addaudithook", "os.chroot", "os.setuid", "resource.prlimit", "webbrowser.open", "urllib.Request", "ftplib.connect", "smtplib.connect",
                   "http.client.connect", "os.startfile", "winreg.OpenKey")
_PATH_EVENTS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                "os.symlink", "os.link", "os.utime", "shutil.rmtree", "shutil.move", "shutil.copyfile",
                "shutil.copytree", "os.mkfifo", "os.mknod")


def _install_audit_hook(tmp: str) -> None:
    tmp_real = os.path.realpath(tmp)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    blocked = frozenset(_BLOCKED_EVENTS)
    path_events = frozenset(_PATH_EVENTS)
    realpath, isinstance_, str_ = os.path.realpath, isinstance, str

    def inside(p) -> bool:
        if isinstance_(p, int):
            return True                                  # an already open descriptor
        try:
            rp = realpath(os.fsdecode(p))
        except Exception:
            return False
        return rp == tmp_real or rp.startswith(tmp_real + os.sep) or rp == "/dev/null"

    def hook(event: str, args):
        if event in blocked:
            raise PermissionError(f"the reference sandbox does not allow {event}")
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance_(mode, str_) and any(c in mode for c in "wax+")) or \
                      (isinstance_(flags, int) and flags & write_flags)
            if writing and not inside(path):
                raise PermissionError(f"the reference sandbox allows writes only beneath {tmp}, not {path}")
        elif event in path_events:
            for p in args[:2] if event in ("os.rename", "os.symlink", "os.link", "shutil.move",
                                            "shutil.copyfile", "shutil.copytree") else args[:1]:
                if isinstance_(p, (str_, bytes, os.PathLike)) and not inside(p):
                    raise PermissionError(f"the reference sandbox allows changes only beneath {tmp}")
    sys.addaudithook(hook)


def _confine(cfg: dict) -> list[str]:
    import ctypes
    import resource
    enforced = []
    tmp = cfg["tmp"]
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
        enforced.append("dies with the engine process that started it (PR_SET_PDEATHSIG)")
    except Exception:
        pass
    try:  # must run while the process is still single-threaded (before numpy starts BLAS threads)
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
            enforced.append("no network: a private, empty network namespace")
    except Exception:
        pass
    try:
        ll = _landlock(tmp, libc)
        if ll:
            enforced.append(ll)
    except Exception:
        pass
    lim = cfg["limits"]
    hard_cpu = int(lim["lifetime_cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (min(hard_cpu, int(lim["cpu_s"]) + 1), hard_cpu))
    resource.setrlimit(resource.RLIMIT_AS, (int(lim["memory_bytes"]), int(lim["memory_bytes"])))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(lim["file_bytes"]), int(lim["file_bytes"])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    enforced.append(f"setrlimit: CPU {int(lim['cpu_s'])} s per call ({hard_cpu} s for the process), address space "
                    f"{int(lim['memory_bytes']) >> 20} MiB, files written {int(lim['file_bytes']) >> 20} MiB, no core dumps")
    enforced.append("cwd, HOME and TMPDIR: a fresh temporary folder, removed afterwards")
    return enforced


def _traceback_line(exc: BaseException, file: str) -> int | None:
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _host_main(cfg: dict) -> None:  # pragma: no cover - runs in the host process (tested from outside)
    import resource
    chan = os.dup(1)
    os.dup2(2, 1)                      # a stray print() in the reference goes to stderr, not the channel
    out = _Channel(chan)
    enforced = _confine(cfg)
    import numpy as np  # noqa: F401  (imported before the audit hook: numpy loads ctypes at import)
    if cfg.get("audit_hook", True):
        _install_audit_hook(cfg["tmp"])
        enforced.append("audit hook: no subprocess, fork/exec, sockets, ctypes or writes outside the temporary "
                        "folder (Python-level, best effort)")
    reader = FrameReader(0, int(cfg["limits"]["memory_bytes"]))
    try:
        out.write(encode_frame({"ready": True, "pid": os.getpid(), "enforced": enforced}))
    except OSError:                    # the engine died while this host booted: nobody to serve
        return
    module: dict = {}
    file = "<reference>"
    cpu_s, hard = int(cfg["limits"]["cpu_s"]), int(cfg["limits"]["lifetime_cpu_s"])
    while True:
        try:
            msg, value = reader.read()
        except EOFError:
            return
        op = msg.get("op")
        try:
            if op == "exit":
                return
            if op == "load":
                file = str(msg["file"])
                module = {"__name__": "reference", "__file__": file, "__builtins__": __builtins__}
                try:
                    code = compile(str(msg["source"]), file, "exec")
                except SyntaxError as e:
                    reply = {"ok": False, "kind": "syntax", "type": "SyntaxError", "message": str(e.msg),
                             "line": e.lineno, "col": e.offset}
                else:
                    try:
                        _set_cpu(resource, cpu_s, hard)
                        exec(code, module)
                        reply = {"ok": True, "functions": sorted(k for k, v in module.items()
                                                                 if callable(v) and not k.startswith("__"))}
                    except BaseException as e:  # noqa: BLE001 - anything the author's code raises
                        reply = {"ok": False, "kind": "load", "type": type(e).__name__, "message": str(e)[:2000],
                                 "line": _traceback_line(e, file)}
                out.write(encode_frame(reply))
            elif op == "call":
                fn = module.get(str(msg["fn"]))
                if not callable(fn):
                    out.write(encode_frame({"ok": False, "kind": "missing", "type": "AttributeError",
                                            "message": f"no function {msg['fn']!r}"}))
                    continue
                args = value or {}
                _set_cpu(resource, cpu_s, hard)
                try:
                    with np.errstate(all="ignore"):
                        result = fn(*args.get("args", ()), **args.get("kwargs", {}))
                    frame = encode_frame({"ok": True}, result)
                except BaseException as e:  # noqa: BLE001
                    frame = encode_frame({"ok": False, "kind": "call", "type": type(e).__name__,
                                          "message": str(e)[:2000], "line": _traceback_line(e, file)})
                out.write(frame)
            else:
                out.write(encode_frame({"ok": False, "kind": "protocol", "type": "ValueError",
                                        "message": f"unknown request {op!r}"}))
        except (BrokenPipeError, OSError):
            return


class _Channel:
    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


def _set_cpu(resource, cpu_s: int, hard: int) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime) + cpu_s + 1
    resource.setrlimit(resource.RLIMIT_CPU, (min(soft, hard), hard))


if __name__ == "__scellis_sandbox_host__":  # pragma: no cover
    _host_main(json.loads(sys.argv[1]))
