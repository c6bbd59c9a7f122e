"""Runs before proof: the Run cell's worker requests (Qt-free on purpose: they run in the device
worker process, like the catalog scan). ``try_run`` runs the document's kernel on the device
whether or not it has earned a receipt, and says whether the result is proven: a valid
conformance receipt for this GPU profile that covers this run's sizes and parameters.
``try_reference`` runs the reference alone (its confined host), so a reference can be tried before
any kernel exists. Neither proves anything, nor writes a receipt."""
from __future__ import annotations

import numpy as np

SPIKY = "core/signal/spiky_signal@1"


def param_specs(signature_text: str) -> list[tuple[str, int, int, int]]:
    """(name, default, lo, hi) for each integer parameter of the signature (a 7 for the story's w)."""
    from ..engine.contract.signature import parse_signature
    from ..engine.errors import StudioError
    try:
        sig = parse_signature(signature_text)
    except StudioError:
        return []
    out = []
    for p in sig.params:
        lo = int(p.lo.eval({})) if p.lo is not None and not p.lo.symbols() else 0
        hi = int(p.hi.eval({})) if p.hi is not None and not p.hi.symbols() else 2**31 - 1
        default = min(max(7, lo), hi)
        if p.parity == "odd" and default % 2 == 0:
            default += 1
        if p.parity == "even" and default % 2 == 1:
            default += 1
        out.append((p.name, default, lo, min(hi, 2**31 - 1)))
    return out


def try_run(req, *, target: str, inputs: dict | None = None, params: dict | None = None,
            budget_bytes: int | None = None) -> dict:
    """The kernel on the device, proven or not: ``{"outputs": {...}, "proof": {"proven", "why"}}``."""
    from ..engine.services import actions, trial
    pkg = actions.resolve(req.ctx, target)
    req.announce(pkg)
    if pkg.contract.kernel is None:
        from ..engine.errors import StudioError
        raise StudioError(f"{pkg.id} has no kernel yet", field="kernel",
                          hint="run its reference instead (the Run cell's “reference” choice)")
    return trial.run_unproven(req.ctx, pkg, inputs=dict(inputs or {}), params=dict(params or {}),
                              budget_bytes=budget_bytes, progress=req.progress)


def try_reference(req, *, target: str, inputs: dict | None = None, params: dict | None = None) -> dict:
    """The reference alone, in its confined host (trusted code only): ``{"outputs": {...}, "proof"}``."""
    from ..engine.services import actions, trial
    pkg = actions.resolve(req.ctx, target)
    req.announce(pkg)
    return trial.run_reference(req.ctx, pkg, inputs=dict(inputs or {}), params=dict(params or {}))


def op_output(req, *, target: str, n: int = 1_000_000, seed: int = 1) -> dict:
    """Another op's output, to feed an input: the op (an id of the catalog, or a package folder) runs
    on the spiky signal of ``n`` samples (its first input; any other inputs get the same signal) at
    its default parameters — proven or not, as ``try_run`` says."""
    from ..engine.services import actions, trial
    ctx = req.ctx
    x = next(iter(actions.run(ctx, actions.resolve(ctx, SPIKY), inputs={}, params={"n": int(n), "seed": int(seed)},
                              require_receipt=True).values()))
    pkg = actions.resolve(ctx, target)
    req.announce(pkg)
    sig = pkg.contract.signature
    inputs = {t.name: np.asarray(x) for t in sig.inputs}
    params = {name: default for name, default, _lo, _hi in param_specs(sig.text)}
    return trial.run_unproven(ctx, pkg, inputs=inputs, params=params, progress=req.progress)


HANDLERS = {"try_run": try_run, "try_reference": try_reference, "op_output": op_output}   # imported by name
BUDGETS = {"try_run": 120.0, "try_reference": 120.0, "op_output": 120.0}
