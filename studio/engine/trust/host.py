"""The reference sandbox *host*: the program a confined process runs (the engine's side, which
starts and talks to these processes, is studio/engine/trust/pool.py).

The engine never executes a package's ``reference.py`` in its own interpreter. Each package
(keyed by content hash) gets a host: a fresh ``python`` process that

- enters private user, mount and network namespaces where the kernel allows unprivileged user namespaces
  (studio/engine/trust/namespaces.py): no network, and a temporary folder that is a capped tmpfs,
- restricts itself with Landlock (Linux >= 5.13) so that it can read only the Python runtime, the
  system's libraries and its own temporary folder (never the user's files, nor the Scellis folder with
  its seal key), create, write, rename or delete files only beneath that temporary folder, and cannot
  connect or bind TCP sockets,
- runs under ``setrlimit`` limits (CPU seconds, address space, file size, no core dumps) and the
  engine's watch (CPU per call, threads, temporary bytes: studio/engine/trust/watch.py),
- once its own imports are done, installs a seccomp filter (studio/engine/trust/seccomp.py): no program
  runs, no process starts (threads do), no socket of any family is made or connected, no signal reaches
  another process, no file lease is taken — whatever Python or C API a reference uses,
- installs a Python audit hook refusing subprocesses, ``fork``/``exec``, sockets, ``ctypes`` and writes
  outside the temporary folder (best effort, and a clearer message; the kernel layers are the boundary),
- works in a temporary folder (cwd, ``HOME``, ``TMPDIR``), removed when the host ends, and writes only to
  pipes the engine reads (never the user's terminal or files),
- imports the package's own modules only from a private snapshot of exactly the files its content hash
  covers (``load``): a ``__pycache__``, ``.pyc`` or dot-file beside the package is never imported,
- dies with the process that started it (``PR_SET_PDEATHSIG``, which the filter then keeps armed).

Which of these the running kernel actually enforced is reported by the host at start-up
(``Host.enforced``); docs/security.md lists them.

The host talks over its stdin/stdout with the frame codec of studio/engine/trust/codec.py
(JSON plus numeric numpy buffers, never a pickle, sizes checked before anything is allocated).

The engine starts this file as a script, ``python -s -B -c "import runpy, sys;
runpy.run_path(sys.argv.pop(1), run_name='__scellis_sandbox_host__')" <this file> <json cfg>``,
and the host loads codec.py, seccomp.py and namespaces.py beside it by their paths. So this file
(and those) import only the standard library at their top level (numpy is imported inside the
functions that need it) and nothing of the engine.
"""
from __future__ import annotations

import json
import os
import struct
import sys

# ----------------------------------------------------------------------------- confinement and serving
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
# Landlock filesystem rights (uapi/linux/landlock.h): everything that creates, changes or removes
_LL_WRITE_FILE, _LL_REMOVE_DIR, _LL_REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_LL_MAKE = sum(1 << b for b in range(6, 13))          # char, dir, reg, sock, fifo, block, sym
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14
_LL_EXECUTE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_LL_READ = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
# What the runtime reads beside its own prefixes: system programs and shared libraries, the loader's
# cache, CPU facts (numpy's BLAS), random bytes. Nothing of the user's: no home, no $SCELLIS_HOME.
_SYSTEM_READS = ("/usr/bin", "/bin", "/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/usr/share/zoneinfo",
                 "/etc/ld.so.cache",
                 "/etc/localtime", "/proc/cpuinfo", "/proc/meminfo", "/sys/devices/system/cpu",
                 "/dev/urandom", "/dev/random", "/dev/zero")


def read_roots() -> list[str]:
    """Where a host may read: the Python runtime (its prefixes: the standard library and the
    site-packages numpy loads from, and any other site-packages on its path, e.g. one a ``.pth``
    line or a system-site-packages venv adds) and the system's shared libraries."""
    sites = [p for p in sys.path if p and os.path.isabs(p) and os.path.basename(p) in ("site-packages", "dist-packages")]
    roots = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix, *sites, *_SYSTEM_READS]
    out = []
    for r in roots:
        r = os.path.realpath(r)
        if os.path.exists(r) and r not in out:
            out.append(r)
    return out


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _cover(root: str, deny: list[str]) -> list[str]:
    """``root`` as a list of paths that together hold everything beneath it except the ``deny``
    paths (a Landlock rule cannot take back what a rule above it gave): each folder on the way
    down to a denied path is replaced by its other entries."""
    inside = [d for d in deny if _beneath(d, root)]
    if not inside:
        return [root]
    if any(d == root for d in inside) or not os.path.isdir(root):
        return []
    out = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        out += _cover(os.path.join(root, name), inside)
    return out


def _landlock(tmp: str, libc, deny: list[str] | None = None) -> str | None:
    import ctypes
    import platform
    import stat as stat_
    nums = _SYS_LANDLOCK.get(platform.machine())
    if nums is None:
        return None
    create, add_rule, restrict = nums
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return None
    fs = _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE | _LL_READ
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
    deny = [os.path.realpath(d) for d in deny or []]
    file_rights = _LL_EXECUTE | _LL_READ_FILE
    rules = [(tmp, fs, True),
             ("/dev/null", _LL_READ_FILE | _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0), False)]
    rules += [(p, _LL_READ, False) for root in read_roots() for p in _cover(root, deny)]
    try:
        for path, rights, required in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                if required:
                    return None
                continue
            try:
                if not stat_.S_ISDIR(os.fstat(pfd).st_mode):
                    rights &= file_rights | _LL_WRITE_FILE | _LL_TRUNCATE   # a file takes file rights only
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
    return f"Landlock ABI {abi}: files may be read only beneath the Python runtime, the system's shared " \
           f"libraries and the temporary folder (not your home, not the Scellis folder and its seal key), and " \
           f"created, written, renamed or removed only beneath the temporary folder" \
           + ("; no TCP connect or bind" if abi >= 4 else "") \
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
        except Exception:  # noqa: BLE001 (a path that cannot be resolved is not inside the temp folder)
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


def _confine(cfg: dict, namespaces) -> tuple[list[str], bool]:
    import ctypes
    import resource
    enforced, mounted = [], False
    tmp, lim = cfg["tmp"], cfg["limits"]
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
        if cfg.get("engine_pid") and os.getppid() != cfg["engine_pid"]:
            os._exit(0)            # the engine died before the signal was armed: nobody to serve
        enforced.append("dies with the engine process that started it (PR_SET_PDEATHSIG)")
    except Exception:  # noqa: BLE001 (PR_SET_PDEATHSIG where the kernel has none: the host runs with what holds)
        pass
    try:  # must run while the process is still single-threaded (before numpy starts BLAS threads)
        done, mounted = namespaces.enter(libc, tmp, int(lim["temp_bytes"]), int(lim["temp_files"]),
                                         mount=cfg.get("tmpfs", True))
        enforced += done
    except Exception:  # noqa: BLE001 (namespaces where the kernel refuses them: the host runs with what holds)
        pass
    try:
        ll = _landlock(tmp, libc, list(cfg.get("deny") or []))
        if ll:
            enforced.append(ll)
    except Exception:  # noqa: BLE001 (Landlock where the kernel has none: the host runs with what holds)
        pass
    hard_cpu = int(lim["lifetime_cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (min(hard_cpu, int(lim["cpu_s"]) + 1), hard_cpu))
    resource.setrlimit(resource.RLIMIT_AS, (int(lim["memory_bytes"]), int(lim["memory_bytes"])))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(lim["file_bytes"]), int(lim["file_bytes"])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    enforced.append(f"setrlimit: CPU {int(lim['cpu_s'])} s per call ({hard_cpu} s for the process), address space "
                    f"{int(lim['memory_bytes']) >> 20} MiB, files written {int(lim['file_bytes']) >> 20} MiB, no core dumps")
    enforced.append("cwd, HOME and TMPDIR: a fresh temporary folder, removed afterwards")
    return enforced, mounted


def _message(e: BaseException) -> str:
    """What an exception says, and which limit a full temporary folder is (ENOSPC on the tmpfs)."""
    return str(e)[:2000] + (_FULL[0] if isinstance(e, OSError) and e.errno == 28 else "")


_FULL = [""]                           # the note for ENOSPC, once the tmpfs is mounted


def _traceback_line(exc: BaseException, file: str) -> int | None:
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _sibling(name: str):
    """codec.py, seccomp.py or namespaces.py, loaded by its path from beside this file (a script's sibling)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"scellis_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _snapshot(tmp: str, n: int, files: dict, reference: str) -> str:
    """Write exactly the package's hashed files (sent by the engine) into a fresh private folder
    and return where the reference lies in it. Nothing else is there: no ``__pycache__``, no
    ``.pyc``, no dot-file, and (-B) no bytecode is ever written beside them."""
    root = os.path.join(tmp, f"package-{n}")
    os.mkdir(root, 0o700)
    for rel, data in sorted(files.items()):
        parts = rel.split("/")
        if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"refused package path {rel!r}")
        path = os.path.join(root, *parts)
        os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)  # atomic-ok: a private snapshot in the host's temp folder
        try:
            view = memoryview(data).cast("B")
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    return os.path.join(root, *reference.split("/"))


def _import_from(folder: str, tmp: str) -> None:
    """Imports of the reference's own modules resolve in its snapshot only: that folder comes
    first on sys.path, and the working directory (the writable temporary folder) is not on it."""
    import importlib
    for name, mod in list(sys.modules.items()):     # a module of an earlier snapshot is forgotten
        if (getattr(mod, "__file__", None) or "").startswith(tmp + os.sep):
            del sys.modules[name]
    sys.path[:] = [folder] + [p for p in sys.path if p not in ("", ".", tmp) and not p.startswith(tmp + os.sep)]
    importlib.invalidate_caches()


def _host_main(cfg: dict) -> None:  # pragma: no cover - runs in the host process (tested from outside)
    import resource
    chan = os.dup(1)
    os.dup2(2, 1)                      # a stray print() goes to stderr (a pipe the engine reads), not the channel
    codec, seccomp = _sibling("codec"), _sibling("seccomp")
    enforced, mounted = _confine(cfg, _sibling("namespaces"))
    if mounted:                        # a full temporary folder is named as the limit it is
        _FULL[0] = f" (the reference's temporary folder holds at most {int(cfg['limits']['temp_bytes']) >> 20} MiB)"
    import numpy as np  # imported before the filter and the audit hook: numpy loads ctypes
    per_call = True                    # the host lowers its own soft CPU limit before each call
    if cfg.get("seccomp", True):
        # Under the filter no limit can be set (a reference could raise its own): the soft CPU
        # limit goes to the lifetime cap now, and the engine enforces the per-call CPU time (it
        # reads the host's CPU clock from /proc and kills it, pool.Host).
        hard_cpu = int(cfg["limits"]["lifetime_cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (hard_cpu, hard_cpu))
        try:
            sc = seccomp.install()
        except Exception:  # noqa: BLE001 (seccomp where the kernel refuses it: the host runs with what holds)
            sc = None
        if sc:
            enforced.append(sc)
            per_call = False
        else:
            _set_cpu(resource, int(cfg["limits"]["cpu_s"]), hard_cpu)
    if cfg.get("audit_hook", True):
        _install_audit_hook(cfg["tmp"])
        enforced.append("audit hook: no subprocess, fork/exec, sockets, ctypes or writes outside the temporary "
                        "folder (Python-level, best effort)")
    reader = codec.FrameReader(0, int(cfg["limits"]["memory_bytes"]))
    try:
        _send(chan, codec.encode_parts({"ready": True, "pid": os.getpid(), "enforced": enforced, "tmpfs": mounted}))
    except OSError:                    # the engine died while this host booted: nobody to serve
        return
    module: dict = {}
    file, loads = "<reference>", 0
    cpu_s, hard = int(cfg["limits"]["cpu_s"]), int(cfg["limits"]["lifetime_cpu_s"])
    if not per_call:
        cpu_s = 0                      # _set_cpu does nothing: the engine counts the CPU of each call
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
                file, loads = str(msg["file"]), loads + 1
                reply = _load(cfg["tmp"], loads, msg, value, resource, cpu_s, hard)
                module = reply.pop("module", {})
                _send(chan, codec.encode_parts(reply))
            elif op == "call":
                fn = module.get(str(msg["fn"]))
                if not callable(fn):
                    _send(chan, codec.encode_parts({"ok": False, "kind": "missing", "type": "AttributeError",
                                                    "message": f"no function {msg['fn']!r}"}))
                    continue
                args = value or {}
                _set_cpu(resource, cpu_s, hard)
                try:
                    with np.errstate(all="ignore"):
                        result = fn(*args.get("args", ()), **args.get("kwargs", {}))
                    parts = codec.encode_parts({"ok": True}, result)
                except BaseException as e:  # noqa: BLE001 (anything the author's function raises, reported back)
                    parts = codec.encode_parts({"ok": False, "kind": "call", "type": type(e).__name__,
                                                "message": _message(e), "line": _traceback_line(e, file)})
                _send(chan, parts)
            else:
                _send(chan, codec.encode_parts({"ok": False, "kind": "protocol", "type": "ValueError",
                                                "message": f"unknown request {op!r}"}))
        except (BrokenPipeError, OSError):
            return


def _load(tmp: str, n: int, msg: dict, value, resource, cpu_s: int, hard: int) -> dict:
    """Load a reference: snapshot its package's hashed files, compile it under the engine's name
    for it (so that tracebacks point at the author's file), and run it with ``__file__`` in the
    snapshot. The reply carries the module's namespace under "module" (not sent)."""
    file = str(msg["file"])
    files = dict((value or {}).get("files") or {})
    reference = str(msg.get("reference") or os.path.basename(file) or "reference.py")
    files.setdefault(reference, str(msg["source"]).encode("utf-8"))
    where = _snapshot(tmp, n, files, reference)
    _import_from(os.path.dirname(where), tmp)
    module = {"__name__": "reference", "__file__": where, "__builtins__": __builtins__}
    try:
        code = compile(str(msg["source"]), file, "exec")
    except SyntaxError as e:
        return {"ok": False, "kind": "syntax", "type": "SyntaxError", "message": str(e.msg),
                "line": e.lineno, "col": e.offset}
    try:
        _set_cpu(resource, cpu_s, hard)
        exec(code, module)
    except BaseException as e:  # noqa: BLE001 (anything the author's code raises)
        return {"ok": False, "kind": "load", "type": type(e).__name__, "message": _message(e),
                "line": _traceback_line(e, file)}
    return {"ok": True, "module": module,
            "functions": sorted(k for k, v in module.items() if callable(v) and not k.startswith("__"))}


def _send(fd: int, parts: list) -> None:
    for part in parts:
        view = memoryview(part).cast("B")
        while view:
            view = view[os.write(fd, view):]


def _set_cpu(resource, cpu_s: int, hard: int) -> None:
    if cpu_s <= 0:
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime) + cpu_s + 1
    resource.setrlimit(resource.RLIMIT_CPU, (min(soft, hard), hard))


if __name__ == "__scellis_sandbox_host__":  # pragma: no cover
    _host_main(json.loads(sys.argv[1]))
