"""The reference host's system-call filter (seccomp-BPF, Linux): below Python, so it holds
whatever a reference calls — ``_posixsubprocess``, ``ctypes``, raw machine code.

The confined host (studio/engine/trust/host.py) loads this file by its path and calls
``install()`` once its own imports are done. It imports only the standard library: like the
host, it is part of a program that must run without the engine.

The filter, hand-assembled (no libseccomp needed), refuses with ``EPERM``:

- running programs: ``execve``, ``execveat``;
- new processes: ``fork``, ``vfork``, and ``clone`` without ``CLONE_THREAD`` or with a new
  namespace (threads still start: numpy and ``threading`` use ``clone`` with ``CLONE_THREAD``); ``clone3`` answers
  ``ENOSYS``, whose flags live in memory a filter cannot read, so glibc falls back to ``clone``;
- sockets of every family (``socket``, ``socketpair``) and what is done with one (``connect``,
  ``bind``, ``listen``, ``accept``, ``accept4``, ``sendto``, ``sendmsg``, ``sendmmsg``): no
  network, no pathname or abstract Unix socket (an X server, a desktop session bus, an agent);
- ``io_uring`` (its operations would bypass the filter), ``ptrace``, ``process_vm_readv`` and
  ``process_vm_writev``, ``pidfd_open``/``pidfd_send_signal``/``pidfd_getfd``, ``tkill``;
- ``unshare``, ``setns``, ``mount``, ``umount2``, ``pivot_root``, ``chroot``, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``keyctl``/``add_key``/``request_key``;
- signals to any process but the host itself: ``kill``, ``tgkill``, ``rt_sigqueueinfo`` and
  ``rt_tgsigqueueinfo`` pass only for the host's own pid (and ``kill(0, …)``, its own group:
  the host leads a session of its own);
- scheduling of any process but the host itself: ``sched_setaffinity``, ``sched_setscheduler``,
  ``sched_setparam``, ``sched_setattr`` pass only for pid 0 or the host's pid; ``setpriority``
  and ``ioprio_set`` (whose ``who`` may name a group or the whole user) never pass;
- limits: ``setrlimit`` never passes, ``prlimit64`` only reads, and only the host's own limits
  (pid 0 or its pid, no new limit): no limit is raised, and nobody else's is touched;
- metadata changes, by path or through a descriptor: ``chmod``, ``fchmod``, ``fchmodat``,
  ``fchmodat2``, ``chown``, ``fchown``, ``lchown``, ``fchownat``, ``setxattr``, ``lsetxattr``,
  ``fsetxattr``, ``setxattrat``, ``removexattr``, ``lremovexattr``, ``fremovexattr``,
  ``removexattrat``, ``utime``, ``utimes``, ``futimesat``, ``utimensat`` (Landlock does not cover
  these, and a descriptor opened for reading would otherwise do);
- ``memfd_create`` and ``memfd_secret`` (memory that the address-space limit does not count);
- ``personality``; and ``prctl(PR_SET_PDEATHSIG, …)``: the death signal the host armed before
  the filter stays armed;
- ``fcntl(fd, F_SETLEASE, …)``: no file lease, which would stall whoever next opens that file for
  writing (the host may read the runtime's files, and owns its temporary ones); every other
  ``fcntl`` command passes.

A system call of another architecture (32-bit ``int 0x80`` on x86_64, the x32 ABI) kills the
process. The filter is applied to every thread (``SECCOMP_FILTER_FLAG_TSYNC``) and inherited by
any thread started later; it cannot be removed, only narrowed further.
"""
from __future__ import annotations

import ctypes
import os
import platform
import struct

_EPERM, _ENOSYS = 1, 38
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (NEWTIME only through clone3/unshare)
_CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_X32_SYSCALL_BIT = 0x40000000
_PR_SET_NO_NEW_PRIVS, _PR_SET_PDEATHSIG = 38, 1
_F_SETLEASE = 1024
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian)
_OFF_NR, _OFF_ARCH = 0, 4


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


# per architecture: AUDIT_ARCH_*, the seccomp syscall, and the numbers of what is refused
_ARCHES = {
    "x86_64": {
        "audit": 0xC000003E, "seccomp": 317, "x32": True,
        "deny": {"execve": 59, "execveat": 322, "fork": 57, "vfork": 58,
                 "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43,
                 "accept4": 288, "sendto": 44, "sendmsg": 46, "sendmmsg": 307,
                 "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                 "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
                 "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "tkill": 200,
                 "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
                 "chroot": 161, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
                 "keyctl": 250, "add_key": 248, "request_key": 249,
                 "setrlimit": 160, "setpriority": 141, "ioprio_set": 251,
                 "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
                 "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
                 "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "setxattrat": 463,
                 "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "removexattrat": 466,
                 "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
                 "memfd_create": 319, "memfd_secret": 447, "personality": 135},
        "clone": 56, "clone3": 435, "prlimit64": 302, "prctl": 157, "fcntl": 72,
        "own_pid": {"kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
                    "sched_setparam": 142, "sched_setscheduler": 144, "sched_setaffinity": 203,
                    "sched_setattr": 314},
    },
    "aarch64": {
        "audit": 0xC00000B7, "seccomp": 277, "x32": False,
        "deny": {"execve": 221, "execveat": 281,
                 "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201, "accept": 202,
                 "accept4": 242, "sendto": 206, "sendmsg": 211, "sendmmsg": 269,
                 "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                 "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                 "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "tkill": 130,
                 "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
                 "chroot": 51, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
                 "keyctl": 219, "add_key": 217, "request_key": 218,
                 "setrlimit": 164, "setpriority": 140, "ioprio_set": 30,
                 "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchown": 55, "fchownat": 54,
                 "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "setxattrat": 463,
                 "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "removexattrat": 466,
                 "utimensat": 88, "memfd_create": 279, "memfd_secret": 447, "personality": 92},
        "clone": 220, "clone3": 435, "prlimit64": 261, "prctl": 167, "fcntl": 25,
        "own_pid": {"kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
                    "sched_setparam": 118, "sched_setscheduler": 119, "sched_setaffinity": 122,
                    "sched_setattr": 274},
    },
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple:
    return code, jt, jf, k


def program(arch: dict, pid: int) -> list[tuple]:
    """The BPF program (a list of (code, jt, jf, k)) for one architecture and the host's pid.
    Each rule is a block that starts by comparing the syscall number and, when it matches,
    returns in every branch; when it does not, it jumps over itself to the next rule."""
    deny = _RET_ERRNO | _EPERM
    prog = [_insn(_LD_W_ABS, _OFF_ARCH),
            _insn(_JEQ_K, arch["audit"], 1, 0),
            _insn(_RET_K, _RET_KILL_PROCESS),
            _insn(_LD_W_ABS, _OFF_NR)]
    if arch["x32"]:
        prog += [_insn(_JGE_K, _X32_SYSCALL_BIT, 0, 1), _insn(_RET_K, _RET_KILL_PROCESS)]
    for nr in arch["deny"].values():
        prog += [_insn(_JEQ_K, nr, 0, 1), _insn(_RET_K, deny)]
    prog += [_insn(_JEQ_K, arch["clone3"], 0, 1), _insn(_RET_K, _RET_ERRNO | _ENOSYS)]
    prog += [_insn(_JEQ_K, arch["clone"], 0, 5),             # clone: a thread (in no new namespace), or nothing
             _insn(_LD_W_ABS, _arg_lo(0)),
             _insn(_JSET_K, _CLONE_NEW_NAMESPACES, 2, 0),
             _insn(_JSET_K, _CLONE_THREAD, 0, 1),
             _insn(_RET_K, _RET_ALLOW),
             _insn(_RET_K, deny)]
    for nr in arch["own_pid"].values():                      # signals, scheduling: itself only
        prog += [_insn(_JEQ_K, nr, 0, 5),
                 _insn(_LD_W_ABS, _arg_lo(0)),
                 _insn(_JEQ_K, pid & 0xFFFFFFFF, 2, 0),
                 _insn(_JEQ_K, 0, 1, 0),
                 _insn(_RET_K, deny),
                 _insn(_RET_K, _RET_ALLOW)]
    # prlimit64(pid, resource, new, old): only pid 0 or itself, and only reading (new == NULL)
    prog += [_insn(_JEQ_K, arch["prlimit64"], 0, 9),
             _insn(_LD_W_ABS, _arg_lo(0)),
             _insn(_JEQ_K, pid & 0xFFFFFFFF, 1, 0),
             _insn(_JEQ_K, 0, 0, 5),
             _insn(_LD_W_ABS, _arg_lo(2)),
             _insn(_JEQ_K, 0, 0, 3),
             _insn(_LD_W_ABS, _arg_lo(2) + 4),
             _insn(_JEQ_K, 0, 0, 1),
             _insn(_RET_K, _RET_ALLOW),
             _insn(_RET_K, deny)]
    # prctl(PR_SET_PDEATHSIG, …): the death signal armed before the filter stays
    prog += [_insn(_JEQ_K, arch["prctl"], 0, 4),
             _insn(_LD_W_ABS, _arg_lo(0)),
             _insn(_JEQ_K, _PR_SET_PDEATHSIG, 1, 0),
             _insn(_RET_K, _RET_ALLOW),
             _insn(_RET_K, deny)]
    # fcntl(fd, F_SETLEASE, …): no lease; every other command passes
    prog += [_insn(_JEQ_K, arch["fcntl"], 0, 4),
             _insn(_LD_W_ABS, _arg_lo(1)),
             _insn(_JEQ_K, _F_SETLEASE, 0, 1),
             _insn(_RET_K, deny),
             _insn(_RET_K, _RET_ALLOW)]
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return prog


def _check(prog: list[tuple]) -> None:
    """Every jump lands inside the program (the kernel checks too; this names the fault here)."""
    for i, (code, jt, jf, _k) in enumerate(prog):
        if code & 0x07 == 0x05 and max(i + 1 + jt, i + 1 + jf) >= len(prog):
            raise ValueError(f"BPF jump out of the program at instruction {i}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> str | None:
    """Install the filter in this process (every thread). Returns what it enforces, or None where
    it cannot (not Linux, another architecture, a kernel without seccomp filters)."""
    arch = _ARCHES.get(platform.machine())
    if arch is None or platform.system() != "Linux":
        return None
    prog = program(arch, os.getpid())
    _check(prog)
    raw = b"".join(struct.pack("<HBBI", *insn) for insn in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return None
    rc = libc.syscall(ctypes.c_long(arch["seccomp"]), ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                      ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
    if rc != 0:
        return None
    return ("seccomp: no programs run (execve), no new processes (only threads), no sockets of any "
            "family (socket, connect, bind, send), no io_uring, ptrace, namespaces or mounts, no "
            "signals, priorities, affinities or limits of other processes, no raised limits, no "
            "chmod, chown, xattr or utime changes, no memfd, no personality, no change of the "
            "death signal, and no file lease")
