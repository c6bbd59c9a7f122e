"""What the running kernel gives a reference host, asked of the kernel without starting one (for
the GPU profile and `scellis profile`; docs/security.md lists what each layer stops)."""
from __future__ import annotations


def seccomp_reported() -> bool:
    """Whether this kernel has seccomp: /proc/self/status has a ``Seccomp:`` line (Linux; no
    library reads it)."""
    try:
        with open("/proc/self/status") as f:
            return any(line.startswith("Seccomp:") for line in f)
    except OSError:
        return False


def confinement() -> dict:
    """What the kernel here gives a reference host (asked of the kernel, no host started), for the
    profile and `scellis profile`: the Landlock ABI (0: none), whether seccomp filters exist, and
    in words what is missing and so not enforced."""
    import platform
    out = {"platform": f"{platform.system()} {platform.release()} {platform.machine()}", "landlock_abi": 0,
           "seccomp": False, "missing": []}
    if platform.system() == "Linux":
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            if platform.machine() in ("x86_64", "aarch64"):
                abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
                out["landlock_abi"] = max(0, int(abi))
        except (OSError, AttributeError):
            pass
        out["seccomp"] = seccomp_reported() and platform.machine() in ("x86_64", "aarch64")
    if not out["landlock_abi"]:
        out["missing"].append("Landlock: a reference host can read any file this user can read (the seal key "
                              "included) and writes are guarded by the audit hook only")
    if not out["seccomp"]:
        out["missing"].append("seccomp: a reference host's system calls are not filtered (programs, sockets, "
                              "other processes' limits and metadata changes are guarded by the audit hook only)")
    out["summary"] = ("reference hosts: " + (f"Landlock ABI {out['landlock_abi']}" if out["landlock_abi"] else
                                             "no Landlock") + ", " + ("seccomp filter" if out["seccomp"] else
                                                                      "no seccomp") +
                      ("; NOT enforced here: " + "; ".join(out["missing"]) if out["missing"] else ""))
    return out
