"""Owners as processes on Dask distributed (docs/learner.md "Owners"): each owner is one Dask worker
process holding its shard of the samples and a replica of the parameters and state. One step:

1. every owner computes its samples' contributions and the combine nodes it holds entirely;
2. the remaining nodes are explicit Dask tasks, submitted in the tree's own shape (combine.plan),
   their keys naming the node; the mean is one more task;
3. every owner applies the same update program to the mean, on its own replica;
4. every owner hashes its parameters and state; the driver compares the hashes, and a disagreement
   stops the run naming the owners and the first differing slot.

The driver keeps its own copy of the agreed parameters and state after every step (and the
checkpoints keep them on disk): Dask data dies with its worker, so nothing lives only there."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import StudioError
from . import combine
from .fingerprint import digest
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
        super().__init__(f"after step {step} owner {owners[0]} and owner {owners[1]} disagree: first differing slot "
                         f"{slot} ({where}): {values[0]!r} vs {values[1]!r}",
                         hint="every owner must apply the same update to the same mean; the run stopped here")
        self.step, self.owners, self.slot, self.values = step, owners, slot, values


# ------------------------------------------------------------------ what runs on an owner
def contribute(rule, shard: np.ndarray, replica, blocks, precision: str = "f32") -> list[np.ndarray]:
    params, _ = replica
    return combine.block_sums(rule.contributions(params, shard), blocks, precision)


def pick(sums: list[np.ndarray], j: int) -> np.ndarray:
    return sums[j]


def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.add(x, y, dtype=np.float32)


def divide(numerator: np.ndarray, n: int) -> np.ndarray:
    return combine.mean(numerator, n)


def update(rule, replica, mean: np.ndarray, rate, inject=None):
    params, state = rule.apply(replica[0], replica[1], mean, np.float32(rate))
    params, state = np.array(params, np.float32), np.array(state, np.float32)
    if inject is not None:                                   # fault injection (tests): flip one bit here
        flat = np.concatenate([params, state])
        bits = flat.view(np.uint32)
        bits[inject] ^= np.uint32(1)
        params, state = flat[:params.size].copy(), flat[params.size:].copy()
    return params, state


def replica_hash(replica) -> str:
    return digest(np.ascontiguousarray(replica[0]).tobytes(), np.ascontiguousarray(replica[1]).tobytes())


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
    tasks: list[str] = field(default_factory=list)


class Owners:
    """``len(addresses)`` owners on the Dask workers at ``addresses`` (one owner per worker)."""

    def __init__(self, client, addresses: list[str]):
        self.client, self.addresses = client, list(addresses)
        self._shards, self._replicas, self._rules = [], [], {}
        self._ids = self._identities()

    @classmethod
    def on(cls, client, n: int) -> Owners:
        """The first ``n`` workers of the client's cluster (by address)."""
        workers = sorted(workers_now(client))
        if len(workers) < n:
            raise StudioError(f"{n} owners asked for, the cluster has {len(workers)} worker{'s' * (len(workers) != 1)}",
                              field="--owners", hint="start more workers, or ask for fewer owners")
        return cls(client, workers[:n])

    def pids(self) -> list[int]:
        got = self.client.run(process_id, workers=self.addresses)
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

    def load(self, system: System, params: np.ndarray, state: np.ndarray) -> None:
        """Give every owner its shard (in its canonical order), the rules and the replica."""
        if len(system.owners) != len(self.addresses):
            raise StudioError(f"the system has {len(system.owners)} owners, {len(self.addresses)} workers were given",
                              field="owners")
        self.system = system
        self.root, self.blocks = combine.plan(system)
        sc = self.client.scatter
        self._shards, self._replicas, self._rules = [], [], {}
        for o, a in enumerate(self.addresses):
            shard = np.ascontiguousarray(system.samples[combine.owner_order(system, o)])
            self._shards.append(sc(shard, workers=[a], hash=False))
            self._replicas.append(sc((params.copy(), state.copy()), workers=[a], hash=False))
            self._rules[a] = (sc(system.contribution, workers=[a], hash=False),
                              sc(system.update, workers=[a], hash=False))

    def _wait(self, futures, step: int) -> None:
        from distributed import wait
        while True:
            try:
                wait(futures, timeout=WAIT_S)
            except TimeoutError:
                pass
            except Exception:                                # cancelled: lost dependencies (a dead owner)
                for _ in range(40):
                    time.sleep(WAIT_S)
                    self._check(step, futures)
                raise
            self._check(step, futures)
            if all(f.done() for f in futures):
                bad = [f for f in futures if f.status != "finished"]
                if bad:
                    time.sleep(WAIT_S)                        # a dying worker: let the scheduler see it
                    self._check(step, futures)
                    bad[0].result()                         # raises the task's own error
                return

    def _check(self, step: int, futures=()) -> None:
        gone = self.gone()
        if gone:
            for f in futures:
                f.cancel()
            raise OwnerLost(gone, [self.addresses[o] for o in gone], step)

    def step(self, step: int, inject: dict | None = None) -> StepOutcome:
        """One update on every owner; returns the agreed parameters and state (or raises
        Disagreement / OwnerLost)."""
        t0 = time.perf_counter()
        sysm, c = self.system, self.client
        n = int(sysm.samples.shape[0])
        sums, values = [], {}
        for o, a in enumerate(self.addresses):
            rule = self._rules[a][0]
            f = c.submit(contribute, rule, self._shards[o], self._replicas[o], self.blocks[o], sysm.precision,
                         workers=[a], allow_other_workers=False, key=f"learner-{step}-contribute-owner{o}-{os.urandom(4).hex()}")
            sums.append(f)
            for j, b in enumerate(self.blocks[o]):
                values[b] = c.submit(pick, f, j, workers=[a], allow_other_workers=False,
                                     key=f"learner-{step}-node-{b.lo}+{b.n}-owner{o}-{os.urandom(4).hex()}")
        keys = []

        def add_task(x, y):
            fut = c.submit(add, x, y, workers=self.addresses, key=f"learner-{step}-add-{len(keys)}-{os.urandom(4).hex()}")
            keys.append(fut.key)
            return fut

        root = combine.evaluate_plan(self.root, values, add_task)
        mean = c.submit(divide, root, n, workers=self.addresses, key=f"learner-{step}-mean-{os.urandom(4).hex()}")
        new, hashes = [], []
        for o, a in enumerate(self.addresses):
            inj = inject.get("slot") if inject and inject.get("owner") == o and inject.get("step") == step else None
            r = c.submit(update, self._rules[a][1], self._replicas[o], mean, float(sysm.rate), inj, workers=[a],
                         allow_other_workers=False, key=f"learner-{step}-update-owner{o}-{os.urandom(4).hex()}")
            new.append(r)
            hashes.append(c.submit(replica_hash, r, workers=[a], allow_other_workers=False,
                                   key=f"learner-{step}-hash-owner{o}-{os.urandom(4).hex()}"))
        self._wait([*hashes, mean], step)
        try:
            *got, (params, state), mu = c.gather([*hashes, new[0], mean])      # one round trip
            self._replicas = new
            if len(set(got)) > 1:
                self._disagree(step, got)
        except StudioError:
            raise
        except Exception:                                    # a worker died between the wait and the gather
            time.sleep(WAIT_S)
            self._check(step)
            raise
        return StepOutcome(np.asarray(params, np.float32), np.asarray(state, np.float32),
                           np.asarray(mu, np.float32), got, time.perf_counter() - t0, keys)

    def _disagree(self, step: int, hashes: list[str]):
        reps = self.client.gather(self._replicas)
        ref = max(range(len(hashes)), key=lambda o: (hashes.count(hashes[o]), -o))   # the majority, else owner 0
        base = np.concatenate(reps[ref]).view(np.uint32)
        for o, h in enumerate(hashes):
            if h == hashes[ref]:
                continue
            other = np.concatenate(reps[o]).view(np.uint32)
            slot = int(np.flatnonzero(base != other)[0])
            vals = (float(base.view(np.float32)[slot]), float(other.view(np.float32)[slot]))
            raise Disagreement(step, (ref, o), slot, vals, self.system.k)


def workers_now(client) -> dict[str, dict]:
    return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def start_cluster(n: int, memory_limit: str = "2GiB"):
    """A LocalCluster of ``n`` worker processes, one thread each (the default: nothing to set up)."""
    import dask
    from distributed import Client, LocalCluster
    with dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.allowed-failures": 0}):
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
