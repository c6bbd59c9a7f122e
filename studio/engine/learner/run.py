"""The learner's step loop (docs/learner.md): owners on Dask, a checkpoint after every step (or every
``checkpoint_every``), the agreement check after every step, and survival of a dying owner: the run
goes back to its last checkpoint, reshards the lost owners' samples over the remaining owners and
goes on. With the canonical tree the result is the same bits as a run where nothing died."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import StudioError
from . import checkpoint as ckpt
from . import combine
from .fingerprint import array_hash, digest
from .owners import OwnerLost, Owners, connect, start_cluster, workers_now
from .owner_device import check_mode
from .system import System


@dataclass
class StepRecord:
    step: int
    metric: float                    # |mean contribution| (L2, computed in f64 from the f32 mean)
    agreed: bool
    hashes: list[str]                # per owner: its parameter-and-state hash after the update
    owners: list[str]                # worker addresses, owner order
    shares: list[int]
    seconds: float
    paths: list[str] = field(default_factory=list)     # per owner: where its contributions ran ("cpu (numpy)")
    split: dict = field(default_factory=dict)          # seconds: "owners" (slowest owner's call), "driver"
                                                       # (its part; all but "before_calls" overlaps the owners)


@dataclass
class LearnResult:
    params: np.ndarray
    state: np.ndarray
    step: int
    system: System                   # as it ended (resharded if an owner died)
    records: list[StepRecord] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    metrics: list[float] = field(default_factory=list)

    @property
    def params_hash(self) -> str:
        return array_hash(self.params)

    @property
    def replica_hash(self) -> str:
        return digest(self.params.tobytes(), self.state.tobytes())

    @property
    def contract_hash(self) -> str:
        return combine.contract_hash(self.system)


def reshard(system: System, lost: list[int]) -> System:
    """The survivors keep their samples; each lost owner's samples (ascending) are dealt out to the
    survivors in contiguous pieces as equal as possible, in owner order. Nothing lost, nothing twice."""
    keep = [o for o in range(len(system.owners)) if o not in set(lost)]
    if not keep:
        raise StudioError("every owner went away", hint="start the run again (--resume continues from the checkpoint)")
    owners = [list(system.owners[o]) for o in keep]
    orphans = np.sort(np.concatenate([system.owners[o] for o in lost])) if lost else np.zeros(0, np.int64)
    for i, piece in enumerate(np.array_split(orphans, len(keep))):
        owners[i].extend(int(x) for x in piece)
    return system.with_owners([np.asarray(o, np.int64) for o in owners])


def learn(system: System, *, client=None, owners: int | None = None, scheduler: str | None = None,
          checkpoint: str | Path | None = None, resume: bool = False, steps: int | None = None,
          checkpoint_every: int = 1, on_step=None, on_event=None, inject: dict | None = None,
          max_faults: int = 3, stop=None, readmit: bool = True, owner_device: str = "cpu",
          share_memory: bool = True) -> LearnResult:
    """Run ``steps`` (the total to reach; default the system's) updates. ``client``: a Dask client
    to use (its first workers become the owners); else ``scheduler`` (an address); else a
    LocalCluster started here and closed at the end. ``owners``: that many owners in contiguous
    even shares (default: the system's own owners). ``inject``: {"owner", "step", "slot"} flips one
    bit of that owner's update (to see the agreement check stop the run). ``stop``: a
    threading.Event; once set, the run ends after the step in flight (checkpointed). ``readmit``:
    after a fault, at the next checkpoint boundary where the cluster has more live workers than
    the run uses (a restarted or a joined worker), go back to the run's owners and partition.
    ``owner_device``: where each owner computes its contributions and blocks, ``cpu`` (numpy),
    ``gpu`` (its worker's device, refused where none) or ``auto`` (the device where one opens, else
    numpy); every record's ``paths`` says which ran (docs/learner.md "Owners on a device").
    ``share_memory``: owners on this host get the mean and give their sums through a mailbox
    (mailbox.py; False: by value, as owners elsewhere do; the same bits either way)."""
    total = int(steps if steps is not None else system.steps)
    check_mode(owner_device)
    events: list[str] = []

    def event(text: str):
        events.append(text)
        if on_event is not None:
            on_event(text)

    run = _start(system, owners, resume, checkpoint, event)
    run.share_memory = share_memory
    original = run.system                                                 # what a re-admission goes back to
    cluster, own_client = None, client is None
    if client is None:
        if scheduler:
            client = connect(scheduler)
        else:
            cluster, client = start_cluster(len(run.system.owners))
    try:
        run.seat(Owners.on(client, len(run.system.owners), run.share_memory), owner_device)
        while run.step < total:
            if stop is not None and stop.is_set():
                _stop(run, checkpoint, event)
                break
            try:
                out = run.team.step(run.step + 1, inject, more=run.step + 1 < total)
            except OwnerLost as e:
                run.faults += 1
                if run.faults > max_faults:
                    raise
                _recover(run, e, client, checkpoint, owner_device, event)
                continue
            rec = _record(run, out)
            if run.step % max(1, checkpoint_every) == 0 or run.step == total:
                _checkpoint(run, checkpoint)
                if readmit and run.step < total and _can_readmit(run, original, client):
                    _readmit(run, original, client, owner_device, event)
            if on_step is not None:
                on_step(rec)
        return LearnResult(run.params, run.state, run.step, run.system, run.records, events, run.metrics)
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()


@dataclass
class _Run:
    """A learner run's state as its step loop changes it."""
    system: System
    params: np.ndarray
    state: np.ndarray
    step: int
    metrics: list[float]
    last: ckpt.Checkpoint | None = None   # the last checkpoint (the driver's own copy)
    team: Owners | None = None
    records: list[StepRecord] = field(default_factory=list)
    faults: int = 0
    share_memory: bool = True             # owners on this host through mailboxes (owners.Owners)

    def seat(self, team: Owners, owner_device: str) -> None:
        """The owners that run from here, loaded with the run's system, parameters and state."""
        self.team = team
        team.load(self.system, self.params, self.state, owner_device)


def _start(system: System, owners: int | None, resume: bool, checkpoint, event) -> _Run:
    """The run's first state: the system (evenly shared over ``owners``), its parameters and state,
    or the checkpoint's under ``resume``."""
    if owners is not None:
        system = system.evenly(owners)
    system.validate()                 # e.g. a dataclasses.replace()d system: bf16 only on the per-owner tree
    params, state, step, metrics = system.params.copy(), system.state.copy(), 0, []
    if resume:
        if checkpoint is None:
            raise StudioError("--resume needs --checkpoint DIR", field="--resume")
        ck = ckpt.load(checkpoint)
        if owners is None and ck.assignment.size == system.samples.shape[0]:
            system = system.with_owners(ck.owners())
        ckpt.check_resumable(ck, system, file=str(Path(checkpoint) / ckpt.FILE))
        params, state, step, metrics = ck.params, ck.state, ck.step, list(ck.metrics)
        event(f"resumed from the checkpoint at step {step}")
    return _Run(system, params, state, step, metrics, last=ckpt.Checkpoint.of(system, step, params, state, metrics))


def _stop(run: _Run, checkpoint, event) -> None:
    """A stop asked: the step reached checkpointed (where it is not yet), and said."""
    if checkpoint is not None and run.last.step != run.step:
        run.last = ckpt.Checkpoint.of(run.system, run.step, run.params, run.state, run.metrics)
        ckpt.save(checkpoint, run.last)
    event(f"stop asked: the run ends after step {run.step}")


def _recover(run: _Run, e: OwnerLost, client, checkpoint, owner_device: str, event) -> None:
    """An owner lost: its samples resharded over the survivors, the run back at its last checkpoint
    (on disk, else the driver's copy), on the surviving owners."""
    survivors = [a for o, a in enumerate(run.team.addresses) if o not in e.lost]
    run.system = reshard(run.system, e.lost)
    src = "checkpoint"
    if checkpoint is not None and (Path(checkpoint) / ckpt.FILE).exists():
        run.last = ckpt.load(checkpoint)
    else:
        src = "driver's copy of the last agreed step"
    last = run.last
    run.params, run.state, run.step, run.metrics = last.params, last.state, last.step, list(last.metrics)
    run.records = [r for r in run.records if r.step <= run.step]
    event(f"{e.message}; resuming from the {src} at step {run.step} on {len(survivors)} owner(s), "
          f"shares {run.system.shares}")
    if run.system.tree == "per-owner":
        event(f"the per-owner tree names the partition: from here on the contract is "
              f"{combine.contract_hash(run.system)[:16]} (a different floating-point program)")
    run.seat(Owners(client, survivors, run.share_memory), owner_device)


def _record(run: _Run, out) -> StepRecord:
    """A step done: the run moves to its parameters and state, its metric and record kept."""
    run.step += 1
    run.params, run.state = out.params, out.state
    metric = float(np.sqrt(np.add.reduce(np.square(out.mean, dtype=np.float64))))   # numpy's own sum: a BLAS
    # norm wakes BLAS threads that spin on the other core for a while after it (measured: an owner's step 5-9 ms
    # slower, the driver's own update and hash 8-19 ms against 7), docs/learner.md "A pairwise sum"
    run.metrics.append(metric)
    split = {"owners": out.owner_s, "driver": out.driver_s, "before_calls": out.send_s}
    rec = StepRecord(run.step, metric, len(set(out.hashes)) == 1, out.hashes, list(run.team.addresses),
                     run.system.shares, out.seconds, out.paths, split)
    run.records.append(rec)
    return rec


def _checkpoint(run: _Run, checkpoint) -> None:
    """The driver's copy of this step, and the checkpoint on disk where the run keeps one."""
    run.last = ckpt.Checkpoint.of(run.system, run.step, run.params, run.state, run.metrics)
    if checkpoint is not None:
        ckpt.save(checkpoint, run.last)


def _can_readmit(run: _Run, original: System, client) -> bool:
    """After a fault: the cluster has more live workers than the run now uses."""
    return len(run.system.owners) < len(original.owners) and len(workers_now(client)) > len(set(run.team.addresses))


def _readmit(run: _Run, original: System, client, owner_device: str, event) -> None:
    """Back to the run's own owners and partition, at this checkpoint boundary."""
    run.system = original
    run.seat(Owners.on(client, len(run.system.owners), run.share_memory), owner_device)
    event(f"a worker joined: the run's {len(run.system.owners)} owners are re-admitted at the "
          f"checkpoint of step {run.step}, on {len(set(run.team.addresses))} worker(s), shares {run.system.shares}")
    if run.system.tree == "per-owner":
        event(f"the per-owner tree names the partition: from here on the contract is "
              f"{combine.contract_hash(run.system)[:16]} again (the run's own)")
