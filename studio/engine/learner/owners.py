"""Owners on Dask distributed (docs/learner.md "Owners"): each owner is a long-lived actor
(resident.Resident) on a Dask worker, holding its shard of the samples, its blocks of the combine
tree and its replica of the parameters and state between steps. One step is one round trip:

1. the driver adds the owners' block sums (returned by the previous call) in the tree's own shape
   (combine.plan: the same additions of the same operands as anywhere else) and divides by N;
2. the mean goes to every owner, which applies the update program to its own replica, hashes it
   and computes its samples' contributions and complete blocks for the next step;
3. the driver applies the same update to its own replica meanwhile, and compares every owner's
   hash with the others and with its own: a disagreement stops the run naming the owners and the
   first differing slot.

The driver's replica is the agreed parameters and state after every step (the checkpoints keep
them on disk): an actor dies with its worker, so nothing lives only there.

An owner on the driver's host gets the mean and gives its sums and replica through a mailbox (mailbox.py: a
shared mapping, the call itself still on Dask); any other owner gets and gives them by value."""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import StudioError
from . import combine, mailbox
from .resident import Resident, apply_update, replica_hash
from .system import System

WAIT_S = 0.25                    # how often a waiting driver looks for owners that died


class OwnerLost(StudioError):
    """An owner's worker went away mid-step; ``lost``: the owners (indices) that did."""

    def __init__(self, lost: list[int], addresses: list[str], step: int):
        super().__init__(f"owner{'s' if len(lost) > 1 else ''} {', '.join(map(str, lost))} "
                         f"({', '.join(addresses)}) went away during step {step}",
                         hint="the run resumes from its last checkpoint on the remaining owners")
        self.lost, self.addresses, self.step = lost, addresses, step


class Disagreement(StudioError):
    """Owners' parameters and state differ after an update: the run stops."""

    def __init__(self, step: int, owners: tuple[int, int], slot: int, values: tuple[float, float], k: int):
        where = f"parameter {slot}" if slot < k else f"state word {slot - k}"
        a, b = (f"owner {o}" if o >= 0 else "the driver's replica" for o in owners)
        super().__init__(f"after step {step} {a} and {b} disagree: first differing slot "
                         f"{slot} ({where}): {values[0]!r} vs {values[1]!r}",
                         hint="every owner must apply the same update to the same mean; the run stopped here")
        self.step, self.owners, self.slot, self.values = step, owners, slot, values


# ------------------------------------------------------------------ on the workers
def process_id() -> int:
    return os.getpid()


def server_ids(dask_scheduler=None) -> dict[str, str]:
    """On the scheduler: each worker's address and server id."""
    return {a: ws.server_id for a, ws in dask_scheduler.workers.items()}


# ------------------------------------------------------------------ the driver's side
@dataclass
class StepOutcome:
    params: np.ndarray
    state: np.ndarray
    mean: np.ndarray
    hashes: list[str]
    seconds: float
    paths: list[str] = field(default_factory=list)      # per owner: the path its contributions ran on
    owner_s: float = 0.0                                 # the slowest owner's own compute in this step's call
    driver_s: float = 0.0                                # the driver's tree, mean, update and hash
    send_s: float = 0.0                                  # ... of which before the calls went out (tree, mean)


class Owners:
    """One owner per entry of ``addresses`` (a Dask worker address; several owners may share a
    worker: each is an actor of its own there)."""

    def __init__(self, client, addresses: list[str], share_memory: bool = True):
        self.client, self.addresses = client, list(addresses)
        self.share_memory = share_memory           # False: every owner by value, even on this host
        self._actors, self._sums, self._boxes = [], None, []
        self._ids = self._identities()

    @classmethod
    def on(cls, client, n: int, share_memory: bool = True) -> Owners:
        """``n`` owners on the client's workers, by address: owner o on worker o mod W, so more
        owners than workers share workers (each owner is its own actor; a worker runs its actors'
        calls one at a time)."""
        workers = sorted(workers_now(client))
        if not workers:
            raise StudioError(f"{n} owners asked for, the cluster has no workers", field="--owners",
                              hint="start workers (dask worker ADDRESS), or run without --scheduler")
        return cls(client, [workers[o % len(workers)] for o in range(n)], share_memory)

    def pids(self) -> list[int]:
        got = self.client.run(process_id, workers=sorted(set(self.addresses)))
        return [got[a] for a in self.addresses]

    def _identities(self) -> dict[str, str]:
        """Worker address -> the server id of the worker process there (unique per process), asked
        of the scheduler now (not the client's cached scheduler_info, which a background refresh
        may leave without workers)."""
        return self.client.run_on_scheduler(server_ids)

    def gone(self) -> list[int]:
        """The owners whose worker process is no longer the one that was given their data (gone, or
        restarted by its nanny, even at the same address)."""
        now = self._identities()
        return [o for o, a in enumerate(self.addresses) if now.get(a) != self._ids.get(a)]

    def load(self, system: System, params: np.ndarray, state: np.ndarray, device: str = "cpu") -> None:
        """Start every owner's actor on its worker with its shard (in its canonical order), its
        blocks, the rules and the replica; then the first round trip: the sums at ``params``.
        ``device``: where the owners compute (owner_device.MODES; each owner resolves it on its worker)."""
        if len(system.owners) != len(self.addresses):
            raise StudioError(f"the system has {len(system.owners)} owners, {len(self.addresses)} workers were given",
                              field="owners")
        self.system = system
        self.root, self.blocks = combine.plan(system)
        self.params, self.state = np.array(params, np.float32), np.array(state, np.float32)
        c, tag = self.client, os.urandom(4).hex()
        futures, self._shards = [], []                          # the shards held until their actors exist
        for o, a in enumerate(self.addresses):
            shard = c.scatter(np.ascontiguousarray(system.samples[combine.owner_order(system, o)]), workers=[a],
                              hash=False)
            futures.append(c.submit(Resident, system.contribution, system.update, shard, self.blocks[o],
                                    system.precision, system.rate, self.params, self.state, device, workers=[a],
                                    allow_other_workers=False, actor=True, key=f"learner-owner{o}-{tag}"))
            self._shards.append(shard)
        self._holders = futures
        self._actors = self._wait(futures, 0, "starting the owners")
        self._shards = []
        self.paths = self._wait([a.path() for a in self._actors], 0)
        self._boxes = self._open_boxes(system.k, self.state.size) if self.share_memory else [None] * len(self._actors)
        self._sums = self._take(self._wait([self._call(o, None, None, True) for o in range(len(self._actors))], 1))

    def _open_boxes(self, k: int, state: int) -> list:
        """A mailbox for every owner that can open one (on this host), else None (by value)."""
        made = [mailbox.make(k, len(self.blocks[o]), state) for o in range(len(self._actors))]
        if not any(made):
            return made
        try:
            opened = self._wait([a.attach(m[0]) for a, m in zip(self._actors, made) if m is not None], 0)
        finally:
            for m in made:
                if m is not None:
                    mailbox.unlink(m[0])                    # both mappings stay; the name goes now
        got = iter(opened)
        return [m[1] if m is not None and next(got) else None for m in made]

    @property
    def boxed(self) -> list[bool]:
        """Per owner: whether its mean, sums and replica go through a mailbox (else by value)."""
        return [b is not None for b in self._boxes]

    def _call(self, o: int, mu, inj, more: bool):
        """Owner o's call for one step: the mean in its mailbox (where it has one) or by value."""
        box = self._boxes[o]
        if box is None:
            return self._actors[o].advance(mu, inj, more)
        if mu is not None:
            box.mean[...] = mu
        return self._actors[o].advance_boxed(mu is not None, inj, more)

    def _take(self, got: list) -> list:
        """The owners' block sums from their answers: by value, or read from the mailbox (views,
        read before the next call writes it again)."""
        return [s if box is None else list(box.sums) if s else None for box, (_, s, _) in zip(self._boxes, got)]

    def _wait(self, futures, step: int, what: str = "an owner's call") -> list:
        """Every future's result (Dask futures, or actor calls, awaited together in one trip through
        the client's event loop), looking every WAIT_S for owners that went away. Nothing is
        cancelled by the wait itself: concurrent gathers share one request inside the client, so
        cancelling one waiter would cancel the others' results too."""
        tasks = self.client.sync(_watch, list(futures))         # one waiter per future, never cancelled
        while not self.client.sync(_settle, tasks):
            self._check(step)
        got = [t.result() for t in tasks]
        bad = [v for ok, v in got if not ok]
        if bad:                                                 # a dead worker: lost, cancelled, unreachable
            for _ in range(40):
                time.sleep(WAIT_S)
                self._check(step)
            if isinstance(bad[0], Exception):
                raise bad[0]
            raise RuntimeError(f"{what} ended with {type(bad[0]).__name__}: {bad[0]!r}")
        return [v for _, v in got]

    def _check(self, step: int) -> None:
        gone = self.gone()
        if gone:
            raise OwnerLost(gone, [self.addresses[o] for o in gone], step)

    def step(self, step: int, inject: dict | None = None, more: bool = True) -> StepOutcome:
        """One update, one round trip: the tree's remaining nodes and the mean here (from the sums
        the owners returned last time), the mean to every owner, which applies the update to its
        replica, hashes it (or, with a mailbox, puts it there for the driver to compare) and
        (``more``) computes its blocks for the next step; the driver applies the same update to its
        own replica meanwhile. Returns the agreed parameters and state (or raises Disagreement /
        OwnerLost)."""
        t0 = time.perf_counter()
        sysm = self.system
        values = {}
        for o, sums in enumerate(self._sums):
            values.update(zip(self.blocks[o], sums))
        mu = combine.mean(combine.evaluate_plan(self.root, values), int(sysm.samples.shape[0]))
        calls, sent = [], time.perf_counter()
        for o in range(len(self._actors)):
            inj = inject.get("slot") if inject and inject.get("owner") == o and inject.get("step") == step else None
            try:
                calls.append(self._call(o, mu, inj, more))
            except RuntimeError:                                # "Worker holding Actor was lost"
                time.sleep(WAIT_S)
                self._check(step)
                raise
        self.client.sync(asyncio.sleep, 0)      # the calls out on the client's loop before the driver's own
        # update holds the GIL (its interpreter is Python between numpy calls): the mean's trip to the owner
        # measured 1.9-2.0 ms with this against 2.5-2.9 ms without (docs/learner.md "A pairwise sum")
        params, state = apply_update(sysm.update, self.params, self.state, mu, sysm.rate)   # the driver's replica
        mine = replica_hash(params, state)
        t1 = time.perf_counter()
        got = self._wait(calls, step)
        hashes = [h if box is None else mine if box.same_replica(params, state) else replica_hash(box.params, box.state)
                  for box, (h, _, _) in zip(self._boxes, got)]      # a boxed owner's replica: compared bit for bit
        if len(set(hashes)) > 1:
            self._disagree(step, hashes)
        if hashes and hashes[0] != mine:
            self._disagree(step, hashes, (params, state))
        self.params, self.state = params, state
        self._sums = self._take(got)
        return StepOutcome(params, state, mu, hashes, time.perf_counter() - t0, list(self.paths),
                           max((x for _, _, x in got), default=0.0), t1 - t0, sent - t0)

    def _disagree(self, step: int, hashes: list[str], driver=None):
        reps = self._wait([a.replica() for a in self._actors], step)
        ref = max(range(len(hashes)), key=lambda o: (hashes.count(hashes[o]), -o))   # the majority, else owner 0
        base = np.concatenate(reps[ref]).view(np.uint32)
        others = [(o, reps[o]) for o, h in enumerate(hashes) if h != hashes[ref]] if driver is None else [(-1, driver)]
        for o, rep in others:
            other = np.concatenate(rep).view(np.uint32)
            slot = int(np.flatnonzero(base != other)[0])
            vals = (float(base.view(np.float32)[slot]), float(other.view(np.float32)[slot]))
            raise Disagreement(step, (ref, o), slot, vals, self.system.k)


async def _watch(futures) -> list:
    """On the client's loop: one task per future, ending with (ok, result or exception)."""
    async def one(f):
        try:
            return True, await f
        except BaseException as e:                              # noqa: BLE001 (asyncio.CancelledError too)
            return False, e
    return [asyncio.ensure_future(one(f)) for f in futures]


async def _settle(tasks) -> bool:
    """On the client's loop: whether every one of ``tasks`` ended within WAIT_S (none is cancelled)."""
    await asyncio.wait(tasks, timeout=WAIT_S)
    return all(t.done() for t in tasks)


def workers_now(client) -> dict[str, dict]:
    return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def start_cluster(n: int, memory_limit: str = "2GiB"):
    """A LocalCluster of ``n`` worker processes, one thread each (the default: nothing to set up).
    Its workers keep glibc's own malloc thresholds: Dask's default MALLOC_TRIM_THRESHOLD_ (set in
    a worker's environment before it starts, to hand freed memory back sooner) also fixes the mmap
    threshold at 128 KiB, so every step's large temporaries would be fresh pages, faulted in again
    each step (an owner's step measured 3-7 times the same work in the driver; docs/learner.md
    "A pairwise sum"). The other variables Dask sets there are kept."""
    import dask
    from distributed import Client, LocalCluster
    environ = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", None) or {}).items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    # and without Dask's statistical profiler, which samples every thread's stack each 10 ms inside the
    # owner's process (the dashboard's profile; nothing here reads it): an owner's call measured 23-35 ms
    # without it against 30-35 ms with it, the step's minimum 35-36 against 42-45 ms (docs/learner.md)
    with dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.allowed-failures": 0,
                          "distributed.worker.profile.enabled": False,
                          "distributed.nanny.pre-spawn-environ": environ}):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                               dashboard_address=":0", silence_logs=50)   # its HTTP server on a free port
    return cluster, Client(cluster)


def connect(address: str):
    """A client of an existing cluster (``--scheduler tcp://HOST:PORT``)."""
    from distributed import Client
    try:
        return Client(address, timeout=5)
    except (OSError, TimeoutError) as e:
        raise StudioError(f"cannot reach the Dask scheduler at {address}: {e}", field="--scheduler",
                          hint="start one with `dask scheduler` and workers with `dask worker ADDRESS`") from None
