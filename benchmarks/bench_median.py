"""The windowed median at n = 10^6, w in {3, 7, 15, 31}: the story kernel and the fast kernel
(examples/windowed_median_fast) against the fastest of scipy.ndimage.median_filter,
bottleneck.move_median and pandas' rolling median, in the same run. Before anything is timed,
both kernels' outputs are asserted bitwise equal to each other and to every peer's on the valid
range (scipy's window is centred: outputs h..n-h; bottleneck's and pandas' trail: w-1..n).

A device time is the whole call as a user makes it (upload, dispatch, readback), with the
pipeline compiled beforehand, as in a session."""
from __future__ import annotations

import numpy as np

from .timing import best, row

N = 1_000_000
WINDOWS = (3, 7, 15, 31)
STORY = "user/demo/windowed_median@1"
FAST = "user/demo/windowed_median_fast@1"
TARGET_FAST = 0.4         # the target for the fast kernel: at most 0.4x the fastest peer
# --quick limits: ratios measured on lavapipe (2 cores, docs/performance.md) times the margin
BASELINE = {("fast", 3): 0.4, ("fast", 7): 0.35, ("fast", 15): 0.4, ("fast", 31): 0.4,
            ("story", 3): 8.0, ("story", 7): 10.0, ("story", 15): 20.0, ("story", 31): 50.0}


def peers(x: np.ndarray, w: int) -> dict:
    import bottleneck as bn
    import pandas as pd
    from scipy.ndimage import median_filter
    n, h = x.size, w // 2
    return {
        "scipy.ndimage.median_filter": (lambda: median_filter(x, size=w, mode="nearest"), slice(h, n - h)),
        "bottleneck.move_median": (lambda: bn.move_median(x, window=w), slice(w - 1, n)),
        "pandas rolling median": (lambda: pd.Series(x).rolling(w).median().to_numpy(), slice(w - 1, n)),
    }


def rows(engine, quick: bool, margin: float) -> list[dict]:
    repeats = 3 if quick else 5
    x = np.random.default_rng(0).normal(size=N).astype(np.float32)
    story, fast = engine.op(STORY), engine.op(FAST)
    out = []
    for w in WINDOWS:
        kernels = {"fast": fast} if quick and w != 7 else {"fast": fast, "story": story}
        ys = {k: engine.run(p, {"x": x}, {"w": w})["y"] for k, p in kernels.items()}   # compiles, warms
        ref = ys["fast"]
        for k, y in ys.items():
            assert np.array_equal(y.view(np.uint32), ref.view(np.uint32)), f"{k} kernel differs at w = {w}"
        peer_s = {}
        for name, (fn, valid) in peers(x, w).items():
            got = np.asarray(fn(), dtype=np.float32)[valid]
            assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), f"{name} disagrees at w = {w}"
            peer_s[name] = best(fn, repeats if "pandas" not in name else min(repeats, 3))
        peer = min(peer_s, key=peer_s.get)
        for k, p in kernels.items():
            t = best(lambda p=p, w=w: engine.run(p, {"x": x}, {"w": w}), repeats)
            out.append(row(f"median {k} kernel n=1e6 w={w}", peer, t, peer_s[peer], engine.adapter,
                           limit=round(BASELINE[k, w] * margin, 3),
                           target=TARGET_FAST if k == "fast" else None,
                           peers={n_: round(s, 6) for n_, s in peer_s.items()}))
    return out
