"""What a gradcheck found, and how it reads: its probes, the negative controls' fates, the
verdict and its exit code, the report's lines and JSON (studio/engine/proof/gradcheck.py runs it)."""
from __future__ import annotations

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
