"""Per-output error bounds for the accumulating classes (docs/tolerance.md, "The bound, per output").

A `bound` is γ_k · Σ|terms| + u·|y| for *each output*, with k the number of terms that reach
that output and Σ|terms| their magnitudes — never the size of the largest input, which at
four million elements admits a quarter of the result as error. Where k comes from, in order:

1. the reference's own ``terms(inputs..., params)`` when it defines one (an array of the
   output's shape, or a number for every output);
2. the forward on all-ones inputs, in f64: for a sum, a dot product, a window sum or a scan
   this counts, per output, the terms that reach it (a scan's k grows with the prefix, i + 1);
   for a `reduction` at least ⌈inputs / outputs⌉ (a mean's forward on ones is 1, its sum has n
   terms);
3. when neither can be had, the largest input's size (the old, loose rule), said in the report.

Σ|terms| is the reference's ``magnitude`` or the forward on |inputs| in f64 (conformance.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..contract.package import OpPackage
from ..errors import StudioError
from ..trust.reference import References


def global_terms(arrays: dict) -> int:
    """The old rule, kept as the fallback: the size of the largest array."""
    return max([int(np.asarray(v).size) for v in arrays.values()] + [1])


def _per_output(out, names: list[str]) -> dict:
    if not isinstance(out, dict):
        out = {names[0]: out} if len(names) == 1 else dict(zip(names, out))
    return out


def forward_terms(refs: References, pkg: OpPackage, inputs: dict, params: dict,
                  expected: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """(k per output element for every output, where k came from)."""
    names = list(expected)
    fallback = global_terms(inputs)
    try:
        try:
            refs.function(pkg, "terms")
            has_terms = True
        except StudioError:
            has_terms = False
        if has_terms:
            out, source = _per_output(refs.call(pkg, "terms", inputs, params), names), "reference terms()"
        else:
            ones = {k: (np.ones_like(np.asarray(v, np.float64)) if np.asarray(v).dtype.kind == "f" or
                        str(np.asarray(v).dtype) == "bfloat16" else v) for k, v in inputs.items()}
            out, source = _per_output(refs.call(pkg, pkg.contract.reference_forward, ones, params), names), \
                "the forward on all-ones inputs"
        result = {}
        n_in = sum(int(np.asarray(v).size) for v in inputs.values() if np.asarray(v).dtype.kind != "i"
                   and np.asarray(v).dtype.kind != "u")
        for name, want in expected.items():
            k = np.abs(np.asarray(out[name], np.float64)).reshape(-1)
            k = np.broadcast_to(k, (want.size,)) if k.size == 1 else k
            if k.size != want.size or not np.all(np.isfinite(k)):
                raise ValueError(name)
            k = np.ceil(np.maximum(k, 1.0))
            if pkg.contract.tolerance.category == "reduction" and not has_terms:
                k = np.maximum(k, math.ceil(n_in / max(want.size, 1)))
            result[name] = np.minimum(k, fallback)     # never looser than the old global rule
        return result, source
    except (StudioError, ValueError, TypeError, KeyError):
        return {name: np.full(want.size, float(fallback)) for name, want in expected.items()}, \
            "the largest input's size (no per-output count could be had)"


def backward_terms(grads_of, inputs: dict, cts: dict, expected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """k per gradient element: the reference VJP on all-ones inputs and cotangents (``grads_of``
    maps (inputs, cotangents) to the gradients), at most the largest cotangent's size."""
    fallback = global_terms(cts)
    try:
        ones = {k: (np.ones_like(np.asarray(v)) if np.asarray(v).dtype.kind == "f" else v) for k, v in inputs.items()}
        out = grads_of(ones, {k: np.ones_like(v) for k, v in cts.items()})
        result = {}
        for name, want in expected.items():
            k = np.abs(np.asarray(out[name], np.float64)).reshape(-1)
            if k.size != want.size or not np.all(np.isfinite(k)):
                raise ValueError(name)
            result[name] = np.minimum(np.ceil(np.maximum(k, 1.0)), fallback)
        return result
    except (StudioError, ValueError, TypeError, KeyError):
        return {name: np.full(want.size, float(fallback)) for name, want in expected.items()}
