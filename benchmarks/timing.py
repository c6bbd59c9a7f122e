"""Timing and row helpers shared by the benchmark modules: best-of-N wall clock, the row schema."""
from __future__ import annotations

import statistics
import time


def best(fn, repeats: int) -> float:
    """The minimum wall-clock seconds of ``repeats`` calls (the machine is shared: the minimum is
    the least disturbed run)."""
    times = []
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def median_of(fn, repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def row(figure: str, peer: str, time_s: float, peer_s: float, adapter: str, *, limit: float | None = None,
        target: float | None = None, **extra) -> dict:
    """One table row. ``limit``: the ratio --quick fails above (generous: a regression of several
    times); ``target``: the ratio the issue asks for (reported, never asserted)."""
    r = {"figure": figure, "peer": peer, "time_s": round(float(time_s), 9), "peer_s": round(float(peer_s), 9),
         "ratio": round(float(time_s) / float(peer_s), 4) if peer_s > 0 else float("inf"), "adapter": adapter}
    if limit is not None:
        r["limit"] = limit
    if target is not None:
        r["target"] = target
    r.update(extra)
    return r
