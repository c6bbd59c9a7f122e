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
from dataclasses import dataclass, field

import numpy as np

from ..errors import StudioError
from .gradpoints import choose, points
from ..context import Context
from ..grad.vjp import cotangent_name, forward64, reference_vjp, vjp_inputs

DEFAULT_H = 1e-3
DEFAULT_TOLERANCE = 1e-6
SCALE_DELTA = 1e-2
ROWS = 12                 # one-hot cotangents per point
NONZERO_PER_ROW = 3       # entries per row where the declared VJP is non-zero ...
ZERO_PER_ROW = 1          # ... and where it is zero
DIRECTIONS = 12           # random-direction probes per point
MIN_COUNTED = 8           # fewer probes left after skipping: inconclusive
ROUNDING = 16 * 68        # ulps of g per sample x the kink statistic's rounding gain
KINK_RATIO = 0.1          # kinks give K >= 0.43 |J(h)|; smooth curvature gives K ~ h^2 |g''''/g''| |J(h)|
EXIT = {"pass": 0, "fail": 1, "inconclusive": 3}
MUTANTS = ("sign flip", "scale by 1 + 1e-2", "shift to the neighbouring index", "drop one element",
           "permute")
MUTANT_DOC = dict(zip(MUTANTS, ("every gradient negated", "every gradient times 1.01",
                                "the gradient moved one index over (np.roll by 1)",
                                "the largest-magnitude gradient element set to 0",
                                "the gradient's elements in a fixed random order")))


@dataclass
class Probe:
    point: str                   # edge | plain | given
    kind: str                    # entry | direction
    input: str | None            # entry: the input and flat index of u's one
    index: int | None
    output: str | None           # entry: the output and flat index of v's one
    out_index: int | None
    analytic: float
    numeric: float
    skipped: bool = False
    reason: str | None = None
    grads: dict = field(default_factory=dict, repr=False)     # the declared VJP for this v
    u: dict = field(default_factory=dict, repr=False)         # direction probes: u per input

    @property
    def error(self) -> float:
        return abs(self.analytic - self.numeric) / max(1.0, abs(self.analytic))

    def dot(self, grads: dict) -> float:
        if self.kind == "entry":
            return float(grads[self.input].reshape(-1)[self.index])
        return float(sum(np.sum(grads[n] * u) for n, u in self.u.items()))

    def to_json(self) -> dict:
        return {"point": self.point, "kind": self.kind, "input": self.input, "index": self.index,
                "output": self.output, "out_index": self.out_index, "analytic": _finite(self.analytic),
                "numeric": _finite(self.numeric), "error": None if self.skipped else _finite(self.error),
                "skipped": self.skipped, "reason": self.reason}


@dataclass
class Mutant:
    name: str
    input: str | None
    fate: str                    # REJECTED | passed | n/a
    max_error: float

    @property
    def label(self) -> str:
        return self.name + (f" ({self.input})" if self.input else "")


@dataclass
class GradcheckReport:
    op: str
    hash: str
    params: dict
    shapes: dict
    h: float
    seed: int
    tolerance: float
    tolerance_source: str        # declared | default | override
    forward: str
    vjp: str
    subgradient: str | None
    crossing: str                # "order crossing" (selection, permutation) or "kink"
    kink_methods: list[str]
    points: list[str]
    probes: list[Probe]
    mutants: list[Mutant]
    verdict: str = ""
    why: str = ""

    @property
    def counted(self) -> list[Probe]:
        return [p for p in self.probes if not p.skipped]

    @property
    def skipped(self) -> int:
        return sum(p.skipped for p in self.probes)

    @property
    def max_error(self) -> float:
        return max((p.error for p in self.counted), default=float("nan"))

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def lines(self) -> list[str]:
        pv = ", ".join(f"{k} = {_num(v)}" for k, v in self.params.items())
        entries = sum(p.kind == "entry" for p in self.probes)
        by = {m: sum(1 for p in self.probes if p.skipped and m in (p.reason or "")) for m in ("generic", "predicate")}
        methods = "; ".join(f"{m.split(': ', 1)[1]} ({by[m.split(':')[0]]} probes)" for m in self.kink_methods)
        sizes = ", ".join(f"{k}: {v}" for k, v in self.shapes.items())
        tol = _num(self.tolerance) + {"declared": " (declared)", "default": " (the default; none declared)",
                                      "override": " (given on the command line)"}[self.tolerance_source]
        article = "an" if self.crossing[0] in "aeiou" else "a"
        pad = " " * 21
        out = [f"gradcheck  {self.op}   ({pv + ', ' if pv else ''}reference path, f64)",
               f"  forward  : {self.forward}",
               f"  vjp      : {self.vjp}"]
        if self.subgradient:
            out.append(f"  subgrad. : convention in op.toml -- {self.subgradient}")
        out += [f"  probes   : {entries} sampled (input, output) pairs + {len(self.probes) - entries} random directions "
                f"v.J.u, central differences, h = {_num(self.h)}",
                f"             at {len(self.points)} point{'s' if len(self.points) > 1 else ''} ({sizes}, seed "
                f"{self.seed}): {', '.join(self.points)}",
                f"  skipped  : {self.skipped} of {len(self.probes)} probes within h of {article} {self.crossing} "
                f"(no derivative exists there), never averaged",
                f"             found by {methods}",
                f"  bound    : max |analytic - numeric| = {_num(self.max_error, 2)} over {len(self.counted)} probes "
                f"must stay under the tolerance {tol}",
                "  negative control : a corrupted vjp must be REJECTED -- a check that cannot",
                "                     fail certifies nothing"]
        for m in self.mutants:
            err = "" if m.fate == "n/a" else f"  (max error {m.max_error:.2g})"
            fate = "n/a: identical to the declared vjp here" if m.fate == "n/a" else m.fate
            out.append(f"{pad}{m.label:36s} {fate}{err}")
        out.append(f"  verdict  : {self.verdict.upper() if self.verdict == 'fail' else self.verdict}"
                   + (f" -- {self.why}" if self.why else ""))
        return out

    def to_json(self) -> dict:
        return {"op": self.op, "hash": self.hash, "params": self.params, "shapes": self.shapes,
                "path": "reference", "precision": "f64", "h": self.h, "seed": self.seed,
                "forward": self.forward, "vjp": self.vjp, "subgradient": self.subgradient,
                "tolerance": _finite(self.tolerance, "inf"), "tolerance_source": self.tolerance_source,
                "error_measure": "|analytic - numeric| / max(1, |analytic|)",
                "kink_detection": self.kink_methods, "points": self.points,
                "counted": len(self.counted), "skipped": self.skipped,
                "max_error": _finite(self.max_error),
                "negative_controls": [{"name": m.label, "mutant": m.name, "input": m.input,
                                       "description": MUTANT_DOC[m.name], "fate": m.fate,
                                       "max_error": None if m.fate == "n/a" else _finite(m.max_error)}
                                      for m in self.mutants],
                "verdict": self.verdict, "why": self.why, "exit_code": self.exit_code, "lines": self.lines(),
                "probes": [p.to_json() for p in self.probes]}


# ------------------------------------------------------------------ the harness

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
    diff = [n for n in vjp_inputs(pkg) if sig.input(n).dtype == "f32"]
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
        pts = [("given", {k: np.asarray(v, np.float64) if sig.input(k).dtype == "f32" else np.asarray(v)
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


def _finite(v: float, otherwise=None):
    """JSON has no NaN or infinity: such numbers become None (or a word)."""
    return v if math.isfinite(v) else (otherwise if otherwise is not None and v > 0 else None)


def _num(v: float, digits: int = 3) -> str:
    """1e-3, not 0.001: the report's numbers as an engineer writes them."""
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e6):
        return str(int(v)) if not isinstance(v, bool) else str(v)
    if not math.isfinite(v) or 1e-2 <= abs(v) < 1e4:
        return f"{v:.{digits}g}"
    m, e = f"{v:.{digits - 1}e}".split("e")
    m = m.rstrip("0").rstrip(".")
    return f"{m}e{int(e)}"


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
