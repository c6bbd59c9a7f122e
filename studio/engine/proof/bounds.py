"""Per-output error bounds for the accumulating classes (docs/tolerance.md, "The bound, per output").

A `bound` is γ_{k+2} · Σ|terms| + u·|y| for *each output*, with k the number of terms that reach
that output and Σ|terms| their magnitudes — never the size of the largest input, which at
four million elements admits a quarter of the result as error. Where k comes from, in order:

1. the reference's own ``terms(inputs..., params)`` when it defines one: per output, a count (an
   array of the output's shape, or one number), or a record ``{"terms": k, "magnitude": Σ|terms|,
   "exp": {"weight": ..., "weighted_arg": ...}, ...}`` from its own f64 evaluation of that output,
   with the weights of each WGSL built-in a `bound(fn, ...)` names (tolerance.BOUND_ACCURACY);
   a device VJP's, from ``<vjp function>_terms(inputs..., cotangents..., params)``, per input;
2. the forward on all-ones inputs (the VJP on all-ones inputs and cotangents), in f64, but only
   where that is a count: whole numbers, none negative — for a sum, a dot product, a window sum
   or a scan it counts, per output, the terms that reach it (a scan's k grows with the prefix,
   i + 1); for a `reduction` at least ⌈inputs / outputs⌉ (a mean's forward on ones is 1, its
   sum has n terms). Where terms cancel (a softmax's VJP on ones is 0) it counts nothing, and
   the case is refused with a request for the hook, never judged with k = 1;
3. when the reference cannot be asked, the largest input's size (the old, loose rule), said so.

Σ|terms| is the record's magnitude, else the reference's ``magnitude`` or the forward on |inputs|
in f64 (conformance.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..contract.package import OpPackage
from ..contract.tolerance import BOUND_FIELDS, U32, Tolerance, builtin_allowance
from ..errors import StudioError
from ..trust.reference import References

COUNTED = {"reduction", "contraction", "scan"}      # categories whose all-ones evaluation counts terms


@dataclass
class OutputBound:
    """One output's (or gradient's) bound inputs, per element: k, and from a terms() record the
    magnitude and WGSL's allowance for the named built-ins (None: not given)."""
    terms: np.ndarray
    magnitude: np.ndarray | None = None
    allowance: np.ndarray | None = None


def global_terms(arrays: dict) -> int:
    """The old rule, kept as the fallback: the size of the largest array."""
    return max([int(np.asarray(v).size) for v in arrays.values()] + [1])


def _per_output(out, names: list[str]) -> dict:
    if not isinstance(out, dict):
        out = {names[0]: out} if len(names) == 1 else dict(zip(names, out))
    return out


def _flat(v, size: int, what: str) -> np.ndarray:
    a = np.abs(np.asarray(v, np.float64)).reshape(-1)
    a = np.broadcast_to(a, (size,)) if a.size == 1 else a
    if a.size != size or not np.all(np.isfinite(a)):
        raise StudioError(f"{what} has {a.size} element(s) or a non-finite one, for {size} output element(s)")
    return a


def record(raw, expected: np.ndarray, tol: Tolerance, what: str, fallback: int) -> OutputBound:
    """One output's entry of a terms() reply: a count, or a record (module docstring). A record
    counts the roundings before the output's last operation; that one's u·|y| is added here (the
    comparison adds another u·|y| for the reference's own rounding to f32)."""
    size = expected.size
    if isinstance(raw, dict) and "terms" in raw:
        k = np.ceil(_flat(raw["terms"], size, f"{what} 'terms'"))      # a record's k is its own (k + 8 > cols)
        mag = _flat(raw["magnitude"], size, f"{what} 'magnitude'") if "magnitude" in raw else None
        with np.errstate(invalid="ignore", over="ignore"):
            allowance = U32 * np.nan_to_num(np.abs(expected.astype(np.float64).reshape(-1)), posinf=0.0)
        for fn in tol.builtins:
            sums = raw.get(fn)
            missing = [f for f in BOUND_FIELDS[fn] if not isinstance(sums, dict) or f not in sums]
            if missing:
                raise StudioError(f"{what} gives no '{fn}': {{{', '.join(repr(f) for f in missing)}}} though the "
                                  f"class {tol} names it")
            allowance = allowance + _flat(builtin_allowance(fn, {f: _flat(sums[f], size, f"{what} {fn}.{f}")
                                                                 for f in BOUND_FIELDS[fn]}), size, what)
        return OutputBound(k, mag, allowance)
    if tol.builtins:
        raise StudioError(f"{what} is a count; the class {tol} needs a record with the weights of "
                          f"{', '.join(tol.builtins)} (docs/tolerance.md)")
    return OutputBound(np.minimum(np.ceil(_flat(raw, size, what)), fallback))


def _counts(k: np.ndarray, what: str, hook: str, magnitude=None) -> np.ndarray:
    """The all-ones evaluation as a count (its sign aside: a negated sum counts too): whole numbers,
    and 0 only where no term reaches the element (its magnitude is 0); else the terms cancel."""
    k = np.abs(k)
    zero = (k == 0) & (np.asarray(magnitude, np.float64).reshape(-1) > 0) if magnitude is not None else False
    bad = np.flatnonzero((np.abs(k - np.round(k)) > 1e-6 * np.maximum(k, 1)) | zero)
    if bad.size:
        i = int(bad[0])
        raise StudioError(f"{what} on all-ones inputs is {k[i]:.6g} at element {i}, not a count of terms (they "
                          f"cancel, or are scaled): its bound cannot be counted this way; define {hook}(...) "
                          "in the reference (docs/tolerance.md, \"The bound, per output\")")
    return np.maximum(k, 1.0)


def _ones(arrays: dict) -> dict:
    return {k: (np.ones_like(np.asarray(v, np.float64)) if np.asarray(v).dtype.kind == "f" or
                str(np.asarray(v).dtype) == "bfloat16" else v) for k, v in arrays.items()}


def forward_bounds(refs: References, pkg: OpPackage, inputs: dict, params: dict,
                   expected: dict[str, np.ndarray], magnitudes: dict | None = None
                   ) -> tuple[dict[str, OutputBound], str]:
    """(an OutputBound per output, where k came from). Raises StudioError when the reference's
    terms() answers wrongly, or when no count can honestly be had (module docstring)."""
    tol = pkg.contract.tolerance
    names = list(expected)
    fallback = global_terms(inputs)
    try:
        refs.function(pkg, "terms")
        has_terms = True
    except StudioError:
        has_terms = False
    if has_terms:
        raw = refs.call(pkg, "terms", inputs, params)
        if len(names) == 1 and not (isinstance(raw, dict) and names[0] in raw and "terms" not in raw):
            raw = {names[0]: raw}
        if not isinstance(raw, dict) or any(n not in raw for n in names):
            raise StudioError(f"reference terms() must answer for every output ({', '.join(names)})")
        return {n: record(raw[n], want, tol, f"terms() for output '{n}'", fallback)
                for n, want in expected.items()}, "reference terms()"
    if tol.builtins or tol.category not in COUNTED:
        raise StudioError(f"the class {tol} for category '{tol.category}' is judged from the reference's terms(), "
                          "and it defines none")
    try:
        out = _per_output(refs.call(pkg, pkg.contract.reference_forward, _ones(inputs), params), names)
        for n, want in expected.items():
            _flat(out[n], want.size, f"the forward for '{n}'")
    except (StudioError, ValueError, TypeError, KeyError):
        return {name: OutputBound(np.full(want.size, float(fallback))) for name, want in expected.items()}, \
            "the largest input's size (no per-output count could be had)"
    n_in = sum(int(np.asarray(v).size) for v in inputs.values() if np.asarray(v).dtype.kind not in "iu")
    result = {}
    for name, want in expected.items():
        k = np.asarray(out[name], np.float64).reshape(-1)
        k = np.broadcast_to(k, (want.size,)) if k.size == 1 else k
        if tol.category == "reduction":     # a reduction's forward on ones need not count (a mean's is 1)
            k = np.maximum(np.ceil(np.maximum(np.abs(k), 1.0)), math.ceil(n_in / max(want.size, 1)))
        else:
            k = _counts(k, f"the forward's output '{name}'", "terms", (magnitudes or {}).get(name))
        result[name] = OutputBound(np.minimum(k, fallback))   # never looser than the old global rule
    return result, "the forward on all-ones inputs"


def forward_terms(refs: References, pkg: OpPackage, inputs: dict, params: dict,
                  expected: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """(k per output element for every output, where k came from): forward_bounds' counts."""
    bounds, source = forward_bounds(refs, pkg, inputs, params, expected)
    return {name: b.terms for name, b in bounds.items()}, source


def backward_bounds(tol: Tolerance, hook, grads_of, inputs: dict, cts: dict,
                    expected: dict[str, np.ndarray], magnitudes: dict | None = None) -> dict[str, OutputBound]:
    """An OutputBound per gradient element. ``hook(inputs, cotangents)``: the reference's
    ``<vjp>_terms`` reply ({input: count or record}, keyed by gradient names d<input>), or None
    when it defines none; ``grads_of`` maps (inputs, cotangents) to the gradients. Without the
    hook, the VJP on all-ones inputs and cotangents, where that is a count (module docstring)."""
    fallback = global_terms(cts)
    raw = hook(inputs, cts)
    if raw is not None:
        return {name: record(raw[name], want, tol, f"vjp terms for gradient '{name}'", fallback)
                for name, want in expected.items()}
    if tol.builtins:
        raise StudioError(f"the backward class {tol} is judged from the reference's <vjp>_terms(), and it defines none")
    out = grads_of(_ones(inputs), {k: np.ones_like(v) for k, v in cts.items()})
    result = {}
    for name, want in expected.items():
        k = np.asarray(out[name], np.float64).reshape(-1)
        if k.size != want.size:
            raise StudioError(f"the reference VJP's '{name}' has {k.size} elements on all-ones inputs, not {want.size}")
        result[name] = OutputBound(np.minimum(_counts(k, f"the reference VJP's '{name}'", "vjp_terms",
                                                      (magnitudes or {}).get(name)), fallback))
    return result


def backward_terms(grads_of, inputs: dict, cts: dict, expected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """k per gradient element from the VJP on all-ones inputs and cotangents (backward_bounds
    without a hook)."""
    b = backward_bounds(Tolerance("bound"), lambda i, c: None, grads_of, inputs, cts, expected)
    return {name: v.terms for name, v in b.items()}
