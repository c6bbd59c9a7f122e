"""The story's main job, headless: a spiky signal through the windowed median on the device."""
from __future__ import annotations

import time

from ..context import Context
from ..grad.run import run_op
from .actions import require_proof

SIGNAL = "core/signal/spiky_signal@1"
MEDIAN = "user/demo/windowed_median@1"


def spike_removal(ctx: Context, n: int = 1_000_000, w: int = 7, seed: int = 1, on_proof=None) -> dict:
    """Every op the job runs is proven on this GPU profile first (``require_proof``): a failing
    op raises with its failing case, so no plot is ever drawn from an unproven kernel."""
    source, median = ctx.catalog.resolve(SIGNAL), ctx.catalog.resolve(MEDIAN)
    for pkg in (source, median):
        proof = require_proof(ctx, pkg)
        if on_proof is not None:
            on_proof(proof)
    t0 = time.perf_counter()
    x = run_op(ctx, source, {}, {"n": n, "seed": seed})["y"]
    t1 = time.perf_counter()
    y = run_op(ctx, median, {"x": x}, {"w": w})["y"]
    t2 = time.perf_counter()
    return {"x": x, "y": y, "w": w, "ops": [source, median], "seconds": (t1 - t0, t2 - t1),
            "profile": ctx.device.profile}


def demo(ctx: Context, *, n: int = 1_000_000, w: int = 7, seed: int = 1) -> dict:
    """The worker's ``demo`` request (`scellis demo`): the job's proofs (their lines), the signal and
    the median, and the GPU profile it ran on."""
    proofs: list[str] = []
    r = spike_removal(ctx, n=n, w=w, seed=seed, on_proof=lambda p: proofs.append(p.line()))
    prof = r["profile"]
    return {"x": r["x"], "y": r["y"], "w": r["w"], "seconds": r["seconds"], "proofs": proofs,
            "ops": [(p.id, p.hash) for p in r["ops"]], "profile": {"id": prof.id, "summary": prof.summary}}
