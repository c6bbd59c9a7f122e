"""What a training run records (the provenance record's ``kind = "train"``; docs/workflows.md) and
the comparison of two rungs of the gradient ladder for one step (the declared median against its
composite: the same gradients, w times the memory)."""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

import numpy as np

from ..context import Context
from ..proof.receipts import gradcheck_status
from .provenance import SCHEMA, engine_versions
from ..records.canonical import array_digest
from .spec import Workflow
from .train import Trainer, TrainResult, swapped


def _param(a: np.ndarray) -> dict:
    a = np.asarray(a, np.float32)
    return {"values": [float(v) for v in a.reshape(-1)], **array_digest(a)}


def training_record(ctx: Context, tr: Trainer, res: TrainResult, *, options: dict, checkpoint: dict | None,
                    losses_before: list[float] | None = None) -> dict:
    wf = tr.wf
    steps = []
    for n in tr.order:
        sp = tr.plan.steps.get(n)
        if sp is None:
            continue
        kind = sp.pkg.contract.backward.kind
        g = gradcheck_status(sp.pkg, tr.receipts, seal=ctx.seal) if kind == "vjp" else (kind, "")
        steps.append({"name": n, "op": sp.pkg.id, "ref": sp.step.op, "package_hash": sp.pkg.hash,
                      "receipt": sp.verification.to_json(), "gradcheck": {"status": g[0], "why": g[1]},
                      "params": dict(sp.params), "outputs": {}, "vjp_place": res.places.get(n)})
    lp = tr.loss_pkg
    lg = gradcheck_status(lp, tr.receipts, seal=ctx.seal)
    steps.append({"name": "loss", "op": lp.id, "ref": wf.train.loss, "package_hash": lp.hash,
                  "receipt": tr.loss_verification.to_json(), "gradcheck": {"status": lg[0], "why": lg[1]},
                  "params": {}, "outputs": {}, "vjp_place": res.places.get("loss")})
    seeds = {n: tr.plan.steps[n].params["seed"] for n in tr.order if n in tr.plan.steps
             and tr.plan.steps[n].pkg.contract.tolerance.category == "generator" and "seed" in tr.plan.steps[n].params}
    seeds.update({n: tr.plan.host[n][1]["seed"] for n in tr.order if n in tr.plan.host
                  and tr.plan.host[n][1].get("kind") == "generator"})
    curve = list(losses_before or []) + list(res.losses)
    return {
        "schema": SCHEMA, "kind": "train",
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "workflow": {"name": wf.name, "file": str(Path(wf.file).resolve()), "sha256": wf.hash, "text": wf.text},
        "run": {"status": res.status, "until": None, "allow_unverified": tr.allow_unverified,
                "unverified_steps": [s.name for s in tr.plan.unverified], "order": list(tr.order),
                "options": dict(options)},
        "gpu_profile": ctx.device.profile.to_json(), "engine": engine_versions(), "seeds": seeds,
        "sources": {n: {k: v for k, v in tr.plan.host[n][1].items()} for n in tr.order if n in tr.plan.host},
        "steps": steps,
        "training": {"optimizer": {k: v for k, v in tr.optimizer.to_json().items() if k != "state"},
                     "steps_done": len(res.losses), "losses": curve, "final_loss": res.final_loss,
                     "initial_loss": curve[0] if curve else None,
                     "fall": (curve[0] / res.final_loss) if curve and res.final_loss > 0 else None,
                     "initial_params": {n: _param(a) for n, a in res.initial.items()},
                     "final_params": {n: _param(a) for n, a in res.params.items()},
                     "seconds_per_step": [round(s, 6) for s in res.seconds], "seconds": round(sum(res.seconds), 6),
                     "ladder": list(res.ladder), "memory": tr.memory(), "checkpoint": checkpoint},
    }


def compare_rungs(ctx: Context, wf: Workflow, step: str, other: str, *, receipts=None,
                  allow_unverified: bool = False) -> dict:
    """The gradients of every trainable parameter at the initial values with ``step`` as written and
    with its op swapped for ``other`` (e.g. the composite median), and what each rung materializes."""
    out = {"step": step, "rungs": []}
    grads = []
    for w in (wf, swapped(wf, {step: other})):
        tr = Trainer(ctx, w, receipts=receipts, allow_unverified=allow_unverified)
        loss, g, tape, _ = tr.gradients(tr.params)
        mem = next((m for m in tr.memory() if m["step"] == step), None)
        out["rungs"].append({"op": tr.plan.steps[step].pkg.id, "loss": loss, "memory": mem,
                             "tape_ops": [nd.pkg.id for nd in tape.nodes]})
        grads.append(g)
    a, b = grads
    out["max_abs_difference"] = {n: float(np.max(np.abs(a[n].astype(np.float64) - b[n]))) for n in a}
    out["bitwise_equal"] = all(np.array_equal(a[n].view(np.uint32), b[n].view(np.uint32)) for n in a)
    for key in ("bytes", "allocated"):
        m0, m1 = (r["memory"][key] if r["memory"] else None for r in out["rungs"])
        out[f"memory_ratio_{key}"] = (m1 / m0) if m0 and m1 else None
    return out
