"""Tuned vs fixed (issue 30): the fast median's outputs-per-invocation (``override RUN``, declared
512, ``tune [64 .. 2048]``) tuned on this GPU profile by ``services.tuning.tune`` — every candidate
proven by the conformance corpus first, then timed — against the declared fixed 512, at n = 10^6.

One row per window: the tuned call (the winner, through the same executor) against the fixed one,
both timed interleaved (the machine is shared: alternating calls see the same load), the median of
the repeats. The tuning itself runs in a scratch user folder. The issue asks for a ratio <= 1 (the
winner is the fastest proven candidate, and 512 is one of them); the --quick limit is generous.

    python -m benchmarks.bench_tuning          # prints the rows
    python -m benchmarks --only tuning"""
from __future__ import annotations

import statistics
import time

import numpy as np

from .timing import row

FAST = "user/demo/windowed_median_fast@1"
N = 1_000_000
BASELINE = 1.5          # --quick fails past this times the margin: a tuned run several times slower


def _interleaved(ctx, a, b, inputs, params, repeats: int) -> tuple[float, float]:
    from studio.engine.grad.run import run_op
    ta, tb = [], []
    run_op(ctx, a, inputs, params)
    run_op(ctx, b, inputs, params)                       # both pipelines compiled before timing
    for _ in range(repeats):
        for pkg, acc in ((a, ta), (b, tb)):
            t = time.perf_counter()
            run_op(ctx, pkg, inputs, params)
            acc.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def rows(engine, quick: bool, margin: float) -> list[dict]:
    from studio.engine.services.tuning import tune, tuned
    ctx = engine.scratch()
    pkg = engine.op(FAST)
    ctx.trust.record_authored(pkg.hash, path=pkg.root.resolve())
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    out = []
    for w in ((7,) if quick else (7, 31)):
        t0 = time.perf_counter()
        res = tune(ctx, pkg, params={"w": w}, sizes=[N], repeats=3 if quick else 5)
        tune_s = time.perf_counter() - t0
        run_pkg, info = tuned(ctx, pkg, {"w": w})
        assert info["source"] == "tuned" and info["proven"], info
        t_tuned, t_fixed = _interleaved(ctx, run_pkg, pkg, {"x": x}, {"w": w}, 5 if quick else 11)
        failed = [c["values"] for c in res["candidates"] if not c["proven"]]
        out.append(row(f"tuned fast median n=1e6 w={w} (RUN={info['values']['RUN']})", "fixed RUN=512",
                       t_tuned, t_fixed, engine.adapter, limit=round(BASELINE * margin, 3), target=1.0,
                       candidates={str(c["values"]["RUN"]): (round(sum(c["seconds"]), 5) if c["proven"] else "fails")
                                   for c in res["candidates"]},
                       failed=failed, tune_s=round(tune_s, 2)))
    return out


def main() -> int:
    from .__main__ import table
    from .engine import Engine
    engine = Engine()
    try:
        got = rows(engine, False, 5.0)
    finally:
        engine.close()
    print(table(got))
    for r in got:
        print(f"{r['figure']}: tuned {r['time_s'] * 1e3:.2f} ms vs fixed {r['peer_s'] * 1e3:.2f} ms, "
              f"ratio {r['ratio']:.3f}; candidates (s, proven first): {r['candidates']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
