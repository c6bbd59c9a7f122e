"""The reference host's private namespaces (Linux): no network, and a temporary folder of bounded size.

The confined host (studio/engine/trust/host.py) loads this file by its path and calls
``enter()`` while it is still single-threaded, before Landlock and the system-call filter. Like
the host, it imports only the standard library.

- A private user and network namespace: no network interface but an unconfigured loopback.
- A private mount namespace, and in it a ``tmpfs`` mounted over the host's temporary folder (its
  cwd, ``HOME`` and ``TMPDIR``), capped at ``size`` bytes and ``files`` inodes in total: a write
  past the cap fails with ``ENOSPC`` in the host, whatever API makes it. The mount exists only in
  the host's namespace: the engine sees the empty folder beneath it, and the files go with the host.
  tmpfs pages are memory (not counted by the address-space limit), so the cap is small. The mount
  hides whatever lay in the folder before it: the engine sends the package's files over the channel
  once the host is up (host._snapshot), and never writes into the folder itself.

Each step is taken where the kernel allows it (unprivileged user namespaces; some distributions
switch them off): ``enter`` returns what it applied, and the engine keeps the temp quota itself,
by walking the folder, where the tmpfs could not be mounted (studio/engine/trust/watch.py).
"""
from __future__ import annotations

import ctypes
import os

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_MS_NOSUID, _MS_NODEV = 2, 4


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:  # atomic-ok: a /proc control file (uid_map), written once, not data
            f.write(text)
        return True
    except OSError:
        return False


def _mount_tmpfs(libc, tmp: str, size: int, files: int, uid: int, gid: int) -> bool:
    """Map this process's own ``uid`` and ``gid`` (as they were outside) into its new user namespace
    (a tmpfs belongs to that namespace: an unmapped owner could create nothing in it), then mount
    the capped tmpfs over ``tmp`` and step into it."""
    _write("/proc/self/setgroups", "deny")
    if not (_write("/proc/self/uid_map", f"{uid} {uid} 1") and _write("/proc/self/gid_map", f"{gid} {gid} 1")):
        return False
    opts = f"size={int(size)},nr_inodes={int(files)},mode=0700".encode()
    if libc.mount(b"tmpfs", os.fsencode(tmp), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV), opts) != 0:
        return False
    os.chdir(tmp)                   # the cwd was the folder beneath the mount
    return True


def enter(libc, tmp: str, temp_bytes: int, temp_files: int, *, mount: bool = True) -> tuple[list[str], bool]:
    """Enter private namespaces and mount the capped temporary folder (``mount=False``: not, for
    the tests of the engine's own quota). Returns (what was enforced, in words; whether the tmpfs
    is mounted)."""
    enforced, mounted = [], False
    uid, gid = os.geteuid(), os.getegid()          # read before: unmapped, both read 65534 inside
    if mount and libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET) == 0:
        enforced.append("no network: a private, empty network namespace")
        mounted = _mount_tmpfs(libc, tmp, temp_bytes, temp_files, uid, gid)
    elif libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
        enforced.append("no network: a private, empty network namespace")
    if mounted:
        enforced.append(f"temporary folder: a private tmpfs of {int(temp_bytes) >> 20} MiB and {int(temp_files)} "
                        f"files in total (ENOSPC past them)")
    return enforced, mounted
