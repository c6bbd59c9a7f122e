"""The engine's request kinds, as the device worker's child runs them: each resolves its target
freshly (edits on disk are seen), tells the parent which op it is (so a timeout can name it),
and calls the use case (studio/engine/services/actions.py) that the CLI would call."""
from __future__ import annotations

import os
import time

from ..services import actions
from .child import Request


def _pkg(req: Request, target: str):
    pkg = actions.resolve(req.ctx, target)
    req.announce(pkg)
    return pkg


def run(req: Request, *, target: str, inputs: dict | None = None, params: dict | None = None,
        budget_bytes: int | None = None, require_receipt: bool = False):
    def relied(proof):                       # which receipt the run relies on: the CLI prints it on stderr
        if req.note is not None:
            req.note({"kind": "proof", "text": proof.line()})
    return actions.run(req.ctx, _pkg(req, target), inputs=inputs, params=params, budget_bytes=budget_bytes,
                       require_receipt=require_receipt, progress=req.progress, on_proof=relied)


def conform(req: Request, *, target: str, seed: int = 0, large: bool = False, case: int | None = None,
            receipt: bool = True, seeds: int | None = None):
    from ..proof.progressive import Stream
    with Stream(req.note, req.progress) as stream:       # the verdicts told as they land
        return actions.conform(req.ctx, _pkg(req, target), seed=seed, large=large, case=case, receipt=receipt,
                               progress=stream.progress, on_failure=stream.on_failure,
                               **({"seeds": seeds} if seeds is not None else {}))


def check(req: Request, *, target: str):
    return actions.check(req.ctx, _pkg(req, target))


def gradcheck(req: Request, *, target: str, params: dict | None = None, h: float | None = None, seed: int = 0,
              tolerance: float | None = None, receipt: bool = True):
    return actions.gradcheck(req.ctx, _pkg(req, target), params=params, h=h, seed=seed, tolerance=tolerance,
                             receipt=receipt)


def receipts(req: Request, *, target: str):
    return actions.verify_receipts(req.ctx, _pkg(req, target))


def profile(req: Request):
    return actions.profile(req.ctx)


def demo(req: Request, *, n: int = 1_000_000, w: int = 7, seed: int = 1):
    """The story's main job (studio/engine/services/demo.py): its proofs, the signal and the median."""
    from ..services.demo import spike_removal
    proofs = []
    r = spike_removal(req.ctx, n=n, w=w, seed=seed, on_proof=lambda p: proofs.append(p.line()))
    prof = r["profile"]
    return {"x": r["x"], "y": r["y"], "w": r["w"], "seconds": r["seconds"], "proofs": proofs,
            "ops": [(p.id, p.hash) for p in r["ops"]], "profile": {"id": prof.id, "summary": prof.summary}}


def ping(req: Request, *, sleep_s: float = 0.0):
    if sleep_s:
        time.sleep(sleep_s)
    ctx = req.ctx
    return {"pid": os.getpid(), "pipelines": ctx.device.pipeline_count if ctx.has_device else 0}
