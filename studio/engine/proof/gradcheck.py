"""Gradcheck: the declared backward against the author's own forward, by central differences on
the reference path in f64, with kinks skipped (never averaged across) and mandatory negative
controls, over the parameter space and several sizes. docs/gradients.md describes the method;
docs/requirements.md S15 the report's shape.

- forward: the author's reference; VJP: the declared backward on the reference path (for a
  composite op, reverse mode over its steps' reference VJPs).
- sites (studio/engine/proof/gradpoints.py): the main point (an edge point with kinks planted and
  a plain one, full probes); elements planted at several distances from every kink; then one
  point per value of every param (all values of a small integer domain, a float across its
  domain) and per size, with fewer probes each.
- probes: sampled Jacobian entries (one-hot u and v), random directions vᵀ·J·u, and planted
  elements (one-hot u, random v).
- numeric = (g(h) - g(-h)) / 2h with g(t) = vᵀ f(x + t u); error = |analytic - numeric| /
  max(1, |analytic|); bound: max error < the gradient tolerance (declared, else 1e-6).
- kinks: generic (the one-sided slopes at h, h/2 and h/4 disagree beyond rounding and beyond
  what curvature explains), plus the contract's predicate `[backward] kinks` if declared; a probe
  whose outputs are too large for h to resolve its derivative is skipped too (rounding).
- ties: where no derivative exists, a selection op's convention "the cotangent goes to the element
  the forward selected" is checked directly, on inputs with a +0.0/-0.0 tie.
- negative controls: sign flip, scale by 1 + 1e-2, shift to the neighbouring index, drop one
  element, permute — each must be REJECTED, or the verdict is inconclusive.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ..context import Context
from ..errors import StudioError
from ..grad.vjp import cotangent_name, forward64, reference_vjp, vjp_inputs
from ..precision import is_float
from . import gradpoints as gp
from .gradcoverage import summarize
from .sizes import axis_workgroups
from .gradreport import (
    MIN_COUNTED,
    MUTANTS,
    GradcheckReport,
    Mutant,
    Probe,
    describe_forward,
    describe_vjp,
)

DEFAULT_H = 1e-3
DEFAULT_TOLERANCE = 1e-6
SCALE_DELTA = 1e-2
FULL = (12, 3, 1, 12)     # per point: one-hot cotangents, entries where the VJP row is non-zero, where
SWEEP = (2, 2, 1, 2)      # it is zero, random directions (FULL at the main point, SWEEP elsewhere)
SWEEP_PLANTS = 4          # planted elements probed at a sweep point, from 3 h on (a kink predicate
SWEEP_START = 3.0         # may flag up to 2 h: a point of one output must not lose its every probe)
ROUNDING = 16 * 68        # ulps of g per sample x the kink statistic's rounding gain
KINK_RATIO = 0.1          # kinks give K >= 0.43 |J(h)|; smooth curvature gives K ~ h^2 |g''''/g''| |J(h)|
RESOLUTION = 4            # a central difference is uncertain by about this many eps * sum|v f| / h
SELECTED = re.compile(r"\bselect(ed|s|ion)?\b", re.IGNORECASE)


def gradcheck(ctx: Context, pkg, params: dict | None = None, *, h: float = DEFAULT_H, seed: int = 0,
              tolerance: float | None = None, inputs: dict | None = None) -> GradcheckReport:
    """Check pkg's declared backward against its reference forward. params: given values (the rest
    are swept over their domains); inputs: check at this one point instead of the engine's."""
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
    given = dict(params or {})
    if inputs is None:
        main, shapes = gp.choose(sig, given)
        pts = gp.points(sig, main, shapes, diff, h, rng)
        labels = ["edge (near-ties, zeros, parameter values planted within h)", "plain (normal values)"]
    else:
        main, shapes = given, {k: tuple(np.shape(v)) for k, v in inputs.items()}
        sig.resolve(shapes, main)
        pts = [("given", {k: np.asarray(v, np.float64) if is_float(sig.input(k).dtype) else np.asarray(v)
                          for k, v in inputs.items()})]
        labels = ["the given inputs"]
    if tolerance is not None:
        tol, source = float(tolerance), "override"
    elif c.gradient_tolerance is not None:
        tol, source = c.gradient_tolerance, "declared"
    else:
        tol, source = DEFAULT_TOLERANCE, "default"
    crossing = c.tolerance.category in ("selection", "permutation")
    rep = GradcheckReport(pkg.id, pkg.hash, dict(main), {k: list(v) for k, v in shapes.items()}, h, seed, tol,
                          source, describe_forward(pkg), describe_vjp(pkg), c.subgradient,
                          "order crossing" if crossing else "kink",
                          ["generic: the generic rule, one-sided slopes at h, h/2, h/4 disagreeing beyond rounding"]
                          + ([f"predicate: the contract's predicate {c.kinks}()"] if c.kinks else []),
                          labels, [], [], tie_rule=_tie_rule(pkg))
    rep.sites.append({"kind": "main" if inputs is None else "given", "params": dict(main),
                      "shapes": {k: list(v) for k, v in shapes.items()}})
    for name, x in pts:
        rep.probes += _probe_point(ctx, pkg, rep, 0, name, x, main, diff, h, rng, FULL)
    values = {}
    if inputs is None:                    # kinks, ties, then the parameter space and the sizes
        ties = rep.tie_rule.startswith("the convention")
        _kink_site(ctx, pkg, rep, main, diff, h, rng, crossing)
        if ties:
            _ties_at(ctx, pkg, rep, 0, main, shapes, diff, h, rng)
        values = gp.param_values(sig, main, given, rng)
        for i, combo in enumerate(gp.sweep(sig, main, values)):
            for extra in (gp.SIZE_STEPS[1:] if i == 0 else [gp.SIZE_STEPS[i % len(gp.SIZE_STEPS)]]):
                at = gp.shapes_at(sig, combo, extra)
                if at is not None and not (combo == main and at == shapes):
                    _sweep_site(ctx, pkg, rep, combo, at, diff, h, rng, crossing, ties)
        for at in _size_classes(pkg, main):   # past two workgroups; every other dim at 1, 2, 3, 4
            if at != shapes:
                _sweep_site(ctx, pkg, rep, main, at, diff, h, rng, crossing, ties)
    rep.mutants = _negative_controls(rep, diff, seed)
    _verdict(rep)
    rep.coverage = summarize(rep, values, given)
    return rep


def _size_classes(pkg, main: dict) -> list[dict]:
    sig, k = pkg.contract.signature, pkg.contract.kernel
    past = gp.WORKGROUPS_PAST * (k.workgroup_size if k is not None else 64) + 1
    out = [gp.shapes_at(sig, main, past)] + gp.extreme_shapes(sig, main, axis_workgroups(pkg.contract))
    out += [gp.shapes_at(sig, main, gp.EXTRA, {d: v}) for d in gp.other_dims(sig) for v in gp.DIM_CLASSES]
    seen, unique = [], []
    for at in out:
        if at is not None and at not in seen:
            seen.append(at)
            unique.append(at)
    return unique


def _tie_rule(pkg) -> str:
    """Whether ties are checked against the element the forward selected, and why (or why not)."""
    c = pkg.contract
    if c.tolerance.category != "selection":
        return ""
    if any(r.form == "route" for r in c.backward.rules):
        return "the convention of a route rule: the cotangent goes to the index it names"
    if c.subgradient is None:
        return "the convention of a selection without a declared subgradient: to the element the forward selected"
    if SELECTED.search(c.subgradient):
        return "the convention in op.toml: the cotangent goes to the element the forward selected"
    return "the subgradient convention does not say the cotangent goes to the element the forward selected"


def _probe_point(ctx: Context, pkg, rep: GradcheckReport, site: int, point: str, x: dict, params: dict,
                 diff: list[str], h: float, rng, budget: tuple, plants: list | None = None) -> list[Probe]:
    sig = pkg.contract.signature
    rows, nonzero, zero, directions = budget
    def f(arrays):
        return forward64(ctx, pkg, arrays, params)
    y0 = f(x)
    outs = [(o.name, y0[o.name].size) for o in sig.outputs]
    flags = _predicate(ctx, pkg, x, params, h, y0)
    probes: list[Probe] = []

    def vjp(v: dict) -> dict:
        return reference_vjp(ctx, pkg, x, params, {cotangent_name(k): a for k, a in v.items()})

    def one_hot(name: str, j: int) -> dict:
        u = {name: np.zeros_like(x[name])}
        u[name].reshape(-1)[j] = 1.0
        return u

    total = sum(n for _, n in outs)
    for r in rng.permutation(total)[:rows]:
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
            for j in list(rng.permutation(nz)[:nonzero]) + list(rng.permutation(z)[:zero]):
                p = Probe(point, "entry", name, int(j), oname, k, float(flat[j]), 0.0, grads=grads, site=site)
                probes.append(_measure(p, f, x, one_hot(name, int(j)), v, y0, h, flags, rep.tolerance))
    for _ in range(directions):
        u = {n: rng.standard_normal(np.shape(x[n])) for n in diff}
        top = max(float(np.max(np.abs(a), initial=0)) for a in u.values()) or 1.0
        u = {n: a / top for n, a in u.items()}            # max |u| = 1: every input moves at most h
        v = {name: rng.standard_normal(a.shape) for name, a in y0.items()}
        grads = vjp(v)
        p = Probe(point, "direction", None, None, None, None, 0.0, 0.0, grads=grads, u=u, site=site)
        p.analytic = p.dot(grads)
        probes.append(_measure(p, f, x, u, v, y0, h, flags, rep.tolerance))
    if plants:
        v = {name: rng.standard_normal(a.shape) for name, a in y0.items()}
        grads = vjp(v)
        for name, j, kink, d in plants:
            p = Probe(point, "plant", name, j, None, None, float(grads[name].reshape(-1)[j]), 0.0, grads=grads,
                      site=site, note=f"{d:+.3g} from {kink}")
            probes.append(_measure(p, f, x, one_hot(name, j), v, y0, h, flags, rep.tolerance))
    return probes


def _kink_site(ctx, pkg, rep, params, diff, h, rng, crossing) -> None:
    """Elements planted at every distance of the ladder from every kink, each probed."""
    sig = pkg.contract.signature
    kinds = len(gp.anchors(sig, params, h)) + int(crossing)
    need = 2 * kinds * 2 * len(gp.distances(h, 1.0, np.random.default_rng(0))) + 2
    shapes = gp.shapes_at(sig, params, max(gp.EXTRA, need)) or {k: tuple(v) for k, v in rep.shapes.items()}
    x, planted = gp.plants(sig, params, shapes, diff, h, rng, ties=crossing)
    if planted:
        rep.sites.append({"kind": "kinks", "params": dict(params), "shapes": {k: list(v) for k, v in shapes.items()}})
        rep.probes += _probe_point(ctx, pkg, rep, len(rep.sites) - 1, "kinks", x, params, diff, h, rng,
                                   (0, 0, 0, 0), planted)


def _sweep_site(ctx, pkg, rep, params, shapes, diff, h, rng, crossing, ties) -> None:
    """A point of the sweep: plain values with a few planted elements, fewer probes."""
    sig = pkg.contract.signature
    rep.sites.append({"kind": "sweep", "params": dict(params), "shapes": {k: list(v) for k, v in shapes.items()}})
    i = len(rep.sites) - 1
    x, planted = gp.plants(sig, params, shapes, diff, h, rng, ties=crossing, limit=SWEEP_PLANTS, start=SWEEP_START)
    rep.probes += _probe_point(ctx, pkg, rep, i, "sweep", x, params, diff, h, rng, SWEEP, planted)
    if ties:
        _ties_at(ctx, pkg, rep, i, params, shapes, diff, h, rng)


def _measure(p: Probe, f, x: dict, u: dict, v: dict, y0: dict, h: float, flags, tol: float) -> Probe:
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
        size = max(b for _, b in s.values())
        def jump(d):
            return (s[d][0] - 2 * s[0.0][0] + s[-d][0]) / d     # one-sided slopes' disagreement
        K = max(abs(jump(h) - 2 * jump(h / 2)), abs(jump(h) - 4 * jump(h / 4)))
        rounding = ROUNDING * np.finfo(np.float64).eps * size / h
        if K > rounding + KINK_RATIO * abs(jump(h)):
            reasons.append(f"generic: one-sided slopes disagree by {abs(jump(h)):.3g}")
        if RESOLUTION * np.finfo(np.float64).eps * size / h > 0.5 * tol * max(1.0, abs(p.analytic)):
            reasons.append(f"rounding: outputs of {size:.3g} leave no digits for a step of h")
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


# ------------------------------------------------------------------ ties: the convention, checked directly

def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, np.float64)).reshape(-1).view(np.uint64)


def _ties_at(ctx: Context, pkg, rep: GradcheckReport, site: int, params: dict, shapes: dict, diff, h, rng) -> None:
    """On each tie case: every output whose bits are those of exactly one input element selected
    that element (of none, and of a parameter: a parameter). The VJP of a random cotangent over
    those outputs must then be, per input element, the sum of the cotangents of the outputs that
    selected it; where it is not, one-hot cotangents find the output whose cotangent went astray."""
    sig = pkg.contract.signature
    pbits = np.array(sorted({int(b) for p in sig.params if p.dtype not in ("u32", "i32")
                             for b in _bits([params[p.name]])}), np.uint64)
    floats = [t.name for t in sig.inputs if is_float(t.dtype)]
    for label, x, (tied, i, j) in gp.tie_cases(sig, shapes, diff, h, rng):
        y = forward64(ctx, pkg, x, params)
        pool = np.concatenate([_bits(x[n]) for n in floats])
        where = np.concatenate([np.full(np.size(x[n]), k) for k, n in enumerate(floats)])
        index = np.concatenate([np.arange(np.size(x[n])) for n in floats])
        keys, first, count = np.unique(pool, return_index=True, return_counts=True)
        v = {o: np.zeros(a.size) for o, a in y.items()}
        want = {n: np.zeros(np.size(x[n])) for n in diff}
        chosen, reached = [], []                # (output, flat index, (input, flat index) or None)
        for o, a in y.items():
            b = _bits(a)
            at = np.clip(np.searchsorted(keys, b), 0, len(keys) - 1)
            found, param = keys[at] == b, np.isin(b, pbits)
            mine = np.flatnonzero(found & (count[at] == 1) & ~param)   # exactly one input element has its bits
            ks = np.concatenate([mine, np.flatnonzero(~found & param)])  # ... or only a parameter (no input gets dy)
            v[o][ks] = rng.standard_normal(ks.size)
            src_in, src_ix = where[first[at[mine]]], index[first[at[mine]]]
            for fi, n in enumerate(floats):
                if n in want:
                    np.add.at(want[n], src_ix[src_in == fi], v[o][mine[src_in == fi]])
            hit = (src_in == floats.index(tied)) & np.isin(src_ix, (i, j))
            reached += [(o, int(k), (tied, int(m))) for k, m in zip(mine[hit], src_ix[hit])]
            chosen += [(o, int(k), (floats[fi], int(m))) for k, fi, m in zip(mine[~hit][:8], src_in[~hit][:8],
                                                                            src_ix[~hit][:8])]
            chosen += [(o, int(k), None) for k in np.flatnonzero(~found & param)[:8]]
        got = _vjp_flat(ctx, pkg, x, params, {o: v[o].reshape(y[o].shape) for o in y})
        err = max((float(np.max(np.abs(got[n] - want[n]), initial=0.0)) / max(1.0, float(np.max(np.abs(want[n]), initial=0)))
                   for n in diff), default=0.0)
        case = {"site": site, "params": dict(params), "case": label, "outputs": int(sum(np.count_nonzero(a) for a in v.values())),
                "reached": len(reached), "max_error": err if math.isfinite(err) else None, "culprit": None}
        if not err <= rep.tolerance:
            case["culprit"] = _culprit(ctx, pkg, x, params, y, reached, chosen, (tied, i, j), diff, rep.tolerance)
        rep.ties.append(case)


def _vjp_flat(ctx, pkg, x, params, v: dict) -> dict:
    g = reference_vjp(ctx, pkg, x, params, {cotangent_name(k): a for k, a in v.items()})
    return {k: np.asarray(a, np.float64).reshape(-1) for k, a in g.items()}


def _culprit(ctx, pkg, x, params, y, reached, others, tie, diff, tol) -> str:
    """The first output whose one-hot cotangent does not go, with weight 1, where the forward selected."""
    tied, i, j = tie
    def at(n, m):
        return f"{n}[{m}] = {float(x[n].reshape(-1)[m])!r}"
    for o, k, src in reached + others:
        v = {oo: np.zeros(a.shape) for oo, a in y.items()}
        v[o].reshape(-1)[k] = 1.0
        got = _vjp_flat(ctx, pkg, x, params, v)
        want = {n: np.zeros(np.size(x[n])) for n in diff}
        if src is not None and src[0] in want:
            want[src[0]][src[1]] = 1.0
        if any(np.max(np.abs(got[n] - want[n]), initial=0.0) > tol for n in diff):
            went = [f"{n}[{m}] gets {got[n][m]:.3g}" for n in diff for m in np.flatnonzero(np.abs(got[n]) > tol)]
            tie_note = f", not its tie {at(tied, j if src == (tied, i) else i)}" if (o, k, src) in reached else ""
            return (f"{o}[{k}] = {float(y[o].reshape(-1)[k])!r} is {'a parameter' if src is None else at(*src)}"
                    f"{tie_note}: the forward selected it, but a one-hot cotangent on {o}[{k}] gives "
                    f"{', '.join(went[:3]) or 'nothing'}" + ("" if src is None else f" (want {src[0]}[{src[1]}] gets 1)"))
    return "the cotangents do not sum where the forward selected (no single output found)"


# ------------------------------------------------------------------ negative controls

def _mutate(kind: int, g: np.ndarray, perm: dict) -> np.ndarray:
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
    astray = [t for t in rep.ties if t["culprit"]]
    if n and rep.max_error > rep.tolerance:
        worst = max(rep.counted, key=lambda p: p.error)
        where = (f"d{worst.output}[{worst.out_index}]/d{worst.input}[{worst.index}]" if worst.kind == "entry"
                 else f"d/d{worst.input}[{worst.index}] ({worst.note})" if worst.kind == "plant"
                 else "a random direction")
        at = rep.sites[worst.site]
        pv = ", ".join(f"{k} = {v:g}" for k, v in at["params"].items())
        sizes = ", ".join(f"{k}: {v}" for k, v in at["shapes"].items())
        rep.verdict, rep.why = "fail", (f"{where} at the {worst.point} point ({pv + '; ' if pv else ''}{sizes}): "
                                        f"analytic {worst.analytic:.6g}, numeric {worst.numeric:.6g}")
    elif astray:
        pv = ", ".join(f"{k} = {v:g}" for k, v in astray[0]["params"].items())
        rep.verdict, rep.why = "fail", f"at a tie ({pv + '; ' if pv else ''}{astray[0]['case']}): {astray[0]['culprit']}"
    elif n < MIN_COUNTED:
        rep.verdict, rep.why = "inconclusive", f"only {n} probes left after skipping kinks (need {MIN_COUNTED})"
    elif passed:
        rep.verdict, rep.why = "inconclusive", f"this check cannot fail: {', '.join(passed)} passed"
    elif not any(m.fate == "REJECTED" for m in rep.mutants):
        rep.verdict, rep.why = "inconclusive", "this check cannot fail: no corruption changes the vjp here"
    else:
        rep.verdict, rep.why = "pass", ""
