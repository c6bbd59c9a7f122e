"""Running any op on the device: a kernel op through the one executor (studio/engine/device/
execution.py), a composite op step by step through this same function. Builtins and user ops
alike; nothing asks which."""
from __future__ import annotations

import numpy as np

from ..context import Context
from ..contract.package import OpPackage
from ..device.execution import Case, run_cases
from ..errors import StudioError
from .composite import evaluate, memory_plan


def run_op(ctx: Context, pkg: OpPackage, inputs: dict[str, np.ndarray], params: dict, *,
           budget_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Run one op on ``ctx``'s device and return its outputs by name."""
    if pkg.contract.composite is None:
        return run_cases(pkg, [Case(inputs, params)], device=ctx.device, budget_bytes=budget_bytes)[0].outputs
    if budget_bytes is not None:
        plan = memory_plan(pkg, {k: np.shape(v) for k, v in inputs.items()}, params, catalog=ctx.catalog)
        if plan.total > budget_bytes:
            raise StudioError(f"{pkg.id}: the composition materializes {plan.total} bytes, over the run's memory "
                              f"budget ({budget_bytes} bytes)", hint="raise the budget, or use a declared op")
    outs, _ = evaluate(pkg, inputs, params, lambda p, a, q: run_op(ctx, p, a, q), catalog=ctx.catalog)
    return outs
