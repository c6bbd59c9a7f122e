"""The public API's call overhead (scellis/, docs/api.md): a proven op called from Python at n = 10^3,
where the work is nothing and the call is everything, against a plain numpy function doing the same
work in the same run. Beside the ratio, each row splits the call: ``dispatch_s`` is the engine's run
alone (grad.run.run_op, what `bench_overhead` times), ``over_dispatch_s`` what the API adds on top
(argument binding, the signature's checks, the proof gate's coverage look-up; target 0.3 ms), and
``verify_s`` what the first call of a session pays once to verify the receipt (a second call pays
none). The op is proven first when the user folder holds no receipt for it (untimed)."""
from __future__ import annotations

import numpy as np

from .timing import best, row

MEAN = "core/reduce/mean@1"
BASELINE = 150.0            # the ratio measured on lavapipe: 114 to 142 (docs/api.md, "What a call costs")
OVER_TARGET_S = 0.0003


def rows(engine, quick: bool, margin: float) -> list[dict]:
    import time

    import scellis
    from studio.engine.grad.run import run_op
    x = np.random.default_rng(1).normal(size=1_000).astype(np.float32)
    first = scellis.Session(context=engine.ctx)
    first.op(MEAN)(x)                                   # proves here when no receipt is valid (untimed)
    s = scellis.Session(context=engine.ctx)              # a fresh session: its first call verifies the receipt
    mean = s.op(MEAN)
    t0 = time.perf_counter()
    y = mean(x)
    first_call = time.perf_counter() - t0
    assert s.gate.verifications == 1 and abs(float(y[0]) - float(np.mean(x))) <= 1e-5 * max(1.0, abs(float(np.mean(x))))
    reps = 50 if quick else 200
    t = best(lambda: mean(x), reps)
    assert s.gate.verifications == 1                    # no call after the first verified again
    pkg = mean.package
    dispatch = best(lambda: run_op(engine.ctx, pkg, {"x": x}, {}), reps)
    peer = best(lambda: np.mean(x), reps * 5)
    return [row("scellis API call, proven op: mean n=1e3", "numpy.mean", t, peer, engine.adapter,
                limit=round(BASELINE * margin, 3), dispatch_s=round(dispatch, 6), over_dispatch_s=round(t - dispatch, 6),
                over_target_s=OVER_TARGET_S, verify_s=round(max(first_call - t, 0.0), 6))]
