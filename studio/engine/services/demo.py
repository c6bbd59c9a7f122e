"""The story's main job, headless: a spiky signal through the windowed median on the device."""
from __future__ import annotations

import time
from typing import Any

import msgspec
import numpy as np

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


class DemoReport(msgspec.Struct, kw_only=True):
    """``demo``'s report (`scellis demo`): the job's proofs (their lines), the signal and its median,
    the ops that ran (id, content hash), the GPU profile (id, summary) and the two runs' seconds."""
    x: Any                             # the spiky signal (an array)
    y: Any                             # its windowed median (an array)
    w: int
    seconds: tuple[float, float]
    proofs: list[str]
    ops: list[tuple[str, str]]
    profile: dict[str, str]

    def spikes(self) -> int:
        """Samples where the median departs from the input by more than 2 (the removed spikes)."""
        x, y, h = np.asarray(self.x), np.asarray(self.y), self.w // 2
        return int(np.sum(np.abs(x[h: len(x) - h] - y) > 2.0))

    def lines(self) -> list[str]:
        """What `scellis demo` prints before it draws the plot."""
        return [*self.proofs, f"gpu   {self.profile['summary']} ({self.profile['id']})",
                *(f"op    {op}  hash {h[:16]}" for op, h in self.ops),
                f"ran   n = {len(self.x)}, w = {self.w}: source {self.seconds[0] * 1e3:.0f} ms, "
                f"median {self.seconds[1] * 1e3:.0f} ms",
                f"saw   {self.spikes()} samples where the median departs from the input by > 2 (the removed spikes)"]


def demo(ctx: Context, *, n: int = 1_000_000, w: int = 7, seed: int = 1) -> DemoReport:
    """The worker's ``demo`` request (`scellis demo`)."""
    proofs: list[str] = []
    r = spike_removal(ctx, n=n, w=w, seed=seed, on_proof=lambda p: proofs.append(p.line()))
    prof = r["profile"]
    return DemoReport(x=r["x"], y=r["y"], w=r["w"], seconds=r["seconds"], proofs=proofs,
                      ops=[(p.id, p.hash) for p in r["ops"]], profile={"id": prof.id, "summary": prof.summary})
