"""The learner's per-step cost (docs/learner.md "What was measured"): least squares with momentum
(the shipped programs), k = 10^3 and 10^6 parameters, on 1, 2 and 4 owners (Dask worker processes
of one LocalCluster), against the best plain peer: a numpy loop in one process doing the same
arithmetic with an unordered sum (``contrib.sum(axis=0)``), no owners, no tree, no agreement check.
Ratios > 1: the learner's price for placement-free bits, replicas and the per-step hash check.

    python -m benchmarks.bench_learner [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

PEER = "numpy loop, unordered sum, one process"


def _system(k: int, n: int, owners: int):
    from studio.engine.learner.program import parse_program
    from studio.engine.learner.system import System
    from studio.engine.resources import ROOT
    src = ROOT / "learners" / "least_squares_momentum"
    rng = np.random.default_rng(k)
    x = rng.normal(size=(n, k)).astype(np.float32)
    y = (x @ rng.normal(size=k).astype(np.float32) / np.float32(np.sqrt(k))).astype(np.float32)
    samples = np.concatenate([x, y[:, None]], axis=1)
    s = System.build(k=k, s=k + 1, m=k, contribution=parse_program((src / "contribution.assign").read_text(), origin="c"),
                     update=parse_program((src / "update.assign").read_text(), origin="u"), params=np.zeros(k),
                     state=np.zeros(k), rate=0.1 / k, samples=samples, name=f"bench k={k}")
    return s.evenly(owners), x, y


def _peer(x: np.ndarray, y: np.ndarray, rate: float, steps: int) -> float:
    """Median seconds per step of the same arithmetic in plain numpy (f32, unordered sum)."""
    k = x.shape[1]
    w, v = np.zeros(k, np.float32), np.zeros(k, np.float32)
    r = np.float32(rate)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        resid = x @ w - y
        contrib = resid[:, None] * x
        mean = contrib.sum(axis=0) / np.float32(x.shape[0])
        v = np.float32(0.9) * v + mean
        w = w - r * v
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _in_process(system, steps: int) -> float:
    """Median seconds per step of the same canonical-tree step without owners (combine.local_step):
    what the program interpreter and the ordered tree cost before Dask adds its share."""
    from studio.engine.learner.combine import local_step
    p, s, times = system.params, system.state, []
    for _ in range(steps):
        t0 = time.perf_counter()
        p, s, _ = local_step(system, p, s)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:] or times)


def rows(quick: bool) -> list[dict]:
    from studio.engine.learner.owners import start_cluster
    from studio.engine.learner.run import learn
    sizes = [(1000, 64), (1_000_000, 4 if quick else 8)]
    steps = 3 if quick else 6
    out = []
    cluster, client = start_cluster(4, memory_limit="1500MiB")
    try:
        for k, n in sizes:
            system, x, y = _system(k, n, 1)
            ours = _in_process(system, steps + 1)
            peer = _peer(x, y, float(system.rate), steps + 1)
            out.append({"figure": f"learner step, k={k:.0e}, N={n}, in one process (no Dask)", "peer": PEER,
                        "time_s": ours, "peer_s": peer, "ratio": ours / peer, "adapter": "cpu (numpy)"})
            for owners in (1, 2, 4):
                system, x, y = _system(k, n, owners)
                res = learn(system, client=client, steps=steps + 1)
                ours = statistics.median(r.seconds for r in res.records[1:])      # the first step warms up
                peer = _peer(x, y, float(system.rate), steps + 1)
                out.append({"figure": f"learner step, k={k:.0e}, N={n}, {owners} owner{'s' * (owners > 1)}",
                            "peer": PEER, "time_s": ours, "peer_s": peer, "ratio": ours / peer,
                            "adapter": "cpu (numpy)"})
    finally:
        client.close()
        cluster.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    for r in rows(args.quick):
        print(f"{r['figure']:<58} ours {r['time_s']:.4f} s  peer {r['peer_s']:.6f} s  ratio {r['ratio']:.1f}")


if __name__ == "__main__":
    main()
