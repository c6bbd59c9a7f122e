"""Runs before proof, the Run cell's worker requests (services/requests.py): ``try_run`` runs a
kernel on the device whether or not it has earned a receipt (services/trial.py says whether the
result is proven), ``try_reference`` the reference alone, and ``op_output`` another op's output to
feed an input. None of them proves anything, nor writes a receipt."""
from __future__ import annotations

import numpy as np

from ..context import Context
from ..contract.package import OpPackage
from ..contract.signature import parse_signature
from ..errors import StudioError
from . import actions, trial

SPIKY = "core/signal/spiky_signal@1"


def param_specs(signature_text: str) -> list[tuple[str, int, int, int]]:
    """(name, default, lo, hi) for each integer parameter of the signature (a 7 for the story's w)."""
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


def op_output(ctx: Context, pkg: OpPackage, *, n: int = 1_000_000, seed: int = 1, progress=None) -> trial.TryReport:
    """Another op's output, to feed an input: ``pkg`` runs on the spiky signal of ``n`` samples (its
    first input; any other inputs get the same signal) at its default parameters — proven or not,
    as ``trial.run_unproven`` says."""
    x = next(iter(actions.run(ctx, actions.resolve(ctx, SPIKY), inputs={}, params={"n": int(n), "seed": int(seed)},
                              require_receipt=True).values()))
    sig = pkg.contract.signature
    inputs = {t.name: np.asarray(x) for t in sig.inputs}
    params = {name: default for name, default, _lo, _hi in param_specs(sig.text)}
    return trial.run_unproven(ctx, pkg, inputs=inputs, params=params, progress=progress)
