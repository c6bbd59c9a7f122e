"""The learner's per-step cost (docs/learner.md "What was measured"): least squares with momentum
(the shipped programs), k = 10^3, 10^5 and 10^6 parameters, N = 8 and 64 samples, on 1, 2 and 4
owners (resident actors on the worker processes of one LocalCluster), against the best plain peer:
a numpy loop in one process doing the same arithmetic with an unordered sum
(``contrib.sum(axis=0)``, BLAS ``x @ w``), no owners, no tree, no agreement check. Ratios > 1: the
learner's price for placement-free bits, replicas and the per-step hash check.

Each row gives the minimum and the median per-step time over the timed steps (the machine is
shared: the minimum is the cost, the median what a shared machine gave), and the split of the
median step: the slowest owner's own compute in its call (update + hash + contributions + its
blocks of the tree), the driver's part (the tree's remaining additions and the mean before the
calls go out; its own replica's update and hash while the owners work), and the round trip: the
step less the owner's compute and the driver's part before the calls (Dask, pickling, the mean out
and the sums back, and waiting for a CPU).

Each owner row is run on both owner paths (docs/learner.md "Owners on a device"): ``cpu`` (the
numpy reference) and ``gpu`` (each owner on its worker process's device: the staged program and the
device tree, bitwise the same). The device here is lavapipe (llvmpipe: Vulkan on the same CPU
cores), so the device rows measure the device path's structure on a CPU, not a GPU; a row's
``adapter`` names it.

The pairwise rows (``--pairwise``; part of the full run): the same learner with its contribution's
sum declaring the pairwise order (``sum(j in 0..k, pairwise: ...)``, docs/assignment-programs.md
"The order of a sum"), k = 10^6, N = 8: in one process (``combine.local_step``) and on one owner
through Dask, against the same numpy loop measured in the same run; beside them the shipped
(sequential) program in one process, for the order's own effect.

    python -m benchmarks.bench_learner [--quick] [--k K ...] [--n N ...] [--paths cpu gpu] [--owners 1 2 4]
    python -m benchmarks.bench_learner --pairwise [--k K ...] [--n N ...] [--paths cpu]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

PEER = "numpy loop, unordered sum, one process"
TARGETS = {(1_000_000, 1): ("ratio", 2.0), (1000, 2): ("time_s", 0.005)}    # issue 26 (benchmark, not a test)
PAIRWISE_TARGETS = {(1_000_000, 0): ("ratio", 3.0), (1_000_000, 1): ("ratio", 4.0)}   # issue 41: in one process; Dask


def _system(k: int, n: int, owners: int, order: str = ""):
    """The shipped least-squares learner; ``order`` ", pairwise": its sum declares the pairwise order."""
    from studio.engine.learner.program import parse_program
    from studio.engine.learner.system import System
    from studio.engine.resources import ROOT
    src = ROOT / "learners" / "least_squares_momentum"
    contribution = (src / "contribution.assign").read_text()
    if order:
        assert "sum(j in 0..k:" in contribution
        contribution = contribution.replace("sum(j in 0..k:", f"sum(j in 0..k{order}:")
    rng = np.random.default_rng(k)
    x = rng.normal(size=(n, k)).astype(np.float32)
    y = (x @ rng.normal(size=k).astype(np.float32) / np.float32(np.sqrt(k))).astype(np.float32)
    samples = np.concatenate([x, y[:, None]], axis=1)
    s = System.build(k=k, s=k + 1, m=k, contribution=parse_program(contribution, origin="c"),
                     update=parse_program((src / "update.assign").read_text(), origin="u"), params=np.zeros(k),
                     state=np.zeros(k), rate=0.1 / k, samples=samples, name=f"bench k={k}")
    return s.evenly(owners), x, y


def _stats(times: list[float]) -> tuple[float, float]:
    return min(times), statistics.median(times)


def _peer(x: np.ndarray, y: np.ndarray, rate: float, steps: int) -> list[float]:
    """Seconds per step of the same arithmetic in plain numpy (f32, unordered sum)."""
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
    return times[1:]


def _in_process(system, steps: int) -> list[float]:
    """Seconds per step of the same canonical-tree step without owners (combine.local_step):
    what the programs and the ordered tree cost before Dask adds its share."""
    from studio.engine.learner.combine import local_step
    p, s, times = system.params, system.state, []
    for _ in range(steps):
        t0 = time.perf_counter()
        p, s, _ = local_step(system, p, s)
        times.append(time.perf_counter() - t0)
    return times[1:]


def _row(figure: str, ours: list[float], peer: list[float], k: int, owners: int, split=None,
         path: str = "cpu (numpy)", targets: dict = TARGETS) -> dict:
    lo, med = _stats(ours)
    plo, pmed = _stats(peer)
    adapter = path[len("device ("):].split(";")[0] if path.startswith("device (") else "cpu (numpy)"
    row = {"figure": figure, "peer": PEER, "time_s": med, "time_min_s": lo, "peer_s": pmed, "peer_min_s": plo,
           "ratio": med / pmed, "ratio_min": lo / plo, "adapter": adapter, "path": path,
           "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}    # the machine's 1-min load
    if split is not None:
        row["split"] = split
    target = targets.get((k, owners))
    if target is not None and (owners or targets is not TARGETS):
        row["target"] = f"{target[0]} <= {target[1]}"
    return row


def rows(quick: bool, ks=None, ns=None, on_row=None, paths=("cpu", "gpu"), owner_counts=(1, 2, 4)) -> list[dict]:
    from studio.engine.learner.owners import start_cluster
    from studio.engine.learner.run import learn
    ks = ks or ((1000, 100_000) if quick else (1000, 100_000, 1_000_000))
    ns = ns or ((8,) if quick else (8, 64))
    steps = 4 if quick else 12
    out = []
    cluster, client = start_cluster(4, memory_limit="2GiB")
    try:
        for k in ks:
            for n in ns:
                each = steps if k < 10 ** 6 else max(4, steps // 2)
                system, x, y = _system(k, n, 1)
                peer = _peer(x, y, float(system.rate), each + 1)
                out.append(_row(f"learner step, k={k:.0e}, N={n}, in one process (no Dask)",
                                _in_process(system, each + 1), peer, k, 0))
                if on_row:
                    on_row(out[-1])
                for owners in owner_counts:
                    system, _, _ = _system(k, n, owners)
                    for way in paths:
                        res = learn(system, client=client, steps=each + 2, checkpoint_every=10 ** 9, owner_device=way)
                        recs = res.records[1:-1]        # the first step warms up; the last computes no next sums
                        med = sorted(recs, key=lambda r: r.seconds)[len(recs) // 2]
                        split = {"owners_s": med.split.get("owners"), "driver_s": med.split.get("driver"),
                                 "round_trip_s": med.seconds - med.split.get("owners", 0) - med.split.get("before_calls", 0)}
                        where = "device" if way != "cpu" else "cpu"
                        out.append(_row(f"learner step, k={k:.0e}, N={n}, {owners} owner{'s' * (owners > 1)}, {where}",
                                        [r.seconds for r in recs], peer, k, owners, split, res.records[-1].paths[0]))
                        if on_row:
                            on_row(out[-1])
    finally:
        client.close()
        cluster.close()
    if not quick and (ks is None or 1_000_000 in ks) and 1 in owner_counts:
        out += pairwise_rows(ns=ns, on_row=on_row, paths=tuple(p for p in paths if p == "cpu") or ("cpu",))
    return out


def pairwise_rows(ks=None, ns=None, on_row=None, paths=("cpu",), steps: int = 16) -> list[dict]:
    """The learner with a pairwise sum: in one process (no Dask) and on one owner through Dask."""
    from studio.engine.learner.owners import start_cluster
    from studio.engine.learner.run import learn
    out = []
    cluster, client = start_cluster(1, memory_limit="3GiB")
    try:
        for k in ks or (1_000_000,):
            for n in ns or (8,):
                system, x, y = _system(k, n, 1, ", pairwise")
                peer = _peer(x, y, float(system.rate), steps + 1)
                out.append(_row(f"learner step, pairwise sum, k={k:.0e}, N={n}, in one process (no Dask)",
                                _in_process(system, steps + 1), peer, k, 0, targets=PAIRWISE_TARGETS))
                if on_row:
                    on_row(out[-1])
                sequential, _, _ = _system(k, n, 1)          # the shipped program, in the same run
                out.append(_row(f"learner step, sequential sum, k={k:.0e}, N={n}, in one process (no Dask)",
                                _in_process(sequential, steps + 1), peer, k, 0, targets={}))
                if on_row:
                    on_row(out[-1])
                for way, shared in [(w, True) for w in paths] + [("cpu", False)]:
                    res = learn(system, client=client, steps=steps + 2, checkpoint_every=10 ** 9, owner_device=way,
                                share_memory=shared)
                    recs = res.records[1:-1]
                    med = sorted(recs, key=lambda r: r.seconds)[len(recs) // 2]
                    split = {"owners_s": med.split.get("owners"), "driver_s": med.split.get("driver"),
                             "round_trip_s": med.seconds - med.split.get("owners", 0) - med.split.get("before_calls", 0)}
                    peer_now = _peer(x, y, float(system.rate), steps + 1)      # the peer again, after the Dask run
                    out.append(_row(f"learner step, pairwise sum, k={k:.0e}, N={n}, 1 owner through Dask, "
                                    f"{'device' if way != 'cpu' else 'cpu'}"
                                    f"{'' if shared else ', mean and sums by value (no mailbox)'}",
                                    [r.seconds for r in recs], peer + peer_now, k, 1, split, res.records[-1].paths[0],
                                    targets=PAIRWISE_TARGETS if shared else {}))
                    if on_row:
                        on_row(out[-1])
    finally:
        client.close()
        cluster.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--k", type=int, nargs="*", help="only these k")
    ap.add_argument("--n", type=int, nargs="*", help="only these N")
    ap.add_argument("--paths", nargs="*", choices=["cpu", "gpu", "auto"],
                    help="the owners' paths to run (default both; --pairwise: cpu)")
    ap.add_argument("--owners", type=int, nargs="*", default=[1, 2, 4], help="owner counts (default 1 2 4)")
    ap.add_argument("--pairwise", action="store_true",
                    help="only the pairwise-sum rows (k = 10^6, N = 8 unless --k / --n; --paths default cpu)")
    args = ap.parse_args()
    if args.pairwise:
        pairwise_rows(args.k, args.n, on_row=_print, paths=tuple(args.paths or ["cpu"]))
        return
    rows(args.quick, args.k, args.n, on_row=_print, paths=tuple(args.paths or ["cpu", "gpu"]),
         owner_counts=tuple(args.owners))


def _print(r: dict) -> None:
    sp = r.get("split")
    extra = (f"  [owners {sp['owners_s'] * 1e3:.1f} ms, driver {sp['driver_s'] * 1e3:.1f} ms, "
             f"round trip {sp['round_trip_s'] * 1e3:.1f} ms]") if sp else ""
    print(f"{r['figure']:<60} ours min {r['time_min_s'] * 1e3:9.2f} ms med {r['time_s'] * 1e3:9.2f} ms  "
          f"peer min {r['peer_min_s'] * 1e3:8.3f} med {r['peer_s'] * 1e3:8.3f} ms  ratio min {r['ratio_min']:6.1f} "
          f"med {r['ratio']:6.1f}{extra}" + (f"  target {r['target']}" if r.get("target") else "")
          + (f"  load {r['load']:.2f}" if r.get("load") is not None else ""), flush=True)


if __name__ == "__main__":
    main()
