"""Gradcheck: the declared backward against the author's own forward, by central differences on
the reference path in f64, with kinks skipped (never averaged across) and mandatory negative
controls. docs/gradients.md describes the method; STORY §15 the report's shape.

- forward: the author's reference; VJP: the declared backward on the reference path (for a
  composite op, reverse mode over its steps' reference VJPs).
- probes: sampled Jacobian entries (one-hot u and v) plus random directions vᵀ·J·u, at an edge
  point (kinks planted) and a plain point (studio/engine/proof/gradpoints.py).
- numeric = (g(h) - g(-h)) / 2h with g(t) = vᵀ f(x + t u); error = |analytic - numeric| /
  max(1, |analytic|); bound: max error < the gradient tolerance (declared, else 1e-6).
- kinks: generic (the one-sided slopes at h, h/2 and h/4 disagree beyond rounding and beyond
  what curvature explains), plus the contract's predicate `[backward] kinks` if declared.
- negative controls: sign flip, scale by 1 + 1e-2, shift to the neighbouring index, drop one
  element, permute — each must be REJECTED, or the verdict is inconclusive.
"""
from __future__ import annotations

import ast
import math

import numpy as np

from ..context import Context
from ..errors import StudioError
from ..grad.vjp import cotangent_name, forward64, reference_vjp, vjp_inputs
from ..precision import is_float
from .gradpoints import choose, points
from .gradreport import MIN_COUNTED, MUTANTS, GradcheckReport, Mutant, Probe

DEFAULT_H = 1e-3
DEFAULT_TOLERANCE = 1e-6
SCALE_DELTA = 1e-2
ROWS = 12                 # one-hot cotangents per point
NONZERO_PER_ROW = 3       # entries per row where the declared VJP is non-zero ...
ZERO_PER_ROW = 1          # ... and where it is zero
DIRECTIONS = 12           # random-direction probes per point
ROUNDING = 16 * 68        # ulps of g per sample x the kink statistic's rounding gain
KINK_RATIO = 0.1          # kinks give K >= 0.43 |J(h)|; smooth curvature gives K ~ h^2 |g''''/g''| |J(h)|
def gradcheck(ctx: Context, pkg, params: dict | None = None, *, h: float = DEFAULT_H, seed: int = 0,
              tolerance: float | None = None, inputs: dict | None = None) -> GradcheckReport:
    """Check pkg's declared backward against its reference forward. params: given values (the
    rest are chosen); inputs: check at this one point instead of the engine's two."""
    c = pkg.contract
    sig = c.signature
    if c.backward.kind == "nondifferentiable":
        raise StudioError(f"{pkg.id} is declared nondifferentiable: there is no backward to check",
                          file=pkg.manifest_path, field="backward.text",
                          hint="training through it is refused; declare a vjp to make it differentiable")
    if not (h > 0 and math.isfinite(h)):
        raise StudioError(f"h = {h} must be a positive number", field="--h")
    diff = [n for n in vjp_inputs(pkg) if is_float(sig.input(n).dtype)]
    if not diff:
        raise StudioError(f"{pkg.id}: no f32 input has a VJP", file=pkg.manifest_path, field="backward.text")
    rng = np.random.default_rng([seed, 4])
    if inputs is None:
        params, shapes = choose(sig, dict(params or {}))
        pts = points(sig, params, shapes, diff, h, rng)
        labels = ["edge (near-ties, zeros, parameter values planted within h)", "plain (normal values)"]
    else:
        params = dict(params or {})
        shapes = {k: tuple(np.shape(v)) for k, v in inputs.items()}
        sig.resolve(shapes, params)
        pts = [("given", {k: np.asarray(v, np.float64) if is_float(sig.input(k).dtype) else np.asarray(v)
                          for k, v in inputs.items()})]
        labels = ["the given inputs"]
    if tolerance is not None:
        tol, source = float(tolerance), "override"
    elif c.gradient_tolerance is not None:
        tol, source = c.gradient_tolerance, "declared"
    else:
        tol, source = DEFAULT_TOLERANCE, "default"
    rep = GradcheckReport(pkg.id, pkg.hash, dict(params), {k: list(v) for k, v in shapes.items()}, h, seed, tol,
                          source, _describe_forward(pkg), _describe_vjp(pkg), c.subgradient,
                          "order crossing" if c.tolerance.category in ("selection", "permutation") else "kink",
                          ["generic: the generic rule, one-sided slopes at h, h/2, h/4 disagreeing beyond rounding"]
                          + ([f"predicate: the contract's predicate {c.kinks}()"] if c.kinks else []),
                          labels, [], [])
    for name, x in pts:
        rep.probes += _probe_point(ctx, pkg, name, x, params, diff, h, rng)
    rep.mutants = _negative_controls(rep, diff, seed)
    _verdict(rep)
    return rep


def _probe_point(ctx: Context, pkg, point: str, x: dict, params: dict, diff: list[str], h: float,
                 rng) -> list[Probe]:
    sig = pkg.contract.signature
    f = lambda arrays: forward64(ctx, pkg, arrays, params)
    y0 = f(x)
    outs = [(o.name, y0[o.name].size) for o in sig.outputs]
    flags = _predicate(ctx, pkg, x, params, h, y0)
    probes: list[Probe] = []

    def vjp(v: dict) -> dict:
        return reference_vjp(ctx, pkg, x, params, {cotangent_name(k): a for k, a in v.items()})

    total = sum(n for _, n in outs)
    for r in rng.permutation(total)[:ROWS]:
        k, o = int(r), 0
        while k >= outs[o][1]:
            k, o = k - outs[o][1], o + 1
        oname = outs[o][0]
        v = {name: np.zeros_like(y0[name]) for name in y0}
        v[oname].reshape(-1)[k] = 1.0
        grads = vjp(v)
        for name in diff:
            flat = grads[name].reshape(-1)
            nz, z = np.flatnonzero(flat != 0), np.flatnonzero(flat == 0)
            picks = list(rng.permutation(nz)[:NONZERO_PER_ROW]) + list(rng.permutation(z)[:ZERO_PER_ROW])
            for j in picks:
                u = {name: np.zeros_like(x[name])}
                u[name].reshape(-1)[j] = 1.0
                p = Probe(point, "entry", name, int(j), oname, k, float(flat[j]), 0.0, grads=grads)
                probes.append(_measure(p, f, x, u, v, y0, h, flags))
    for _ in range(DIRECTIONS):
        u = {n: rng.standard_normal(np.shape(x[n])) for n in diff}
        top = max(float(np.max(np.abs(a), initial=0)) for a in u.values()) or 1.0
        u = {n: a / top for n, a in u.items()}            # max |u| = 1: every input moves at most h
        v = {name: rng.standard_normal(a.shape) for name, a in y0.items()}
        grads = vjp(v)
        p = Probe(point, "direction", None, None, None, None, 0.0, 0.0, grads=grads, u=u)
        p.analytic = p.dot(grads)
        probes.append(_measure(p, f, x, u, v, y0, h, flags))
    return probes


def _measure(p: Probe, f, x: dict, u: dict, v: dict, y0: dict, h: float, flags) -> Probe:
    def g(t: float) -> tuple[float, float]:
        y = f({**x, **{n: x[n] + t * a for n, a in u.items()}}) if t else y0
        terms = [v[k] * y[k] for k in v]
        return float(sum(np.sum(a) for a in terms)), float(sum(np.sum(np.abs(a)) for a in terms))
    s = {t: g(t) for t in (0.0, h, -h, h / 2, -h / 2, h / 4, -h / 4)}
    p.numeric = (s[h][0] - s[-h][0]) / (2 * h)
    reasons = []
    if not all(math.isfinite(a) and math.isfinite(b) for a, b in s.values()):
        reasons.append("generic: a non-finite value within h")
    else:
        jump = lambda d: (s[d][0] - 2 * s[0.0][0] + s[-d][0]) / d     # one-sided slopes' disagreement
        K = max(abs(jump(h) - 2 * jump(h / 2)), abs(jump(h) - 4 * jump(h / 4)))
        rounding = ROUNDING * np.finfo(np.float64).eps * max(b for _, b in s.values()) / h
        if K > rounding + KINK_RATIO * abs(jump(h)):
            reasons.append(f"generic: one-sided slopes disagree by {abs(jump(h)):.3g}")
    if flags is not None and any(np.any(flags[k][np.asarray(v[k]) != 0]) for k in v if k in flags):
        reasons.append("predicate: flags an output this probe reads")
    if reasons:
        p.skipped, p.reason = True, "; ".join(reasons)
    return p


def _predicate(ctx: Context, pkg, x: dict, params: dict, h: float, y0: dict) -> dict | None:
    """The contract's kink predicate: kinks(inputs, *, params, h) -> per output element, True
    where moving every input by at most h can cross a kink of that output."""
    fn = pkg.contract.kinks
    if not fn:
        return None
    out = ctx.references.call_as_given(pkg, fn, dict(x), params, h=h)
    names = list(y0)
    if not isinstance(out, dict):
        out = {names[0]: out}
    flags = {}
    for k in names:
        a = np.asarray(out.get(k, np.zeros(y0[k].shape, bool)), dtype=bool)
        if a.size != y0[k].size:
            raise StudioError(f"kink predicate {fn} gives {a.size} flags for output '{k}' of {y0[k].size} elements",
                              file=pkg.reference_path, field="backward.kinks",
                              hint="return one boolean per output element")
        flags[k] = a.reshape(y0[k].shape)
    return flags


# ------------------------------------------------------------------ negative controls

def _mutate(kind: str, g: np.ndarray, perm: dict) -> np.ndarray:
    flat = g.reshape(-1)
    if kind == 0:
        out = -flat
    elif kind == 1:
        out = flat * (1 + SCALE_DELTA)
    elif kind == 2:
        out = np.roll(flat, 1)
    elif kind == 3:
        out = flat.copy()
        if out.size:
            out[int(np.argmax(np.abs(out)))] = 0.0
    else:
        out = flat[perm[flat.size]]
    return out.reshape(g.shape)


def _negative_controls(rep: GradcheckReport, diff: list[str], seed: int) -> list[Mutant]:
    perm = {}
    for p in rep.probes:
        for a in p.grads.values():
            if a.size not in perm:
                q = np.random.default_rng([seed, a.size, 17]).permutation(a.size)
                perm[a.size] = q if a.size < 2 or np.any(q != np.arange(a.size)) else np.roll(q, 2)
    counted = rep.counted
    mutants = []
    for kind, name in enumerate(MUTANTS):
        for target in diff:
            changed, worst = False, 0.0
            for p in rep.probes:
                g = dict(p.grads)
                g[target] = _mutate(kind, p.grads[target], perm)
                changed |= not np.array_equal(g[target], p.grads[target])
                if not p.skipped:
                    a = p.dot(g)
                    worst = max(worst, abs(a - p.numeric) / max(1.0, abs(a)))
            fate = "n/a" if not changed else "REJECTED" if counted and worst > rep.tolerance else "passed"
            mutants.append(Mutant(name, target if len(diff) > 1 else None, fate, worst))
    return mutants


def _verdict(rep: GradcheckReport) -> None:
    n = len(rep.counted)
    passed = [m.label for m in rep.mutants if m.fate == "passed"]
    if n and rep.max_error > rep.tolerance:
        worst = max(rep.counted, key=lambda p: p.error)
        where = (f"d{worst.output}[{worst.out_index}]/d{worst.input}[{worst.index}]" if worst.kind == "entry"
                 else "a random direction")
        rep.verdict, rep.why = "fail", (f"{where} at the {worst.point} point: analytic {worst.analytic:.6g}, "
                                        f"numeric {worst.numeric:.6g}")
    elif n < MIN_COUNTED:
        rep.verdict, rep.why = "inconclusive", f"only {n} probes left after skipping kinks (need {MIN_COUNTED})"
    elif passed:
        rep.verdict, rep.why = "inconclusive", f"this check cannot fail: {', '.join(passed)} passed"
    elif not any(m.fate == "REJECTED" for m in rep.mutants):
        rep.verdict, rep.why = "inconclusive", "this check cannot fail: no corruption changes the vjp here"
    else:
        rep.verdict, rep.why = "pass", ""


# ------------------------------------------------------------------ what the report says

def _docline(pkg, fn: str) -> str | None:
    """First docstring line of a reference function, read with ast (nothing is executed)."""
    try:
        tree = ast.parse(pkg.reference_source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == fn:
            doc = ast.get_docstring(node)
            return doc.strip().splitlines()[0].rstrip(".") if doc else None
    return None


def _describe_forward(pkg) -> str:
    c = pkg.contract
    return f"author reference ({_docline(pkg, c.reference_forward) or c.reference_file + ': ' + c.reference_forward})"


def _describe_vjp(pkg) -> str:
    bw = pkg.contract.backward
    if bw.kind == "composite":
        return f"derived by reverse mode over the composition ({pkg.contract.composite.chain()})"
    parts = []
    for r in bw.rules:
        if r.form == "route":
            parts.append(f"cotangent {r.cotangent} routed to the index {r.index}() gives")
        else:
            parts.append(_docline(pkg, r.function) or f"reference {r.function}()")
    return "declared backward -- " + "; ".join(parts)
