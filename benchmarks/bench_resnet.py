"""The ResNet training step (docs/bf16.md "A ResNet trained data-parallel"): resources/workflows/
resnet_digits.toml, batch 64 in 4 replicas of 16, on 4 owners (actors on the worker processes of one
LocalCluster, each with its own device), against the same network in plain numpy f32 in one process
(benchmarks/resnet_numpy.py: im2col + BLAS, the same 4 replicas, the same momentum update). The
peer's arithmetic is f32 with unordered BLAS sums; ours is bf16 ops on the device, the fixed-order
combine and, per step, the shard report's whole-batch weight gradients on the driver's device.

The row gives the median step over the timed steps and its split: the slowest owner's own compute
(its replicas' forward and backward steps on its device), the round trip (Dask, pickling, waiting for
a CPU), the tree (the ordered combine), the measure (the shard report) and the driver's update.
Untimed first: proving the ops (as --prove does) and the first steps (the owners compile their
kernels).

    python -m benchmarks.bench_resnet [--steps N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from .resnet_numpy import loss_and_grads
from .timing import row

PEER = "same network, numpy f32, one process"


def _numpy_step(params, velocity, rows, data, lr=0.1, mu=0.9):
    grads = []
    for r in range(4):
        part = rows[r * 16:(r + 1) * 16]
        grads.append(loss_and_grads(params, data.images[part], data.one_hot(part))[1])
    for k in params:
        g = sum(x[k] for x in grads) / np.float32(4)
        velocity[k] = mu * velocity[k] + g
        params[k] = (params[k] - lr * velocity[k]).astype(np.float32)


def measure(ctx, steps: int = 20, warm: int = 3) -> dict:
    from studio.engine.learner.owners import start_cluster
    from studio.engine.resources import ROOT
    from studio.engine.services.workflows import prove_ops
    from studio.engine.sharding.training import DaskOwners, Replica, Trainer
    path = ROOT / "workflows" / "resnet_digits.toml"
    local = Replica(str(path), allow_unverified=True, ctx=ctx)
    prove_ops(ctx, [s.pkg for s in local.plan.unverified], plan=local.plan)
    local = Replica(str(path), ctx=ctx)
    cluster, client = start_cluster(4)
    try:
        owners = DaskOwners(client, str(path), 4, corpora=ctx.corpora)
        t = Trainer(ctx, local, 4, owners.call)
        order = local.data.epoch_order(1)
        recs = [t.step(order[(k % 22) * 64:(k % 22 + 1) * 64], k + 1, 1) for k in range(warm + steps)][warm:]
    finally:
        client.close()
        cluster.close()
    params = {n: np.asarray(local.plan.host[n][0], np.float32) for n in t.params}
    velocity = {k: np.zeros_like(v) for k, v in params.items()}
    peer = []
    for k in range(warm + steps):
        t0 = time.perf_counter()
        _numpy_step(params, velocity, order[(k % 22) * 64:(k % 22 + 1) * 64], local.data)
        peer.append(time.perf_counter() - t0)
    med = statistics.median(r.seconds for r in recs)
    mid = min(recs, key=lambda r: abs(r.seconds - med))
    return {"median_s": med, "min_s": min(r.seconds for r in recs), "split": mid.split,
            "peer_s": statistics.median(peer[warm:]), "steps": steps}


def rows(engine, quick: bool, margin: float) -> list[dict]:
    if quick:
        return []                          # a minute of proofs and a cluster: the full run only
    m = measure(engine.ctx)
    return [row("ResNet training step, 4 owners, batch 64 (bf16)", PEER, m["median_s"], m["peer_s"], engine.adapter,
                split={k: round(v, 6) for k, v in m["split"].items()}, min_s=round(m["min_s"], 6), steps=m["steps"])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    from studio.engine.context import Context
    with Context.open() as ctx:
        m = measure(ctx, args.steps)
    print(f"ResNet step, 4 owners, batch 64: median {m['median_s'] * 1000:.1f} ms (min {m['min_s'] * 1000:.1f}), "
          f"numpy f32 one process {m['peer_s'] * 1000:.1f} ms: ratio {m['median_s'] / m['peer_s']:.1f}")
    print("split of the median step: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in m["split"].items()))


if __name__ == "__main__":
    main()
