"""The divisor step at bf16 (docs/bf16.md, "The divisor step"). A data-parallel run divides its
loss by the per-replica batch, so its cotangents are R times the shard of the global ones; carrying that
factor through a rounded node needs rnd(s·x) = s·rnd(x), which holds for s = 2^k while neither
overflow nor subnormals intervene (the unbounded-exponent model's proviso), and fails in general
for any other s. This module says when to warn and measures the identity on values."""
from __future__ import annotations

import numpy as np

from .. import bfloat16 as bf


def power_of_two(r: int) -> bool:
    return r >= 1 and r & (r - 1) == 0


def scaling_commutes(x: np.ndarray, s: float) -> np.ndarray:
    """Per element of the f64 values ``x``: whether rnd(s·x) = s·rnd(x) at bf16, both sides
    compared as real numbers (s·x formed in f64, exact for s a power of two in f64's range)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        lhs = bf.to_f32(bf.from_f64(s * x)).astype(np.float64)
        rhs = s * bf.to_f32(bf.from_f64(x)).astype(np.float64)
        return (lhs == rhs) | (np.isnan(lhs) & np.isnan(rhs))


def divisor_warning(replicas: int, nodes: list[str]) -> str | None:
    """The warning for a bf16 run on ``replicas`` replicas, naming the bf16 nodes a scaled cotangent
    reaches (``nodes``); None when the count is a power of two (or no such node is bf16)."""
    if power_of_two(replicas) or not nodes:
        return None
    return (f"{replicas} replicas is not a power of two: a bf16 run that divides its loss by the per-replica "
            f"batch scales its cotangents by {replicas}, and rnd({replicas}·x) = {replicas}·rnd(x) does not hold at "
            f"bf16 (docs/bf16.md, \"The divisor step\"), so the bf16 node(s) {', '.join(nodes)} that the scaled "
            f"cotangent reaches are not {replicas} × their "
            f"single-device values; use a power of two (1, 2, 4, 8, ...) replicas")
