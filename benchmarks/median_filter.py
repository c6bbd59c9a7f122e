"""Sliding-window median, n = 1e6: the story op on the device against the best CPU peers,
in the same run, as ratios. Run: .venv/bin/pip install -e '.[bench]' && .venv/bin/python benchmarks/median_filter.py

Each timing is the best of REPEATS wall-clock runs of the whole call (for the device:
upload, dispatch, readback; the pipeline is compiled once beforehand, as in a session).
Every peer's output is checked against ours on the valid range first."""
from __future__ import annotations

import json
import sys
import time

import numpy as np

REPEATS = 5


def best(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(n: int = 1_000_000, windows=(7, 31)) -> dict:
    import bottleneck as bn
    import pandas as pd
    from scipy.ndimage import median_filter

    from studio.engine.contract.catalog import Catalog
    from studio.engine.device.device import get_device
    from studio.engine.device.execution import run_op

    dev = get_device()
    op = Catalog.default().resolve("user/demo/windowed_median@1")
    x = np.random.default_rng(0).normal(size=n).astype(np.float32)
    rows = []
    for w in windows:
        h = w // 2
        ours = lambda: run_op(op, {"x": x}, {"w": w}, device=dev)["y"]
        y = ours()
        peers = {
            "scipy.ndimage.median_filter": (lambda: median_filter(x, size=w, mode="nearest"), slice(h, n - h)),
            "bottleneck.move_median": (lambda: bn.move_median(x, window=w), slice(w - 1, n)),
            "pandas.rolling.median": (lambda: pd.Series(x).rolling(w).median().to_numpy(), slice(w - 1, n)),
        }
        t_ours = best(ours)
        for name, (fn, valid) in peers.items():
            out = np.asarray(fn(), dtype=np.float32)[valid]
            assert np.array_equal(out, y), f"{name} disagrees with the device at w = {w}"
            t = best(fn)
            rows.append({"w": w, "peer": name, "peer_s": round(t, 4), "scellis_s": round(t_ours, 4),
                         "speedup": round(t / t_ours, 2)})
    report = {"n": n, "adapter": dev.profile.summary, "profile": dev.profile.id, "rows": rows}
    return report


if __name__ == "__main__":
    rep = main()
    print(f"windowed median, n = {rep['n']}, device: {rep['adapter']}")
    print(f"{'w':>3}  {'peer':30s} {'peer s':>8} {'scellis s':>10} {'peer/scellis':>13}")
    for r in rep["rows"]:
        print(f"{r['w']:>3}  {r['peer']:30s} {r['peer_s']:>8.4f} {r['scellis_s']:>10.4f} {r['speedup']:>13.2f}")
    if "--json" in sys.argv:
        print(json.dumps(rep, indent=2))
