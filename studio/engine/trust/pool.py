"""The engine's side of the reference sandbox: starting confined host processes and keeping
them (the program each host runs is studio/engine/trust/host.py).

A ``Host`` is one confined ``python`` process holding one package's reference module; it is
started fresh (never forked from the engine) and launched with ``host.py`` by its own path.
A ``HostPool`` keeps up to ``MAX_HOSTS`` of them, reused by the package's content key (least
recently used ones are closed first), plus one spare, pre-started host with the default limits.
Whoever needs references owns a pool and passes it along; there is no process-wide pool. A
pool's hosts are closed by ``shutdown()``, by leaving its ``with`` block, when the pool is
garbage collected, and at interpreter exit.

A host writes nothing to the user's terminal or files: its stdin and stdout are the channel, and
its stderr (where a reference's ``print`` goes too) is a pipe the engine drains, bounded and shown
only escaped (``watch.Output``). Its threads, its CPU time per call and — where its temporary
folder is not a capped tmpfs — its temporary bytes are watched by the engine (``watch.Watch``).

Replies are decoded by ``codec.FrameReader``: JSON and numeric numpy buffers only, never a pickle,
and no larger than the caller allows (``Host.request(reply_bytes=…)``) — checked from the reply's
header before any of its buffers is read.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Self

from ..home import studio_home
from .codec import FrameReader, ReplyTooLarge, encode_frame, encode_parts, parts_size
from .watch import Output, Watch, printable

MAX_HOSTS = 4
_HOST_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host.py")
MIN_REPLY_BYTES = 1 << 20     # what a reply may always hold
REPLY_FACTOR = 4              # a call with no limit of its own: a reply up to 4 x its request
_BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__scellis_sandbox_host__')"


@dataclass(frozen=True)
class Limits:
    """What one reference host may use. cpu_s applies per call (the engine's watch); wall_s is
    enforced by the engine, which kills the host; memory_bytes is the address-space limit
    (RLIMIT_AS); file_bytes caps any file it writes (RLIMIT_FSIZE); threads, its threads at once
    (the engine's watch); temp_bytes and temp_files, its temporary folder in total (a capped tmpfs,
    else the engine's watch)."""
    cpu_s: int = 60
    wall_s: float = 120.0
    memory_bytes: int = 4 << 30
    file_bytes: int = 64 << 20
    lifetime_cpu_s: int = 3600
    start_s: float = 60.0
    threads: int = 64
    temp_bytes: int = 128 << 20
    temp_files: int = 4096


DEFAULT_LIMITS = Limits()


class RemoteError(Exception):
    """What went wrong inside a host: kind is syntax | load | call | missing | died | timeout | protocol."""

    def __init__(self, kind: str, type_name: str, message: str, line: int | None = None, col: int | None = None):
        type_name, message = printable(type_name), printable(message)   # the host's words, shown escaped
        super().__init__(f"{type_name}: {message}")
        self.kind, self.type_name, self.message, self.line, self.col = kind, type_name, message, line, col


class Host:
    """One confined process holding one package's reference module."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS, *, audit_hook: bool = True, seccomp: bool = True,
                 tmpfs: bool = True):
        """audit_hook=False exists for tests that prove the kernel-level confinement alone,
        seccomp=False for the tests that show what the system-call filter is there to stop, and
        tmpfs=False for those of the engine's own temp quota (where no tmpfs can be mounted)."""
        self.limits = limits
        self.tmp = tempfile.mkdtemp(prefix=f"scellis-sandbox-{os.getpid()}-")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.tmp, "TMPDIR": self.tmp,
               "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        cfg = {"tmp": self.tmp, "limits": asdict(limits), "audit_hook": audit_hook, "seccomp": seccomp,
               "tmpfs": tmpfs, "engine_pid": os.getpid(), "deny": [str(Path(studio_home()).resolve())]}
        self.proc = subprocess.Popen([sys.executable, "-s", "-B", "-c", _BOOT, _HOST_SCRIPT, json.dumps(cfg)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=self.tmp, env=env, close_fds=True, start_new_session=True)
        _widen_pipe(self.proc.stdout.fileno())
        self.output = Output(self.proc.stderr)      # never the CLI's own stderr: a pipe drained here
        self.reader = FrameReader(self.proc.stdout.fileno(), limits.memory_bytes)
        self.lock = threading.Lock()
        self.functions: list[str] | None = None
        self.enforced: list[str] = []
        self.pid = self.proc.pid
        self._ready = False
        self.watch = Watch(self.proc, limits, self.tmp, walk_temp=True)

    def _wait_ready(self) -> None:
        if self._ready:
            return
        try:
            msg, _ = self.reader.read(time.monotonic() + self.limits.start_s, MIN_REPLY_BYTES)
        except TimeoutError:
            self.kill()
            raise RemoteError("died", "Timeout", f"the reference process did not start within "
                                                 f"{self.limits.start_s:g} s") from None
        except (EOFError, ValueError, OSError) as e:
            self.kill()
            raise RemoteError("died", "StartError", f"the reference process failed to start ({e})") from None
        self.enforced = list(msg.get("enforced", []))
        self.watch.walk_temp = not msg.get("tmpfs")  # a capped tmpfs keeps the quota itself
        self._ready = True

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _exchange(self, parts: list, timeout: float, reply_bytes: int):
        self._wait_ready()
        self.watch.start()
        try:
            self.watch.call_cpu = self.watch.cpu_seconds()
            for part in parts:
                self.proc.stdin.write(part)
            self.proc.stdin.flush()
            reply = self.reader.read(time.monotonic() + timeout, reply_bytes)
            if self.watch.check(cpu=False):    # past a limit when the call returned: the call fails
                self.proc.wait()
                raise RemoteError("died", "Limit", self.watch.reason)
            return reply
        except TimeoutError:
            self.kill()
            raise RemoteError("timeout", "Timeout", f"did not finish within {timeout:g} s; the reference "
                                                    f"process was stopped") from None
        except (EOFError, BrokenPipeError, OSError):
            self.proc.wait()
            raise RemoteError("died", "Died", self._death()) from None
        except ReplyTooLarge as e:  # refused from its header: nothing of it was allocated
            self.kill()
            raise RemoteError("protocol", "ReplyTooLarge", f"sent a reply refused unread: {e}; the reference "
                                                           f"process was stopped") from None
        except ValueError as e:  # a malformed frame: the host is not speaking the protocol
            self.kill()
            raise RemoteError("protocol", "ProtocolError", f"the reference process sent a malformed "
                                                           f"reply ({e}) and was stopped") from None
        finally:
            self.watch.call_cpu = None

    @property
    def stopped_for(self) -> str | None:
        """Why the engine's watch stopped this host (a limit, in one line), if it did."""
        return self.watch.reason

    def _death(self) -> str:
        rc = self.proc.returncode
        if self.watch.reason is not None:
            return self.watch.reason
        if rc == -signal.SIGXCPU or rc == -signal.SIGKILL:
            return (f"was stopped: it used more than its CPU time ({self.limits.cpu_s} s per call); "
                    f"the reference process was ended")
        self.output.join(0.5)              # what it wrote before it died, escaped and bounded
        said = self.output.text(300)
        said = f"; its last output: {said}" if said else ""
        if rc is not None and rc < 0:
            return f"the reference process died from signal {signal.Signals(-rc).name}{said}"
        return f"the reference process exited (status {rc}){said}"

    def load(self, source: str, file: str, files: dict[str, bytes] | None = None,
             reference: str | None = None) -> list[str]:
        """Load a reference module. ``files`` are the package's hashed files (relative posix path ->
        bytes) and ``reference`` the reference's path among them: the host writes exactly these
        into a private snapshot and imports the reference's own modules from there only."""
        import numpy as np
        payload = {"files": {rel: np.frombuffer(data, dtype=np.uint8) for rel, data in (files or {}).items()}}
        parts = encode_parts({"op": "load", "source": source, "file": file, "reference": reference}, payload)
        with self.lock:
            msg, _ = self._exchange(parts, self.limits.wall_s, MIN_REPLY_BYTES)
        if not msg.get("ok"):
            raise RemoteError(str(msg.get("kind", "load")), str(msg.get("type", "Error")),
                              str(msg.get("message", "")), _int(msg.get("line")), _int(msg.get("col")))
        self.functions = [str(f) for f in msg.get("functions", []) if str(f).isidentifier()]
        return self.functions

    def call(self, fn: str, *args, **kwargs):
        """Call a function of the loaded module; its reply may hold what request() allows by default."""
        return self.request(fn, args, kwargs)

    def request(self, fn: str, args=(), kwargs=None, *, reply_bytes: int | None = None):
        """Call ``fn(*args, **kwargs)`` in the host. The reply's arrays may hold at most
        ``reply_bytes`` (default: REPLY_FACTOR x the request, at least MIN_REPLY_BYTES); a reply
        declaring more is refused from its header, before anything of it is allocated."""
        parts = encode_parts({"op": "call", "fn": fn}, {"args": list(args), "kwargs": dict(kwargs or {})})
        if reply_bytes is None:
            reply_bytes = max(MIN_REPLY_BYTES, REPLY_FACTOR * parts_size(parts))
        with self.lock:
            msg, value = self._exchange(parts, self.limits.wall_s, reply_bytes)
        if not msg.get("ok"):
            raise RemoteError(str(msg.get("kind", "call")), str(msg.get("type", "Error")),
                              str(msg.get("message", "")), _int(msg.get("line")), _int(msg.get("col")))
        return value

    def kill(self) -> None:
        self.watch.stop()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self._ready:
                self.proc.stdin.write(encode_frame({"op": "exit"}))
                self.proc.stdin.flush()
                self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 (a host already gone: killed next)
            pass
        self.kill()
        self.output.join(0.5)              # its stderr: closed by the thread that drains it
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except Exception:  # noqa: BLE001 (a pipe already broken: nothing to close)
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def host_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process, all its threads (psutil); None when it cannot tell."""
    import psutil
    try:
        t = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return t.user + t.system


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _widen_pipe(fd: int) -> None:
    """A 1 MiB pipe for replies (Linux; the default 64 KiB costs a system call per 64 KiB)."""
    try:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):
        pass


def sweep_stale() -> None:
    """Remove temporary folders of hosts whose engine process is gone (a SIGKILLed device
    worker takes its hosts with it, but cannot remove their folders)."""
    import glob
    for d in glob.glob(os.path.join(tempfile.gettempdir(), "scellis-sandbox-*-*")):
        pid = os.path.basename(d).split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


def _close_all(lock: threading.Lock, hosts: OrderedDict, spare: list) -> None:
    """Close every host of a pool. Takes the pool's containers, not the pool, so that the
    pool's finalizer does not keep the pool alive."""
    with lock:
        held = list(hosts.values()) + spare
        hosts.clear()
        spare.clear()
    for h in held:
        h.close()


class HostPool:
    """The reference hosts one owner keeps: up to max_hosts loaded ones, reused by content key
    (least recently used closed first), and one spare, pre-started host with the default limits
    (a host takes ~0.2 s to start). Stale folders of hosts whose engine died are swept when the
    pool starts its first host. Thread-safe."""

    def __init__(self, max_hosts: int = MAX_HOSTS):
        self.max_hosts = max_hosts
        self._lock = threading.Lock()
        self._hosts: OrderedDict[tuple, Host] = OrderedDict()
        self._spare: list[Host] = []          # the spare host, if any (a list: shared with the finalizer)
        self._swept = False
        # closes the hosts at interpreter exit (an atexit hook), or when the pool is garbage collected
        self._finalizer = weakref.finalize(self, _close_all, self._lock, self._hosts, self._spare)

    # ------------------------------------------------------------------ what it holds
    @property
    def hosts(self) -> tuple[Host, ...]:
        """The loaded hosts (not the spare), least recently used first."""
        with self._lock:
            return tuple(self._hosts.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._hosts)

    def __contains__(self, key: object) -> bool:
        """Whether a host holding the source with this content key is loaded."""
        with self._lock:
            return any(k[0] == key for k in self._hosts)

    # ------------------------------------------------------------------ starting and reusing hosts
    def _start(self, limits: Limits) -> Host:
        if not self._swept:
            self._swept = True
            sweep_stale()
        return Host(limits)

    def _new_host(self, limits: Limits) -> Host:
        """A started host; the spare one is used when the limits are the default, and another
        spare is started for next time."""
        if limits == DEFAULT_LIMITS:
            fresh = self._start(DEFAULT_LIMITS)
            host = self._spare.pop() if self._spare else None
            self._spare.append(fresh)
            if host is not None and host.alive:
                return host
            if host is not None:
                host.close()
        return self._start(limits)

    def prestart(self) -> None:
        """Start a spare host now (it boots in ~0.2 s, in parallel with whatever comes next), so
        that the first reference call does not wait for it."""
        with self._lock:
            if not self._spare or not self._spare[0].alive:
                old = self._spare[:]
                self._spare[:] = [self._start(DEFAULT_LIMITS)]
                for h in old:
                    h.close()

    def host_for(self, key: str, source: str, file: str, limits: Limits | None = None, *,
                 files: dict[str, bytes] | None = None, reference: str | None = None) -> Host:
        """The host holding this source (by content key), loading it on first use (with the
        package's hashed ``files`` as its import snapshot, see Host.load). Raises RemoteError
        when the source does not load."""
        limits = limits or DEFAULT_LIMITS
        k = (key, file, limits)
        with self._lock:
            host = self._hosts.get(k)
            if host is not None and host.alive:
                self._hosts.move_to_end(k)
                return host
            if host is not None:
                self._hosts.pop(k).close()
                if host.stopped_for:           # stopped between calls for a limit: said once, not hidden
                    raise RemoteError("died", "Limit", host.stopped_for)
            host = self._new_host(limits)
            try:
                host.load(source, file, files, reference)
            except RemoteError:
                host.close()
                raise
            self._hosts[k] = host
            while len(self._hosts) > self.max_hosts:
                self._hosts.popitem(last=False)[1].close()
            return host

    def discard(self, host: Host) -> None:
        """Forget a host (it died, or misbehaved) and close it."""
        with self._lock:
            for k, h in list(self._hosts.items()):
                if h is host:
                    del self._hosts[k]
        host.close()

    def shutdown(self) -> None:
        """Close every host, the spare too. The pool stays usable: it starts new hosts on demand."""
        _close_all(self._lock, self._hosts, self._spare)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
