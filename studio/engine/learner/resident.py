"""What lives on an owner between steps (docs/learner.md "Owners"): a long-lived Dask actor that
holds the owner's shard (in its canonical order), its blocks of the combine tree, the two rules and
its replica of the parameters and state. Nothing but the partial sums and the agreement hash leaves
it during a run; the mean is the one thing that comes in.

One call per step (``advance``): apply the update to the mean of the step just combined (on this
replica), hash the replica, and, when another step follows, compute the contributions at the new
parameters and the owner's complete blocks of the tree for that next step. So a run's step is one
round trip between the driver and its owners. Where the contributions and blocks run (the numpy
path or this worker's device) is the owner's ``OwnerPath`` (owner_device.py), chosen here.

The driver keeps its own replica and checkpoints (docs/learner.md "Faults"): an actor dies with its
worker, so nothing lives only here."""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

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
            return block_sums(c, self.blocks, self.precision)
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

    def replica(self):
        return self.params, self.state

    def pid(self) -> int:
        return os.getpid()

    def path(self) -> str:
        return self.way.describe
