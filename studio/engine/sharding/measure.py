"""Verifying a node's sharding kind on real data (docs/requirements.md L10-L11; docs/bf16.md): the node on the
whole batch of R·N examples and on R shards of N, on the device, through the one executor.

- per example: replica r's outputs against rows [r·N, (r+1)·N) of the whole-batch outputs, bit
  for bit;
- batch contracting: the exact difference (1/R)·(Σ_r rnd S_r − rnd Σ_r S_r), with S_r replica r's
  partial sum. Twice: as the device computes it (the kernels' own rnd S_r on each shard and rnd S on
  the whole batch, an f32 sum inside each), and at the den, where S_r is the reference path's f64
  sum on shard r and rnd the correct rounding from f64 — there also at rnd = id, the f32 statement,
  which must come out zero. Sums of the partial values use math.fsum (correctly rounded)."""
from __future__ import annotations

import math

import numpy as np

from .. import bfloat16 as bf
from ..context import Context
from ..contract.package import OpPackage
from ..errors import StudioError
from ..grad.run import run_op


def shards(inputs: dict[str, np.ndarray], batch: tuple[str, ...], replicas: int, op: str) -> list[dict]:
    """The R shards of a node's inputs: the batch inputs split into R equal contiguous blocks along
    their first dim, every other input replicated."""
    sizes = {np.shape(inputs[b])[0] for b in batch}
    (size,) = sizes
    if size % replicas:
        raise StudioError(f"{op}: the batch of {size} examples does not split into {replicas} equal shards",
                          field="--replicas", hint=f"choose a replica count that divides {size}")
    n = size // replicas
    return [{k: (np.asarray(v)[r * n:(r + 1) * n] if k in batch else v) for k, v in inputs.items()}
            for r in range(replicas)]


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _unit(a: np.ndarray, dtype: str) -> np.ndarray:
    """The ulp of each |value| at the output's precision (bf16, else f32)."""
    a = np.abs(np.asarray(a, dtype=np.float64))
    if dtype == "bf16":
        return bf.ulp(a)
    return np.spacing(a.astype(np.float32)).astype(np.float64)


def stats(diff: np.ndarray, reference: np.ndarray, dtype: str) -> dict:
    """Max and mean of |diff| in ulps of ``reference`` (at ``dtype``) and relative to it."""
    d = np.abs(np.asarray(diff, dtype=np.float64)).reshape(-1)
    ref = np.abs(np.asarray(reference, dtype=np.float64)).reshape(-1)
    ulps = d / _unit(ref, dtype)
    nz = ref > 0
    rel = d[nz] / ref[nz]
    return {"elements": int(d.size), "nonzero": int(np.count_nonzero(d)), "max": float(d.max(initial=0.0)),
            "max_ulps": float(ulps.max(initial=0.0)), "mean_ulps": float(ulps.mean()) if d.size else 0.0,
            "max_rel": float(rel.max(initial=0.0)), "mean_rel": float(rel.mean()) if rel.size else 0.0}


def exact_sum(parts: list[np.ndarray]) -> np.ndarray:
    """Elementwise correctly rounded f64 sum of the parts (math.fsum)."""
    stack = np.stack([_f64(p).reshape(-1) for p in parts])
    return np.array([math.fsum(col) for col in stack.T]).reshape(np.shape(parts[0]))


def difference(partials: list[np.ndarray], rnd) -> tuple[np.ndarray, np.ndarray]:
    """((1/R)·(Σ_r rnd S_r − rnd Σ_r S_r), (1/R)·rnd Σ_r S_r) for the partial sums S_r (f64)."""
    r = len(partials)
    whole = rnd(exact_sum(partials))
    collective = exact_sum([rnd(p) for p in partials])
    return exact_sum([collective, -whole]) / r, whole / r


def rnd_bf16(a: np.ndarray) -> np.ndarray:
    return bf.to_f32(bf.from_f64(a)).astype(np.float64).reshape(np.shape(a))


def identity(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def per_example(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, whole: dict, replicas: int) -> dict:
    """Per output: whether each replica's value is bit for bit its shard of the whole-batch value."""
    sh = pkg.contract.sharding
    parts = [run_op(ctx, pkg, s, params) for s in shards(inputs, sh.batch, replicas, pkg.id)]
    out = {}
    for t in pkg.contract.signature.outputs:
        w = np.asarray(whole[t.name])
        n = w.shape[0] // replicas
        equal, diffs = [], []
        for r, p in enumerate(parts):
            mine, theirs = np.ascontiguousarray(p[t.name]), np.ascontiguousarray(w[r * n:(r + 1) * n])
            same = mine.shape == theirs.shape and np.array_equal(_bits(mine), _bits(theirs))
            equal.append(bool(same))
            diffs.append(_f64(mine) - _f64(theirs) if mine.shape == theirs.shape else np.full(theirs.shape, np.inf))
        d = np.concatenate([x.reshape(-1) for x in diffs])
        d = np.where(np.isnan(d), 0.0, d)      # NaN at the same place on both sides: bits decide above
        out[t.name] = {"dtype": t.dtype, "replica_equals_shard": equal, "bitwise": all(equal),
                       "difference": stats(d, _f64(w), t.dtype)}
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a).reshape(-1)
    return a.view(np.uint16) if a.dtype.itemsize == 2 else a.view(np.uint32)


def batch_contracting(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, whole: dict, replicas: int) -> dict:
    """Per output: the difference of the all-reduced replicas from 1/R of the whole-batch node, on the
    device and at the den (rnd = bf16's rounding, and rnd = id)."""
    sh = pkg.contract.sharding
    pieces = shards(inputs, sh.batch, replicas, pkg.id)
    device = [run_op(ctx, pkg, s, params) for s in pieces]
    den = [ctx.references.call(pkg, pkg.contract.reference_forward, s, params) for s in pieces]
    den = [d if isinstance(d, dict) else {pkg.contract.signature.outputs[0].name: d} for d in den]
    out = {}
    for t in pkg.contract.signature.outputs:
        g = _f64(whole[t.name])
        dev = exact_sum([*(_f64(p[t.name]) for p in device), -g]) / replicas
        partials = [_f64(d[t.name]).reshape(g.shape) for d in den]
        bf_rnd = rnd_bf16 if t.dtype == "bf16" else identity
        d_den, ref = difference(partials, bf_rnd)
        d_id, ref_id = difference(partials, identity)
        out[t.name] = {"dtype": t.dtype,
                       "device": stats(dev, g / replicas, t.dtype),
                       "den": stats(d_den, ref, t.dtype),
                       "den_f32": stats(d_id, ref_id, t.dtype),
                       "largest": _largest(dev, g / replicas)}
    return out


def _largest(diff: np.ndarray, ref: np.ndarray) -> dict:
    """The element with the largest device difference, with its values (for the report)."""
    d = np.abs(diff).reshape(-1)
    i = int(np.argmax(d)) if d.size else 0
    return {"index": i, "difference": float(diff.reshape(-1)[i]) if d.size else 0.0,
            "whole_over_r": float(ref.reshape(-1)[i]) if d.size else 0.0}
