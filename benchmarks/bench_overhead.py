"""Engine overhead against plain numpy doing the same work: the per-call overhead (core/signal/
clip@1 on 10^3 elements: the work is nothing, the call is everything: shapes, buffers, bind
groups, submit, readback) and the transfer cost (the same op on 10^6 elements: 4 MB up, 4 MB
down), and that transfer against a plain numpy copy of the same bytes (issue 25's target: within
3x; the engine's path is the batched corpus's: one input arena, one output arena, one mapped
readback, pooled buffers). The outputs are asserted equal to numpy's before timing."""
from __future__ import annotations

import numpy as np

from .timing import best, row

CLIP = "core/signal/clip@1"
BASELINE = {1_000: 200.0, 1_000_000: 60.0}      # measured ratios on lavapipe (docs/performance.md)
MEMCPY_BASELINE = 20.0
MEMCPY_TARGET = 3.0


def rows(engine, quick: bool, margin: float) -> list[dict]:
    pkg = engine.op(CLIP)
    out = []
    for n, figure in ((1_000, "engine per-call overhead: clip n=1e3"),
                      (1_000_000, "engine transfer cost: clip n=1e6")):
        out += _clip_rows(engine, pkg, n, figure, quick, margin)
    return out


def _clip_rows(engine, pkg, n: int, figure: str, quick: bool, margin: float) -> list[dict]:
    """The clip figure at size ``n``; at 10^6 the transfer alone too."""
    x = np.random.default_rng(1).normal(size=n).astype(np.float32) * 4
    params = {"lo": -1.0, "hi": 1.0}

    def ours():
        return engine.run(pkg, {"x": x}, params)["y"]

    def peer():
        return np.clip(x, np.float32(-1.0), np.float32(1.0))
    assert np.array_equal(ours(), peer()), figure
    reps = 20 if n == 1_000 else (5 if quick else 10)
    t, tp = best(ours, reps), best(peer, reps * 5)
    out = [row(figure, "numpy.clip", t, tp, engine.adapter, limit=round(BASELINE[n] * margin, 3))]
    if n == 1_000_000:      # the transfer alone (dispatch's path, no kernel) against copying the same bytes
        from studio.engine.device.execution import roundtrip
        device = engine.ctx.device
        assert np.array_equal(roundtrip(device, x), x)
        dst = np.empty_like(x)
        back = np.empty_like(x)

        def memcpy():               # the same bytes copied up and back by numpy
            np.copyto(dst, x)
            np.copyto(back, dst)
        tt, tm = best(lambda: roundtrip(device, x), reps * 2), best(memcpy, reps * 5)
        out.append(row("engine transfer alone: 4 MB up and back (n=1e6 f32)", "numpy copy of the same bytes",
                       tt, tm, engine.adapter, limit=round(MEMCPY_BASELINE * margin, 3), target=MEMCPY_TARGET,
                       call_s=round(t, 6), transfer_share=round(tt / t, 3)))
    return out
