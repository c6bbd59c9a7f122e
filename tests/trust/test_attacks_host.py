"""Attacks by a trusted reference on what lies beyond its host, as seen.

Each test is the attack itself: a reference that makes the raw system call through ctypes (so
the Python audit hook is switched off: the kernel layers are the boundary), run in a real host.
Where a call would act on another process, the victim is a throwaway ``sleep`` started by the
test (never the test process), and a negative control runs the same attack in a host without
the system-call filter and shows that it does land there."""
from __future__ import annotations

import os
import platform
import resource
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studio.engine.trust.pool import Host, Limits, RemoteError

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"),
                                reason="the system-call filter and Landlock exist on Linux (x86_64, aarch64) only")

ATTACKS = r'''
import ctypes, os, platform, struct, threading, time

_NR = {
    "x86_64": {"prlimit64": 302, "setrlimit": 160, "setpriority": 141, "sched_setaffinity": 203,
               "sched_setscheduler": 144, "fchmod": 91, "fchown": 93, "fsetxattr": 190, "fremovexattr": 199,
               "futimesat": 261, "utimensat": 280, "memfd_create": 319, "prctl": 157, "personality": 135,
               "getpriority": 140},
    "aarch64": {"prlimit64": 261, "setrlimit": 164, "setpriority": 140, "sched_setaffinity": 122,
                "sched_setscheduler": 119, "fchmod": 52, "fchown": 55, "fsetxattr": 7, "fremovexattr": 16,
                "futimesat": None, "utimensat": 88, "memfd_create": 279, "prctl": 167, "personality": 92,
                "getpriority": 141},
}[platform.machine()]
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _sys(name, *args):
    """The raw system call; 0 when it did what was asked, else its errno."""
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(_NR[name]), *args)
    return 0 if r >= 0 else ctypes.get_errno()


class _Rlim(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


def prlimit_other(pid):           # 8 open files for another process
    return _sys("prlimit64", ctypes.c_int(pid), ctypes.c_int(7), ctypes.byref(_Rlim(8, 8)), None)


def prlimit_raise_cpu():          # its own CPU limit up to the lifetime cap
    old = _Rlim()
    _sys("prlimit64", ctypes.c_int(0), ctypes.c_int(0), None, ctypes.byref(old))
    return _sys("prlimit64", ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(_Rlim(old.max, old.max)), None)


def prlimit_read_own():           # reading its own limits still works
    old = _Rlim()
    return _sys("prlimit64", ctypes.c_int(0), ctypes.c_int(0), None, ctypes.byref(old)), old.max


def setrlimit_cpu():
    old = _Rlim()
    _sys("prlimit64", ctypes.c_int(0), ctypes.c_int(0), None, ctypes.byref(old))
    return _sys("setrlimit", ctypes.c_int(0), ctypes.byref(_Rlim(old.max, old.max)))


def raise_then_spin():
    import resource
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    except (OSError, ValueError):
        pass
    while True:
        pass


def setpriority_other(pid):       # PRIO_PROCESS, nice 19
    return _sys("setpriority", ctypes.c_int(0), ctypes.c_int(pid), ctypes.c_int(19))


def setpriority_user():           # PRIO_USER 0: every process of this user
    return _sys("setpriority", ctypes.c_int(2), ctypes.c_int(0), ctypes.c_int(19))


def affinity(pid):                # pin to CPU 0
    mask = ctypes.c_uint64(1)
    return _sys("sched_setaffinity", ctypes.c_int(pid), ctypes.c_size_t(8), ctypes.byref(mask))


def scheduler_other(pid):         # SCHED_IDLE
    param = ctypes.c_int(0)
    return _sys("sched_setscheduler", ctypes.c_int(pid), ctypes.c_int(5), ctypes.byref(param))


def _own_file():
    fd = os.open("victim.txt", os.O_RDWR | os.O_CREAT, 0o600)
    return fd


def fchmod():
    fd = _own_file()
    return _sys("fchmod", ctypes.c_int(fd), ctypes.c_uint(0o777)), oct(os.fstat(fd).st_mode & 0o777)


def fchown():
    fd = _own_file()
    return _sys("fchown", ctypes.c_int(fd), ctypes.c_uint(os.getuid()), ctypes.c_uint(os.getgid()))


def fsetxattr():
    fd = _own_file()
    return _sys("fsetxattr", ctypes.c_int(fd), ctypes.c_char_p(b"user.scellis"), ctypes.c_char_p(b"x"),
                ctypes.c_size_t(1), ctypes.c_int(0))


def fremovexattr():
    fd = _own_file()
    return _sys("fremovexattr", ctypes.c_int(fd), ctypes.c_char_p(b"user.scellis"))


def futimesat():
    if _NR["futimesat"] is None:
        return "absent"
    fd = _own_file()
    return _sys("futimesat", ctypes.c_int(fd), None, None)


def utimensat():
    fd = _own_file()
    return _sys("utimensat", ctypes.c_int(fd), None, None, ctypes.c_int(0))


def memfd(n):
    """memfd_create, then n bytes in it (memory the address-space limit does not count)."""
    fd = _libc.syscall(ctypes.c_long(_NR["memfd_create"]), ctypes.c_char_p(b"x"), ctypes.c_uint(0))
    if fd < 0:
        return ctypes.get_errno()
    os.ftruncate(fd, n)
    view = memoryview(bytearray(1 << 20))
    for _ in range(n >> 20):
        os.write(fd, view)
    return 0


def pdeathsig_clear():
    return _sys("prctl", ctypes.c_int(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0),
                ctypes.c_ulong(0))


def personality():                # ADDR_NO_RANDOMIZE
    return _sys("personality", ctypes.c_ulong(0x0040000))


def outlive():
    """Clear the death signal and keep a thread alive, as the attacker did."""
    pdeathsig_clear()
    threading.Thread(target=lambda: time.sleep(600), daemon=False).start()
    return os.getpid()


def read(path):
    with open(path, "rb") as f:
        return len(f.read())


def lock(path):
    import fcntl
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
'''


READER = r'''
def read(path):
    with open(path, "rb") as f:
        return len(f.read())
'''


def _host(seccomp: bool = True, **limits) -> Host:
    h = Host(Limits(**{"cpu_s": 5, "wall_s": 30.0, **limits}), audit_hook=False, seccomp=seccomp)
    h.load(ATTACKS, "/pkg/reference.py")
    if seccomp:
        assert any(e.startswith("seccomp") for e in h.enforced), h.enforced
    return h


@pytest.fixture(scope="module")
def host():
    h = _host()
    yield h
    h.close()


@pytest.fixture(scope="module")
def bare():
    """The negative control: a host without the system-call filter."""
    h = _host(seccomp=False)
    yield h
    h.close()


@pytest.fixture
def victim():
    """Another process of the same user (a stand-in for the worker and the CLI)."""
    p = subprocess.Popen(["sleep", "60"])
    yield p
    p.kill()
    p.wait()


def _nofile(pid: int) -> int:
    return resource.prlimit(pid, resource.RLIMIT_NOFILE)[0]


EPERM = 1


# ------------------------------------------------------------------ other processes
def test_prlimit64_on_another_process_is_refused(host, victim):
    before = _nofile(victim.pid)
    assert host.call("prlimit_other", victim.pid) == EPERM
    assert _nofile(victim.pid) == before


def test_prlimit64_on_another_process_lands_without_the_filter(bare, victim):
    assert bare.call("prlimit_other", victim.pid) == 0
    assert _nofile(victim.pid) == 8


def test_prlimit64_raising_its_own_cpu_limit_is_refused(host):
    assert host.call("prlimit_raise_cpu") == EPERM
    err, hard = host.call("prlimit_read_own")
    assert err == 0 and hard > 0                           # reading its own limits still works


def test_setrlimit_is_refused(host):
    assert host.call("setrlimit_cpu") == EPERM


@pytest.mark.slow
def test_a_raised_cpu_limit_does_not_outlast_the_call_limit():
    h = _host(cpu_s=1)
    try:
        t0 = time.monotonic()
        with pytest.raises(RemoteError) as info:
            h.call("raise_then_spin")
        assert info.value.kind == "died" and "CPU time" in info.value.message
        assert time.monotonic() - t0 < 25
    finally:
        h.close()


def test_setpriority_is_refused(host, victim):
    assert host.call("setpriority_other", victim.pid) == EPERM
    assert host.call("setpriority_user") == EPERM
    assert os.getpriority(os.PRIO_PROCESS, victim.pid) == 0


def test_setpriority_lands_without_the_filter(bare, victim):
    assert bare.call("setpriority_other", victim.pid) == 0
    assert os.getpriority(os.PRIO_PROCESS, victim.pid) == 19


def test_sched_setaffinity_on_another_process_is_refused(host, victim):
    before = os.sched_getaffinity(victim.pid)
    assert host.call("affinity", victim.pid) == EPERM
    assert os.sched_getaffinity(victim.pid) == before
    assert host.call("affinity", 0) == 0                   # its own: allowed


def test_sched_setaffinity_lands_without_the_filter(bare, victim):
    assert bare.call("affinity", victim.pid) == 0
    assert os.sched_getaffinity(victim.pid) == {0}


def test_sched_setscheduler_on_another_process_is_refused(host, victim):
    assert host.call("scheduler_other", victim.pid) == EPERM
    assert os.sched_getscheduler(victim.pid) == os.SCHED_OTHER


# ------------------------------------------------------------------ metadata through descriptors
def test_fchmod_is_refused(host):
    err, mode = host.call("fchmod")
    assert err == EPERM and mode == "0o600"


def test_fchmod_lands_without_the_filter(bare):
    err, mode = bare.call("fchmod")
    assert err == 0 and mode == "0o777"


@pytest.mark.parametrize("attack", ["fchown", "fsetxattr", "fremovexattr", "futimesat", "utimensat"])
def test_metadata_changes_are_refused(host, attack):
    got = host.call(attack)
    assert got == EPERM or (attack == "futimesat" and got == "absent")


def test_utimensat_lands_without_the_filter(bare):
    assert bare.call("utimensat") == 0


# ------------------------------------------------------------------ memory, personality, death signal
def test_memfd_create_is_refused():
    h = _host(memory_bytes=512 << 20)
    try:
        assert h.call("memfd", 1536 << 20) == EPERM
    finally:
        h.close()


def test_memfd_create_lands_without_the_filter(bare):
    assert bare.call("memfd", 8 << 20) == 0


def test_personality_is_refused(host):
    assert host.call("personality") == EPERM


def test_clearing_the_death_signal_is_refused(host):
    assert host.call("pdeathsig_clear") == EPERM


@pytest.mark.slow
def test_a_host_that_clears_its_death_signal_still_dies_with_its_owner():
    """The attack as seen: clear PR_SET_PDEATHSIG, start a thread, and the owner is SIGKILLed."""
    code = ("import sys, os; sys.path.insert(0, %r)\n"
            "from studio.engine.trust.pool import Host, Limits\n"
            "from tests.trust.test_attacks_host import ATTACKS\n"
            "h = Host(Limits(), audit_hook=False); h.load(ATTACKS, 'r.py')\n"
            "print(h.pid, h.call('outlive'), flush=True)\n"
            "os.kill(os.getpid(), 9)") % str(REPO)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    pytest.fail(f"the reference host {pid} outlived its owner")


# ------------------------------------------------------------------ the user's folder
def test_the_seal_key_is_never_readable_by_a_host(_isolated_home):
    """A trusted reference that reads the receipt key (where it is or where it moves) gets EACCES."""
    keys = [_isolated_home / "receipt.key", _isolated_home / "records" / "receipt.key"]
    for k in keys:
        k.parent.mkdir(exist_ok=True)
        k.write_bytes(os.urandom(32))
        k.chmod(0o600)
    (_isolated_home / "trust.json").write_text("{}")
    for hook in (True, False):
        h = Host(Limits(cpu_s=5, wall_s=30.0), audit_hook=hook)
        try:
            h.load(READER, "/pkg/reference.py")
            if not any(e.startswith("Landlock") for e in h.enforced):
                pytest.skip("this kernel has no Landlock: reads are not confined here")
            for k in keys + [_isolated_home / "trust.json", _isolated_home]:
                with pytest.raises(RemoteError) as info:
                    h.call("read", str(k))
                assert info.value.type_name in ("PermissionError", "IsADirectoryError") and (
                    "Permission denied" in info.value.message or k == _isolated_home), info.value
        finally:
            h.close()
    assert stat.S_IMODE(keys[0].stat().st_mode) == 0o600


def test_a_host_cannot_take_the_trust_lock(_isolated_home):
    (_isolated_home / ".trust.lock").touch()
    h = _host()
    try:
        with pytest.raises(RemoteError) as info:
            h.call("lock", str(_isolated_home / ".trust.lock"))
        assert info.value.type_name == "PermissionError"
    finally:
        h.close()


def test_a_host_reads_the_python_runtime_but_not_the_project(host):
    assert host.call("read", os.path.join(os.path.dirname(os.__file__), "os.py")) > 0
    with pytest.raises(RemoteError) as info:
        host.call("read", str(REPO / "pyproject.toml"))
    assert info.value.type_name == "PermissionError"


# ------------------------------------------------------------------ what the profile says
@pytest.mark.slow
def test_the_profile_says_what_confines_a_host_here(ctx, host):
    from studio.engine.services.actions import profile
    got = profile(ctx).reference_host
    landlock = any(e.startswith("Landlock") for e in host.enforced)
    assert (got["landlock_abi"] > 0) == landlock and got["seccomp"]
    assert ("no Landlock" in got["summary"]) == (not landlock)
    assert bool(got["missing"]) == (not landlock)
