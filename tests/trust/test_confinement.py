"""Confinement below Python: a trusted reference can neither run a program
nor connect any socket — pathname Unix sockets included — whatever Python or C API it uses.

The attack that was seen: ``_posixsubprocess.fork_exec`` raises no audit event on Python 3.11,
so a reference started a program past the audit hook; Landlock and the network namespace do
not confine pathname Unix sockets, so that program connected to a socket listening outside the
sandbox. The host's seccomp filter (studio/engine/trust/seccomp.py) refuses the system calls
themselves. Each test here runs a real host; the ones marked "without seccomp" are the negative
controls: the same reference, in a host without the filter, does escape."""
from __future__ import annotations

import os
import platform
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from studio.engine.contract.package import load_package
from studio.engine.proof.conformance import conform
from studio.engine.trust.pool import Host, HostPool, Limits, RemoteError

REPO = Path(__file__).resolve().parents[2]
MEDIAN = REPO / "examples" / "windowed_median"

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"),
                                reason="the system-call filter exists on Linux (x86_64, aarch64) only")

ESCAPES = r'''
import os, sys, socket, threading

SH = "/bin/sh"

def _fork_exec(argv):
    import _posixsubprocess                    # raises no audit event on Python 3.11
    r, w = os.pipe()
    args = [[os.fsencode(a) for a in argv], [os.fsencode(argv[0])], True, (w,), None, None,
            -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None]
    try:
        return _posixsubprocess.fork_exec(*args, False)      # 3.11: 23 arguments
    except TypeError:
        return _posixsubprocess.fork_exec(*args)

def run(api, marker):
    """Start `sh -c 'echo ran > marker'` through one API or another."""
    argv = [SH, "-c", f"echo ran > {marker}"]
    if api == "fork_exec":
        return _fork_exec(argv)
    if api == "posix_spawn":
        return os.posix_spawn(SH, argv, {})
    if api == "execv":
        os.execv(SH, argv)
    if api == "subprocess":
        import subprocess
        return subprocess.run(argv).returncode
    if api == "system":
        return os.system(argv[2])
    if api == "fork":
        pid = os.fork()
        if pid == 0:
            with open(marker, "w") as f:
                f.write("ran")
            os._exit(0)
        return pid
    if api == "ctypes":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        pid = libc.fork()
        if pid == 0:
            libc.execv(SH.encode(), (ctypes.c_char_p * 4)(*[a.encode() for a in argv], None))
            os._exit(1)
        if pid < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return pid
    raise ValueError(api)

def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(path)
    s.sendall(b"the contents of ~/.bashrc")
    return "connected"

def unix_ctypes(path):
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket: " + os.strerror(ctypes.get_errno()))
    addr = struct.pack("H", socket.AF_UNIX) + path.encode() + b"\0"
    if libc.connect(fd, addr, len(addr)) != 0:
        raise OSError(ctypes.get_errno(), "connect: " + os.strerror(ctypes.get_errno()))
    return "connected"

def unix_from_a_child(path):
    """The attack as seen: a program started past the audit hook connects for the reference."""
    code = (f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({path!r}); "
            f"s.sendall(b'the contents of ~/.bashrc')")
    return _fork_exec([sys.executable, "-c", code])

def tcp(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    return "connected"

def signal(pid):
    os.kill(pid, 0)
    return "signalled"

def threads(n):
    out = []
    ts = [threading.Thread(target=out.append, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sorted(out)
'''


def _host(audit_hook: bool = True, seccomp: bool = True) -> Host:
    h = Host(Limits(cpu_s=5, wall_s=20.0), audit_hook=audit_hook, seccomp=seccomp)
    h.load(ESCAPES, "/pkg/reference.py")
    return h


def _filtered(h: Host) -> bool:
    return any(e.startswith("seccomp") for e in h.enforced)


def _seen(h, path: Path) -> Path:
    """A file of the host's temporary folder as the test sees it: where the kernel allows it, that
    folder is a tmpfs in the host's own mount namespace (namespaces.py), reached through /proc."""
    return Path(f"/proc/{h.pid}/root") / path.relative_to("/")


def _appeared(path: Path, within: float = 1.5) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


class _Listener:
    """A pathname Unix socket listening outside the sandbox, with a thread that records every
    connection it accepts (and what was sent)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="scl-")         # short: a socket path is at most 107 bytes
        self.path = os.path.join(self.dir, "agent.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.accepted: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(1)
            try:
                self.accepted.append(conn.recv(1024))
            except OSError:
                self.accepted.append(b"")
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def listener():
    lst = _Listener()
    yield lst
    lst.close()


# ------------------------------------------------------------------ no program runs
@pytest.mark.parametrize("api", ["fork_exec", "posix_spawn", "execv", "subprocess", "system", "fork", "ctypes"])
def test_no_program_runs_whatever_the_api(api):
    """Kernel only (the audit hook off): every way of starting a program fails in the kernel."""
    h = _host(audit_hook=False)
    try:
        assert _filtered(h), h.enforced
        marker = Path(h.tmp) / "ran.txt"
        try:
            status = h.call("run", api, str(marker))
        except RemoteError as e:
            assert e.type_name in ("PermissionError", "OSError") and "not permitted" in e.message, e
        else:
            assert api == "system" and status != 0               # os.system reports a failure status
        assert not _appeared(_seen(h, marker))
        assert h.alive and h.call("threads", 2) == [0, 1]        # still serving
    finally:
        h.close()


def test_fork_exec_no_longer_passes_the_audit_hook():
    """The attack as seen: the default host (audit hook on), _posixsubprocess.fork_exec."""
    h = _host()
    try:
        marker = Path(h.tmp) / "ran.txt"
        with pytest.raises(RemoteError) as info:
            h.call("run", "fork_exec", str(marker))
        assert info.value.type_name == "PermissionError"
        assert not _appeared(_seen(h, marker))
    finally:
        h.close()


def test_without_seccomp_fork_exec_does_run_a_program():
    """Negative control: the same reference in a host without the filter starts the program."""
    h = _host(seccomp=False)
    try:
        assert not _filtered(h)
        marker = Path(h.tmp) / "ran.txt"
        h.call("run", "fork_exec", str(marker))
        assert _appeared(_seen(h, marker), 10)
    finally:
        h.close()


# ------------------------------------------------------------------ no socket connects
@pytest.mark.parametrize("fn", ["unix", "unix_ctypes"])
def test_no_pathname_unix_socket_connects(listener, fn):
    h = _host(audit_hook=False)
    try:
        with pytest.raises(RemoteError) as info:
            h.call(fn, listener.path)
        assert info.value.type_name in ("PermissionError", "OSError") and "not permitted" in info.value.message
    finally:
        h.close()
    time.sleep(0.3)
    assert listener.accepted == []


def test_no_program_connects_for_the_reference(listener):
    """The attack as seen: a child started past the audit hook connects to a local socket."""
    h = _host()
    try:
        with pytest.raises(RemoteError) as info:
            h.call("unix_from_a_child", listener.path)
        assert info.value.type_name == "PermissionError"
    finally:
        h.close()
    time.sleep(1.0)
    assert listener.accepted == []


def test_without_seccomp_a_child_does_connect(listener):
    """Negative control: without the filter, the child reaches the socket outside the sandbox."""
    h = _host(seccomp=False)
    try:
        h.call("unix_from_a_child", listener.path)
        deadline = time.monotonic() + 15
        while not listener.accepted and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        h.close()
    assert listener.accepted == [b"the contents of ~/.bashrc"]


def test_no_tcp_even_to_localhost():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    h = _host(audit_hook=False)
    try:
        with pytest.raises(RemoteError) as info:
            h.call("tcp", server.getsockname()[1])
        assert info.value.type_name == "PermissionError"       # refused at socket(), by the filter
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        h.close()
        server.close()


def test_no_signal_reaches_another_process():
    h = _host(audit_hook=False)
    try:
        for pid in (os.getpid(), -1):
            with pytest.raises(RemoteError) as info:
                h.call("signal", pid)
            assert info.value.type_name == "PermissionError"
    finally:
        h.close()


# ------------------------------------------------------------------ what still works
def test_threads_and_numpy_still_run_under_the_filter():
    h = _host(audit_hook=False)
    try:
        assert h.call("threads", 8) == list(range(8))
    finally:
        h.close()


@pytest.mark.slow
def test_the_confined_host_still_computes_the_story_ops_conformance(ctx, device):
    with HostPool() as pool:
        from studio.engine.context import Context
        c = Context.open(device=device, hosts=pool)
        pkg = load_package(MEDIAN)
        out = c.references.forward(pkg, {"x": np.arange(9, dtype=np.float32)}, {"w": 3})
        np.testing.assert_array_equal(out["y"], np.arange(1, 8, dtype=np.float32))
        assert conform(c, pkg).ok
        assert any(e.startswith("seccomp") for e in pool.hosts[0].enforced)
