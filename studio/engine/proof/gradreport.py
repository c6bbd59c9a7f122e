"""What a gradcheck found, and how it reads: its probes, where they were taken (the sites: the
main point, the kink plants, the sweep over the parameter space and sizes), the tie routing, the
negative controls' fates, the verdict and its exit code, what the check covers, the report's
lines and JSON (studio/engine/proof/gradcheck.py runs it)."""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

import numpy as np

MIN_COUNTED = 8           # fewer probes left after skipping: inconclusive
EXIT = {"pass": 0, "fail": 1, "inconclusive": 3}
MUTANTS = ("sign flip", "scale by 1 + 1e-2", "shift to the neighbouring index", "drop one element",
           "permute")
MUTANT_DOC = dict(zip(MUTANTS, ("every gradient negated", "every gradient times 1.01",
                                "the gradient moved one index over (np.roll by 1)",
                                "the largest-magnitude gradient element set to 0",
                                "the gradient's elements in a fixed random order")))


@dataclass
class Probe:
    point: str                   # edge | plain | kinks | sweep | point | given
    kind: str                    # entry | direction | plant (u one-hot at a planted element, v random)
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
    site: int = 0                # index into GradcheckReport.sites
    note: str | None = None      # plant probes: where the element sits, e.g. "+1.5e-3 from t = 0.75"

    @property
    def error(self) -> float:
        return abs(self.analytic - self.numeric) / max(1.0, abs(self.analytic))

    def dot(self, grads: dict) -> float:
        if self.kind in ("entry", "plant"):
            return float(grads[self.input].reshape(-1)[self.index])
        return float(sum(np.sum(grads[n] * u) for n, u in self.u.items()))

    def to_json(self) -> dict:
        return {"point": self.point, "kind": self.kind, "input": self.input, "index": self.index,
                "output": self.output, "out_index": self.out_index, "analytic": _finite(self.analytic),
                "numeric": _finite(self.numeric), "error": None if self.skipped else _finite(self.error),
                "skipped": self.skipped, "reason": self.reason, "site": self.site, "note": self.note}


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
    sites: list[dict] = field(default_factory=list)   # {kind, params, shapes}: where probes were taken
    ties: list[dict] = field(default_factory=list)    # one per tie case (studio/engine/proof/gradcheck.py)
    tie_rule: str = ""           # why ties are (or are not) checked against the selected element
    coverage: dict = field(default_factory=dict)      # what this check covers (gradcoverage.summarize)

    def site_probes(self, i: int) -> list[Probe]:
        return [p for p in self.probes if p.site == i]

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
        main = self.site_probes(0)
        entries = sum(p.kind == "entry" for p in main)
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
        out += [f"  probes   : {entries} sampled (input, output) pairs + {len(main) - entries} random directions "
                f"v.J.u, central differences, h = {_num(self.h)}",
                f"             at {len(self.points)} point{'s' if len(self.points) > 1 else ''} ({sizes}, seed "
                f"{self.seed}): {', '.join(self.points)}"]
        out += coverage_lines(self)
        out += [
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
        out += tie_lines(self)
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
                "verdict": self.verdict, "why": self.why, "exit_code": self.exit_code,
                "sites": [{**s, "probes": len(self.site_probes(i)),
                           "counted": sum(not p.skipped for p in self.site_probes(i))} for i, s in enumerate(self.sites)],
                "ties": {"rule": self.tie_rule, "cases": self.ties}, "coverage": self.coverage,
                "lines": self.lines(), "probes": [p.to_json() for p in self.probes]}


# ------------------------------------------------------------------ the report's other lines

def _list(vals, most: int = 8) -> str:
    shown = [_num(v) if isinstance(v, (int, float)) else str(v) for v in vals]
    return ", ".join(shown if len(shown) <= most else shown[:most // 2] + ["..."] + shown[-(most // 2):])


def coverage_lines(rep: GradcheckReport) -> list[str]:
    out = []
    kinks = [p for p in rep.probes if p.kind == "plant" and rep.sites[p.site]["kind"] == "kinks"]
    if kinks:
        dist = sorted({abs(float(p.note.split()[0])) for p in kinks if p.note})
        where = sorted({p.note.split(" from ", 1)[1] for p in kinks if p.note and " from " in p.note})
        out.append(f"  kinks    : {len(kinks)} elements planted {_num(dist[0])} to {_num(dist[-1])} from each kink "
                   f"({'; '.join(where)}), each probed; {sum(p.skipped for p in kinks)} skipped")
    cov = rep.coverage or {}
    sweep = [i for i, s in enumerate(rep.sites) if s["kind"] in ("sweep", "point")]
    if sweep:
        n = len(rep.site_probes(sweep[0]))
        out.append(f"  sweep    : {len(sweep)} more point{'s' if len(sweep) > 1 else ''} (about {n} probes each) over "
                   "the parameter space and sizes")
    for name, c in (cov.get("params") or {}).items():
        out.append(f"  covers   : {name} = {_list(c['values'])}  ({c['rule']})")
    sizes = cov.get("sizes") or {}
    if sizes:
        out.append("  sizes    : " + "; ".join(f"{k}: {_list(['x'.join(map(str, s)) for s in v])}" for k, v in sizes.items()))
    for miss in cov.get("not_covered") or []:
        out.append(f"  not covered: {miss}")
    return out


def tie_lines(rep: GradcheckReport) -> list[str]:
    if not rep.ties:
        return [f"  ties     : not checked -- {rep.tie_rule}"] if rep.tie_rule else []
    reached = sum(t["reached"] for t in rep.ties)
    sets = len({json_key(t["params"]) for t in rep.ties})
    bad = [t for t in rep.ties if t.get("culprit")]
    head = (f"  ties     : {len(rep.ties)} cases with a +0.0/-0.0 tie at {sets} parameter set{'s' if sets > 1 else ''}; "
            f"{reached} outputs selected a tied element")
    tail = (f"             the vjp must route each cotangent to the element the forward selected ({rep.tie_rule}): "
            + (f"it does NOT: {bad[0]['culprit']}" if bad else "it does" if reached else
               "NOT REACHED -- the forward selected no tied element here, so the convention at ties is unverified"))
    return [head, tail]


def json_key(d: dict) -> str:
    return ",".join(f"{k}={d[k]!r}" for k in sorted(d))


# ------------------------------------------------------------------ what the report says of the op

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


def describe_forward(pkg) -> str:
    c = pkg.contract
    return f"author reference ({_docline(pkg, c.reference_forward) or c.reference_file + ': ' + c.reference_forward})"


def describe_vjp(pkg) -> str:
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


# ------------------------------------------------------------------ the harness


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
