"""The use case behind `scellis train FILE --owners N` for a workflow that writes out its gradients
(docs/workflows.md, "Data-parallel training"): prove what has no receipt here (``prove``), start the
owners on Dask (a local cluster of one worker process per owner, or ``scheduler``), train, and write
the training record (atomically, beneath the output folder). Runs in the calling process: the
driver's own device measures the batch-contracting steps on the whole batch."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..atomic import write_text
from ..context import Context
from ..learner.owners import connect, start_cluster
from ..sharding.training import DaskOwners, ParallelResult, Trainer, check_precision, load_replica, params_hash
from ..workflow.spec import load_workflow
from .workflows import prove_ops


def names_gradients(path: str | Path) -> bool:
    """Whether the workflow trains data-parallel: its [train] names each parameter's gradient."""
    wf = load_workflow(path)
    return wf.train is not None and wf.train.explicit


def train(path: str | Path, *, owners: int | None = None, scheduler: str | None = None, epochs: int | None = None,
          steps: int | None = None,
          precision: str | None = None, prove: bool = False, allow_unverified: bool = False,
          out_dir: str | Path | None = None, record: str | Path | None = None, ctx: Context | None = None,
          on_step=None, on_epoch=None, on_note=None, stop=None) -> dict:
    """``stop``: a callable (or threading.Event) checked between steps; a stopped run keeps what ran.
    ``precision``: bf16 or f32, which must be the one the workflow's ops compute in (refused
    otherwise, before any proof or owner); None, the ops' own."""
    path = Path(path).resolve()
    ctx = ctx or Context.open()
    local = load_replica(path, ctx, allow_unverified=True)          # the refusal comes after --prove
    precision = check_precision(local.plan, precision)
    proved = []
    if prove:
        names = {s.pkg.hash: s.name for s in local.plan.steps.values()}
        proved = prove_ops(ctx, [s.pkg for s in local.plan.unverified], plan=local.plan, names=names, on_note=on_note)
    local = load_replica(path, ctx, allow_unverified=allow_unverified)
    n = owners or local.wf.train.replicas
    cluster, client = (None, connect(scheduler)) if scheduler else start_cluster(n)
    try:
        if on_note is not None:
            on_note({"kind": "owners", "owners": n, "replicas": local.wf.train.replicas})
        dask = DaskOwners(client, str(path), n, allow_unverified=allow_unverified, corpora=ctx.corpora)
        trainer = Trainer(ctx, local, n, dask.call, precision=precision)
        res = trainer.run(epochs, steps=steps, on_step=on_step, on_epoch=on_epoch,
                          stop=(stop.is_set if hasattr(stop, "is_set") else stop))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    rec = training_record(local, res, proved)
    out = Path(out_dir) if out_dir else path.parent
    target = Path(record) if record else out / local.wf.record
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text(target, json.dumps(rec, indent=1))
    return {"record": rec, "record_path": str(target), "result": res, "proved": proved}


def training_record(local, res: ParallelResult, proved: list[str]) -> dict:
    """What the run did, pinned: the workflow's hash, every op's hash and receipt, the dataset's
    hash and split, the owners and replicas, every step's loss, time split and shard report, every
    epoch's loss and held-out accuracy, the final parameters' hash."""
    wf = local.wf
    return {"kind": "scellis/data-parallel-training/1", "workflow": wf.name, "workflow_sha256": wf.hash,
            "ops": {n: {"op": sp.pkg.id, "package_hash": sp.pkg.hash, "receipt": sp.verification.status}
                    for n, sp in local.plan.steps.items()},
            "dataset": local.data.record(), "owners": res.owners, "replicas": res.replicas, "batch": res.batch,
            "precision": res.precision, "divisor": res.divisor, "warning": res.warning, "kinds": res.kinds,
            "optimizer": {"kind": wf.train.optimizer, "learning_rate": wf.train.learning_rate,
                          "momentum": wf.train.momentum},
            "epochs": [asdict(e) for e in res.epochs], "steps": [asdict(s) for s in res.steps],
            "params_sha256": params_hash(res.params), "seconds": res.seconds, "status": res.status, "proved": proved}


def step_line(rec) -> str:
    """A step: its loss, its time split, and its weight gradients' per-replica rounding (the largest
    difference relative to the node, and to the statement's bound); for its f32 weight gradients
    (rnd = id), the difference the order of the f32 sums makes (relative to the node, and to the
    order-only bound 2γ_N·Σ|terms|/R: no per-replica rounding)."""
    bf16 = [(st["of_bound"], st["max_rel"], n) for n, outs in rec.shard.items() for st in outs.values() if "of_bound" in st]
    f32 = [(st["of_order_bound"], st["max_rel"], n) for n, outs in rec.shard.items() for st in outs.values()
           if "of_order_bound" in st]
    worst = max(bf16) if bf16 else None
    sp = rec.split
    shard = (f"per-replica rounding: {sum(1 for b in bf16 if b[1] > 0)}/{len(bf16)} bf16 weight gradients differ, "
             f"largest {worst[1]:.2g} of the node ({worst[0]:.2f} of the bound, {worst[2]})" if worst else "")
    if f32:
        rel, ratio = max(f32, key=lambda b: b[1]), max(f32)
        order = (f"order only: {sum(1 for b in f32 if b[1] > 0)}/{len(f32)} f32 weight gradients differ, largest "
                 f"{rel[1]:.2g} of the node ({rel[2]}), at most {ratio[0]:.2g} of the order-only bound ({ratio[2]})")
        shard = f"{shard}; {order}" if shard else order
    return (f"step {rec.step:4d}  epoch {rec.epoch:2d}  loss {rec.loss:.4f}  {rec.seconds * 1000:6.1f} ms "
            f"(owners {sp['owners'] * 1000:.1f}, round trip {sp['round_trip'] * 1000:.1f}, tree {sp['tree'] * 1000:.2f}, "
            f"measure {sp['measure'] * 1000:.1f}, driver {sp['driver'] * 1000:.2f})  {shard}")


def epoch_line(ep) -> str:
    return f"epoch {ep.epoch:2d}  loss {ep.loss:.4f}  held-out accuracy {ep.accuracy * 100:.1f} %  ({ep.seconds:.1f} s)"
