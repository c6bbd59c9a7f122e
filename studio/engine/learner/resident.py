"""What lives on an owner between steps (docs/learner.md "Owners"): a long-lived Dask actor that
holds the owner's shard (in its canonical order), its blocks of the combine tree, the two rules and
its replica of the parameters and state. Nothing but the partial sums and the agreement hash leaves
it during a run; the mean is the one thing that comes in.

One call per step (``advance``): apply the update to the mean of the step just combined (on this
replica), hash the replica, and, when another step follows, compute the contributions at the new
parameters and the owner's complete blocks of the tree for that next step. So a run's step is one
round trip between the driver and its owners. Where the contributions and blocks run (the numpy
path or this worker's device) is the owner's ``OwnerPath`` (owner_device.py), chosen here.

An owner on the driver's host does the same through its mailbox (``advance_boxed``, mailbox.py): the
mean read there, and its replica and sums written there, the driver comparing the replica with its
own instead of a hash of it.

The driver keeps its own replica and checkpoints (docs/learner.md "Faults"): an actor dies with its
worker, so nothing lives only here."""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import mailbox
from .fingerprint import digest
from .owner_device import CPU, OwnerPath

PATH = CPU                    # the numpy path's name in the records (owner_device.OwnerPath.describe)


def replica_hash(params: np.ndarray, state: np.ndarray) -> str:
    """The agreement hash: fingerprint.digest of the two arrays' C-order bytes, read in place."""
    return digest(memoryview(np.ascontiguousarray(params)), memoryview(np.ascontiguousarray(state)))


def apply_update(rule, params: np.ndarray, state: np.ndarray, mean: np.ndarray, rate, inject: int | None = None):
    """The update on one replica; ``inject`` (tests) flips bit 0 of that slot of [params | state]."""
    p, s = rule.apply(params, state, mean, np.float32(rate))
    from .system import ProgramUpdate
    if isinstance(rule, ProgramUpdate):         # views of the call's own frame, which nothing else holds
        p, s = np.ascontiguousarray(p, np.float32), np.ascontiguousarray(s, np.float32)
    else:                                       # another rule's arrays: the replica's own copies
        p, s = np.array(p, np.float32), np.array(s, np.float32)
    if inject is not None:
        flat = np.concatenate([p, s])
        flat.view(np.uint32)[inject] ^= np.uint32(1)
        p, s = flat[:p.size].copy(), flat[p.size:].copy()
    return p, s


class Resident:
    """The actor (``client.submit(Resident, ..., actor=True)``); see the module's docstring."""

    def __init__(self, contribution, update, shard: np.ndarray, blocks, precision: str, rate, params, state,
                 device: str = "cpu"):
        self.contribution, self.update = contribution, update
        self.way = OwnerPath(device, contribution, int(np.shape(params)[0]), int(np.shape(shard)[1]))
        self.shard = np.ascontiguousarray(shard, np.float32)
        self.blocks, self.precision, self.rate = list(blocks), precision, np.float32(rate)
        self.params = np.array(params, np.float32)
        self.state = np.array(state, np.float32)
        self._contribs = None                    # the numpy path's (rows, k) contributions, reused every step
        self.box = None                          # the driver's mailbox, where this owner shares its host (mailbox.py)

    def sums(self) -> list[np.ndarray]:
        """This owner's complete blocks of the tree at the current parameters."""
        if not self.blocks:
            return []
        from .system import ProgramContribution
        if self.way.device is None and isinstance(self.contribution, ProgramContribution):  # numpy, one buffer
            from .combine import block_sums
            n, k = self.shard.shape[0], int(np.shape(self.params)[0])
            if self._contribs is None or self._contribs.shape != (n, k):
                self._contribs = np.empty((n, k), np.float32)
            c = self.contribution.contributions(self.params, self.shard, out=self._contribs)
            return block_sums(c, self.blocks, self.precision, overwrite=True)    # the buffer is this step's
        return self.way.block_sums(self.contribution, self.params, self.shard, self.blocks, self.precision)

    def advance(self, mean: np.ndarray | None, inject: int | None, more: bool):
        """(hash after the update, the next step's block sums or None, seconds spent here).
        ``mean`` None: no update (the first call after loading: only the sums). The replica is
        hashed on a thread of its own while the sums are computed (sha256 lets go of the GIL;
        neither changes the new parameters and state)."""
        t0 = time.perf_counter()
        h = None
        if mean is not None:
            self.params, self.state = apply_update(self.update, self.params, self.state, mean, self.rate, inject)
            if more:                                # this call's own thread, joined before it returns
                with ThreadPoolExecutor(1, thread_name_prefix="replica-hash") as hashing:
                    pending = hashing.submit(replica_hash, self.params, self.state)
                    sums = self.sums()
                    return pending.result(), sums, time.perf_counter() - t0
            h = replica_hash(self.params, self.state)
        return h, (self.sums() if more else None), time.perf_counter() - t0

    def attach(self, address: mailbox.Address) -> bool:
        """Open the driver's mailbox; False where it is not on this host (values then go by value).
        The replica and the rate go into the box's frame; an update program's owner keeps its
        replica there from now on (views of the box: the update runs in place on it)."""
        box = mailbox.attach(address)
        if box is None or box.params.size != self.params.size or box.state.size != self.state.size:
            return False
        box.params[...], box.state[...], box.rate[...] = self.params, self.state, self.rate
        from .system import ProgramUpdate
        if isinstance(self.update, ProgramUpdate):
            self.params, self.state = box.params, box.state
        self.box = box
        return True

    def advance_boxed(self, fresh: bool, inject: int | None, more: bool):
        """``advance`` through the mailbox: the update to the mean there (``fresh`` False: none, as
        a None mean) with the replica left there for the driver to compare (no hash here), and
        (``more``) the next step's block sums written there: (None, whether sums were written, seconds).
        An update program runs in place on the box's frame; another rule's replica is copied in."""
        t0 = time.perf_counter()
        box = self.box
        if fresh and self.params is box.params:
            self.update.apply_frame(box.frame)
            if inject is not None:                  # tests: bit 0 of that slot of [params | state] flipped
                box.frame[0, :box.params.size + box.state.size].view(np.uint32)[inject] ^= np.uint32(1)
        elif fresh:
            self.params, self.state = apply_update(self.update, self.params, self.state, box.mean, self.rate, inject)
            box.params[...], box.state[...] = self.params, self.state
        if not more:
            return None, False, time.perf_counter() - t0
        for row, s in zip(self.box.sums, self.sums()):
            row[...] = s
        return None, True, time.perf_counter() - t0

    def replica(self):
        return self.params, self.state

    def pid(self) -> int:
        return os.getpid()

    def path(self) -> str:
        return self.way.describe
