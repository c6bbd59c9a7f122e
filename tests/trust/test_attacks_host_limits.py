"""Attacks by a trusted reference on the machine as a whole and on what the user sees: its output,
its threads, its temporary bytes, file leases (docs/security.md, "The attacks").

Each test is the attack, run in a real host with the Python audit hook off (the kernel layers and
the engine's watch are the boundary); a control shows the same thing landing where the layer is
missing, or a modest use passing."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time

import psutil
import pytest

from studio.engine.trust.pool import Host, HostPool, Limits, RemoteError
from studio.engine.trust.watch import Output, printable

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"),
                                reason="the system-call filter and the namespaces exist on Linux (x86_64, aarch64) only")

ATTACKS = r'''
import errno, os, threading, time


def rewrite_stderr():
    """What a hostile reference does to a CI log that the CLI's stderr and stdout point to."""
    got = {}
    for fd in (1, 2):
        for name, act in (("ftruncate", lambda: os.ftruncate(fd, 0)), ("lseek", lambda: os.lseek(fd, 0, 0))):
            try:
                act()
                got[f"{name}{fd}"] = 0
            except OSError as e:
                got[f"{name}{fd}"] = e.errno
        os.write(fd, b"\x1b[2J\x1b[1;1HPASS: 429 of 429 cases\r\n")
    print("\x1b]0;owned\x07 and a stray print", flush=True)
    return got


def shout_and_die(n):
    os.write(2, b"x" * n)
    os.write(2, b"\x1b[31mPASS\r\xe2\x80\xae done")
    os._exit(1)


def raise_escapes():
    raise ValueError("\x1b[2J\rPASS")


def threads(n, wait=0.0):
    threading.stack_size(64 << 10)
    def spawn():
        time.sleep(wait)
        for _ in range(n):
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    if wait:
        threading.Thread(target=spawn, daemon=True).start()
    else:
        spawn()
    return threading.active_count()


def temp(total_mib, per_mib):
    blob = b"x" * (per_mib << 20)
    for i in range(total_mib // per_mib):
        with open(f"t{i}.bin", "wb") as f:
            f.write(blob)
    return total_mib


def temp_files(n):
    for i in range(n):
        open(f"e{i}", "wb").close()
    return n


def lease(path=None):
    import fcntl
    fd = os.open(path or "lease.txt", os.O_RDONLY | (0 if path else os.O_CREAT), 0o600)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        return 0
    except OSError as e:
        return e.errno
'''


def _host(**kw) -> Host:
    flags = {k: kw.pop(k) for k in ("seccomp", "tmpfs") if k in kw}
    h = Host(Limits(**{"cpu_s": 5, "wall_s": 30.0, **kw}), audit_hook=False, **flags)
    h.load(ATTACKS, "/pkg/reference.py")
    return h


@pytest.fixture(scope="module")
def host():
    h = _host()
    yield h
    h.close()


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _tmpfs(h: Host) -> bool:
    return any(e.startswith("temporary folder: a private tmpfs") for e in h.enforced)


# ------------------------------------------------------------------ output: never the user's terminal or files
def test_a_host_cannot_rewrite_the_log_the_clis_stderr_points_to(tmp_path):
    """`scellis conform … > ci.log 2>&1`: the host's stdout and stderr are pipes the engine reads,
    so truncating, seeking and writing them leaves the log as the CLI wrote it."""
    log = tmp_path / "ci.log"
    log.write_bytes(b"FAIL: 361 of 429 cases\n")
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        h = _host()
        try:
            got = h.call("rewrite_stderr")
        finally:
            h.close()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)
    assert log.read_bytes() == b"FAIL: 361 of 429 cases\n"
    assert got["ftruncate2"] != 0 and got["lseek2"] != 0          # pipes: EINVAL, ESPIPE
    said = h.output.text()
    assert "PASS: 429 of 429" in said and "\x1b" not in said and "\r" not in said
    assert "\\x1b[2J" in said and "\\x1b]0;owned\\x07 and a stray print" in said


def test_a_process_that_inherits_the_log_rewrites_it(tmp_path):
    """The control: what the same calls do to a log a child inherits as its stderr."""
    log = tmp_path / "ci.log"
    log.write_bytes(b"FAIL: 361 of 429 cases\n")
    code = "import os; os.ftruncate(2, 0); os.lseek(2, 0, 0); os.write(2, b'PASS: 429 of 429 cases\\n')"
    with open(log, "ab") as f:
        subprocess.run([sys.executable, "-S", "-c", code], stderr=f, check=True, timeout=30)
    assert log.read_bytes() == b"PASS: 429 of 429 cases\n"


def test_what_a_dying_host_wrote_is_bounded_and_shown_escaped():
    h = _host()
    try:
        with pytest.raises(RemoteError) as info:
            h.call("shout_and_die", 1 << 20)
        msg = info.value.message
        assert "exited (status 1); its last output:" in msg and msg.endswith("\\x1b[31mPASS\\r\\u202e done")
        assert msg.isprintable() and len(msg) < 500
        h.output.join()
        assert len(h.output.data) <= 64 << 10 and h.output.dropped >= (1 << 20) - (64 << 10)
        assert h.output.text().startswith(f"[{h.output.dropped} earlier bytes dropped] ")
    finally:
        h.close()


def test_a_references_own_error_message_is_shown_escaped(host):
    with pytest.raises(RemoteError) as info:
        host.call("raise_escapes")
    assert info.value.message == "\\x1b[2J\\rPASS" and str(info.value).isprintable()


def test_printable_escapes_controls_and_keeps_text():
    assert printable("ok: 3 cases, ±1 ulp") == "ok: 3 cases, ±1 ulp"
    assert printable(b"\x1b[2Ja\rb\n\x9b\xe2\x80\xae") == "\\x1b[2Ja\\rb\\n\\x9b\\u202e"
    assert printable(b"\xff") == "\\xff" and printable("abcdef", 2) == "…ef"


def test_output_keeps_the_last_bytes_of_a_pipe():
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as pipe:
        out = Output(pipe, keep=8)
        os.write(w, b"0123456789ab")
        os.close(w)
        out.join()
        assert bytes(out.data) == b"456789ab" and out.dropped == 4
        assert pipe.closed                    # by the thread that drained it, at end of file


# ------------------------------------------------------------------ threads
def test_a_host_starting_2000_threads_is_stopped():
    h = _host()
    try:
        t0 = time.monotonic()
        with pytest.raises(RemoteError) as info:
            h.call("threads", 2000)
        assert info.value.kind == "died" and "threads, over its limit of 64;" in info.value.message
        assert info.value.message.startswith("was stopped: it ran ") and time.monotonic() - t0 < 20
        h.proc.wait(5)
        assert _gone(h.pid)
    finally:
        h.close()


def test_a_host_within_its_thread_limit_keeps_running(host):
    assert host.call("threads", 8) >= 9 and host.alive


def test_threads_started_between_calls_are_named_at_the_next_use():
    """A thread left running spawns the rest after its call returned: the watch stops the host,
    and the pool says why at the next use instead of quietly starting another."""
    with HostPool() as pool:
        h = pool.host_for("k", ATTACKS, "/pkg/reference.py", Limits(cpu_s=5, wall_s=30.0))
        h.call("threads", 300, 0.2)
        deadline = time.monotonic() + 10
        while h.alive and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(RemoteError) as info:
            pool.host_for("k", ATTACKS, "/pkg/reference.py", Limits(cpu_s=5, wall_s=30.0))
        assert "threads, over its limit of 64" in info.value.message and _gone(h.pid)


# ------------------------------------------------------------------ temporary bytes, in total
def test_200_mib_across_temp_files_is_refused_by_the_capped_tmpfs(host):
    if not _tmpfs(host):
        pytest.skip("no unprivileged user namespaces here: the engine's quota holds instead (next tests)")
    with pytest.raises(RemoteError) as info:
        host.call("temp", 200, 8)
    assert info.value.kind == "call" and info.value.message == (
        "[Errno 28] No space left on device (the reference's temporary folder holds at most 128 MiB)")
    assert host.alive and os.listdir(host.tmp) == []          # the engine's disk never held any of it


def test_temp_files_within_the_cap_are_written(host):
    assert host.call("temp", 4, 1) == 4


def test_200_mib_across_temp_files_is_stopped_by_the_engines_quota():
    """Where no tmpfs can be mounted, the engine walks the folder and stops the host past the quota."""
    h = _host(tmpfs=False, temp_bytes=16 << 20)
    try:
        assert not _tmpfs(h)
        with pytest.raises(RemoteError) as info:
            h.call("temp", 200, 8)
        assert info.value.kind == "died" and "over its limit of 16 MiB in total;" in info.value.message
        h.proc.wait(5)
        assert _gone(h.pid)
    finally:
        h.close()
    assert not os.path.exists(h.tmp)


def test_the_engines_quota_counts_files_too():
    h = _host(tmpfs=False, temp_files=64)
    try:
        assert h.call("temp_files", 32) == 32 and h.alive          # within: it runs on
        with pytest.raises(RemoteError) as info:
            h.call("temp_files", 200)
        assert "held more than 64 files, its limit;" in info.value.message
    finally:
        h.close()


# ------------------------------------------------------------------ file leases
def test_a_file_lease_is_refused(host):
    assert any(e.startswith("seccomp") for e in host.enforced), host.enforced
    assert host.call("lease") == 1                                     # EPERM, its own temporary file
    assert host.call("lease", os.__file__) == 1                        # a runtime file (the venv's os.py)


def test_a_file_lease_lands_without_the_filter():
    h = _host(seccomp=False)
    try:
        assert h.call("lease") == 0
    finally:
        h.close()
