"""A same-host owner's mailbox (docs/learner.md "Owners"): the mean in and the owner's block sums
out, and the owner's replica after its update, through one shared mapping, instead of the mean and
the sums pickled onto Dask's wire and back and the replica hashed on the owner. The call that says
"the mean is in the box" and its answer still go through Dask, so the order of the writes is the
call's order: the driver writes the mean before the call, the owner its replica and sums before it
returns, and the driver reads them only after. The driver compares the owner's replica with its own
bit for bit (an exact check, where the hash is a digest of one): where they are the same bits the
owner's hash is the driver's, where not the driver hashes the owner's bytes, and the run stops as
on any disagreement.

The driver makes the box: a file in ``/dev/shm`` (memory, not disk), its whole size reserved up
front (``posix_fallocate``: a full tmpfs is an error here, never a bus error mid-run), a random
key written at its start. The owner opens it by name and checks the key: a worker on another
host (or in another container) finds no file or a different key, and that owner's values travel
by value as before. Once the owner holds its mapping the driver unlinks the name, so nothing is
left behind when either process ends, however it ends.

What goes through the box is the same bits as what went over the wire: the mean is copied in, the
sums copied out (a few memcpys, against pickling and two socket copies each way, and a sha256 of
the replica on the owner). The box holds the update program's own frame, so an owner whose update
is a program keeps its replica there and runs the update in place on it (no frame to fill, no
replica to copy out)."""
from __future__ import annotations

import mmap
import os
import secrets
import tempfile
from dataclasses import dataclass

import numpy as np

KEY = 16                                  # bytes of the random key at the start of a box
ROOT = "/dev/shm"                         # where a box is made (a memory file system), where there is one
MARGIN = 64 << 20                         # free bytes left in ROOT after a box, or no box is made
BOX_MAX = 1 << 30                         # a larger box (many blocks of a long k) is not made: by value


@dataclass(frozen=True)
class Address:
    """What the owner is told: the box's path, its key and its arrays' sizes (f32 values): k
    parameters (the mean and each block sum as many), ``blocks`` block sums, ``state`` state words."""
    path: str
    key: bytes
    k: int
    blocks: int
    state: int


class Box:
    """A mapping of a box, its arrays views of the map: the update's frame ``frame`` (1, 2k + m + 1),
    ``[params k | state m | mean k | rate]`` (system.ProgramUpdate's layout: the owner's replica
    ``params`` and ``state``, the driver's ``mean``, the ``rate``), then the block ``sums`` (blocks x k)."""

    def __init__(self, fd: int, size: int, k: int, blocks: int, state: int):
        self.map = mmap.mmap(fd, size)
        words = np.frombuffer(self.map, np.float32, offset=KEY, count=(size - KEY) // 4)
        width = 2 * k + state + 1
        self.frame = words[:width].reshape(1, width)
        self.params, self.state, self.mean = words[:k], words[k:k + state], words[k + state:2 * k + state]
        self.rate = words[2 * k + state:width]
        self.sums = words[width:].reshape(blocks, k)

    def same_replica(self, params: np.ndarray, state: np.ndarray) -> bool:
        """Whether the owner's replica here is ``params`` and ``state`` bit for bit (NaNs by their bits)."""
        return (np.array_equal(self.params.view(np.uint32), np.asarray(params, np.float32).view(np.uint32))
                and np.array_equal(self.state.view(np.uint32), np.asarray(state, np.float32).view(np.uint32)))


def _size(k: int, blocks: int, state: int) -> int:
    return KEY + 4 * (k * (2 + blocks) + state + 1)


def make(k: int, blocks: int, state: int, root: str = ROOT) -> tuple[Address, Box] | None:
    """A new box for an owner with ``blocks`` blocks of k values and a state of ``state`` words, or
    None where this host has no memory file system with room for it (the owner then goes by value)."""
    size = _size(k, blocks, state)
    if size > BOX_MAX or not (hasattr(os, "statvfs") and hasattr(os, "posix_fallocate")):   # too large, or
        return None                                                                          # not POSIX
    try:
        free = os.statvfs(root)
        if free.f_bavail * free.f_frsize < size + MARGIN:
            return None
        fd, path = tempfile.mkstemp(prefix="scellis-owner-", dir=root)
    except OSError:
        return None
    try:
        os.posix_fallocate(fd, 0, size)       # every page reserved now: ENOSPC here, not SIGBUS later
        key = secrets.token_bytes(KEY)
        os.pwrite(fd, key, 0)
        box = Box(fd, size, k, blocks, state)
    except (OSError, ValueError):             # no room (ENOSPC), or no mapping to be had
        os.unlink(path)
        return None
    finally:
        os.close(fd)
    return Address(path, key, k, blocks, state), box


def unlink(address: Address) -> None:
    """The box's name gone (both mappings stay valid): called once its owner has opened it."""
    try:
        os.unlink(address.path)
    except FileNotFoundError:
        pass


def attach(address: Address) -> Box | None:
    """On the owner: the box at ``address`` if it is there with its key and size, else None."""
    try:
        fd = os.open(address.path, os.O_RDWR)   # atomic-ok: a shared mapping the driver made, not a file
    except OSError:
        return None
    try:
        size = _size(address.k, address.blocks, address.state)
        if os.fstat(fd).st_size != size or os.pread(fd, KEY, 0) != address.key:
            return None
        return Box(fd, size, address.k, address.blocks, address.state)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
