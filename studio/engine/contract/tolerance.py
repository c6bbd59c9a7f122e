"""Tolerance classes, semantic categories, the rule between them, and comparison.

Classes: ``exact`` (bitwise), ``ulp(K)`` (at most K units in the last place),
``bound`` / ``bound(C)`` (C times the category's standard forward-error bound,
C <= 1). Comparison semantics are documented in docs/tolerance.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..bfloat16 import UNIT as U_BF16
from ..errors import StudioError

# Categories that do no arithmetic on values: each output is bit for bit one of the
# inputs (or parameters), or an integer computation.
NON_ARITHMETIC = {"selection", "permutation", "copy", "integer"}
# Arithmetic categories and the loosest class each may declare.
STANDARD_ULP = {"elementwise": 4, "stencil": 4, "generator": 4}
BOUND_CATEGORIES = {"reduction", "contraction", "scan"}   # accumulate: gamma_k per output
CATEGORIES = NON_ARITHMETIC | set(STANDARD_ULP) | BOUND_CATEGORIES

U32 = 2.0 ** -24  # unit roundoff of f32

_CLASS = re.compile(r"^(exact|ulp\((\d+)((?:\s*,\s*[a-zA-Z0-9]+)*)\)|bound(?:\(([0-9.eE+-]+)\))?)$")

# WGSL's accuracy for f32 built-ins (the WGSL spec, "Floating Point Accuracy"), as ulps of the
# result at argument x, and an absolute error allowed instead on a range. Used by `ulp(K, fn...)`.
WGSL_ACCURACY = {
    "exp": ("3 + 2|x| ulp", lambda x: 3 + 2 * np.abs(x), None),
    "exp2": ("3 + 2|x| ulp", lambda x: 3 + 2 * np.abs(x), None),
    "log": ("3 ulp outside [0.5, 2]; absolute 2^-21 inside", lambda x: 3 + 0 * x,
            lambda x: np.where((x >= 0.5) & (x <= 2.0), 2.0 ** -21, 0.0)),
    "log2": ("3 ulp outside [0.5, 2]; absolute 2^-21 inside", lambda x: 3 + 0 * x,
             lambda x: np.where((x >= 0.5) & (x <= 2.0), 2.0 ** -21, 0.0)),
    "inverseSqrt": ("2 ulp", lambda x: 2 + 0 * x, None),
    "sqrt": ("inherited from 1 / inverseSqrt(x): 2.5 + 2 ulp", lambda x: 5 + 0 * x, None),
    "sin": ("absolute 2^-11 inside [-pi, pi]", lambda x: 0 * x,
            lambda x: np.where(np.abs(x) <= np.pi, 2.0 ** -11, 0.0)),
    "cos": ("absolute 2^-11 inside [-pi, pi]", lambda x: 0 * x,
            lambda x: np.where(np.abs(x) <= np.pi, 2.0 ** -11, 0.0)),
    "tanh": ("inherited from (exp(2x) - 1) / (exp(2x) + 1): 2 (3 + 4|x|) + 3 ulp",
             lambda x: 9 + 8 * np.abs(x), None),
}


@dataclass(frozen=True)
class Tolerance:
    kind: str            # "exact" | "ulp" | "bound"
    ulps: int = 0
    factor: float = 1.0  # bound: multiple of the category's standard bound
    category: str = ""
    justification: str = ""
    builtins: tuple[str, ...] = ()   # ulp(K, exp, ...): plus WGSL's allowance for these at the input

    def __str__(self) -> str:
        if self.kind == "ulp":
            return f"ulp({', '.join([str(self.ulps), *self.builtins])})"
        if self.kind == "bound":
            return "bound" if self.factor == 1.0 else f"bound({self.factor:g})"
        return "exact"


def parse_tolerance(cls: str, category: str, justification: str = "", *, file: str | None = None) -> Tolerance:
    m = _CLASS.match(cls.strip()) if isinstance(cls, str) else None
    if not m:
        raise StudioError(f"unknown tolerance class {cls!r}", file=file, field="tolerance.class",
                          hint='use "exact", "ulp(K)" or "bound"')
    if category not in CATEGORIES:
        raise StudioError(f"unknown semantic category {category!r}", file=file, field="tolerance.category",
                          hint="one of: " + ", ".join(sorted(CATEGORIES)))
    if m.group(1) == "exact":
        return Tolerance("exact", category=category, justification=justification)
    if m.group(2) is not None:
        fns = tuple(f.strip() for f in (m.group(3) or "").split(",") if f.strip())
        unknown = [f for f in fns if f not in WGSL_ACCURACY]
        if unknown:
            raise StudioError(f"ulp(K, ...) names {unknown[0]!r}, not a WGSL built-in with an accuracy rule",
                              file=file, field="tolerance.class", hint="one of: " + ", ".join(WGSL_ACCURACY))
        return Tolerance("ulp", ulps=int(m.group(2)), category=category, justification=justification, builtins=fns)
    return Tolerance("bound", factor=float(m.group(4) or 1.0), category=category, justification=justification)


def check_class_fits_category(tol: Tolerance, *, file: str | None = None) -> list[StudioError]:
    """The checker's rule: exact only for categories that do no arithmetic (with a written
    justification); arithmetic categories may not declare looser than their standard bound."""
    errs = []
    cat = tol.category
    def err(msg, hint):
        errs.append(StudioError(msg, file=file, field="tolerance.class", hint=hint))
    if tol.kind == "exact":
        if cat not in NON_ARITHMETIC:
            err(f"category '{cat}' does arithmetic on values and cannot claim 'exact'",
                f"declare ulp(K) (K <= {STANDARD_ULP.get(cat, 4)}) or bound, or fix the category")
        elif len(tol.justification.strip()) < 20:
            errs.append(StudioError("'exact' needs a written justification (why no rounding happens)",
                                    file=file, field="tolerance.justification",
                                    hint="say in a sentence why every output is bit for bit determined"))
    elif cat in NON_ARITHMETIC:
        # an op that does no arithmetic has no rounding to allow for: anything looser than exact
        # would let a kernel that changes the values (adds an ulp) pass as a selection
        err(f"category '{cat}' does no arithmetic on values: it must declare 'exact', not '{tol}'",
            "declare class = \"exact\" (each output is bit for bit an input), or fix the category")
    elif tol.kind == "ulp":
        if cat in BOUND_CATEGORIES:
            err(f"category '{cat}' accumulates; a fixed ulp count is not its contract",
                "declare class = \"bound\" (the standard gamma_K * sum|terms| bound)")
        elif tol.builtins and cat != "elementwise":
            err(f"ulp(K, {', '.join(tol.builtins)}) judges each output at its own input element: only for "
                f"'elementwise', not '{cat}'", "declare ulp(K) with K <= 4, or fix the category")
        elif cat in STANDARD_ULP and tol.ulps > STANDARD_ULP[cat]:
            err(f"ulp({tol.ulps}) is looser than the '{cat}' standard ulp({STANDARD_ULP[cat]})",
                f"tighten to ulp({STANDARD_ULP[cat]}) or less, or fix the kernel")
    elif tol.kind == "bound":
        if cat not in BOUND_CATEGORIES:
            err(f"'bound' is for reductions and contractions, not '{cat}'", "declare exact or ulp(K)")
        elif tol.factor > 1.0:
            err(f"bound({tol.factor:g}) is looser than the '{cat}' standard bound",
                "declare bound (factor 1) or tighter")
    return errs


def check_category_fits_signature(tol: Tolerance, signature, precision: str, *, file: str | None = None
                                  ) -> list[StudioError]:
    """Categories that cannot lie: a `generator` has no array inputs (otherwise "two runs agree" is
    all it would prove, and any float sum could claim it), and a category that accumulates
    (reduction, contraction, scan) is judged against an f64 reference: an f32 reference that copies
    the kernel's summation order would agree with it bit for bit and prove nothing about the sum."""
    errs = []
    if tol.category == "generator" and signature.inputs:
        names = ", ".join(t.name for t in signature.inputs)
        errs.append(StudioError(f"category 'generator' is for ops without array inputs; this op reads {names}",
                                file=file, field="tolerance.category",
                                hint="declare the category the op really has (elementwise, stencil, reduction, "
                                     "contraction, scan, ...)"))
    if tol.category in BOUND_CATEGORIES and precision != "f64":
        errs.append(StudioError(
            f"category '{tol.category}' accumulates: its reference must compute in f64, not {precision} (an f32 "
            f"reference in the kernel's own order would agree with it and prove nothing about the rounding)",
            file=file, field="reference.precision", hint='set [reference] precision = "f64"'))
    return errs


# ---------------------------------------------------------------- comparison

def _ordered(bits: np.ndarray) -> np.ndarray:
    """Map f32 bit patterns to integers whose order is the float order (-0 and +0 adjacent)."""
    b = bits.astype(np.int64)
    return np.where(b & 0x80000000, 0x80000000 - (b & 0x7FFFFFFF), b + 0x80000000)


@dataclass
class Mismatch:
    index: int
    expected: float
    got: float
    expected_bits: int
    got_bits: int
    allowed: str

    def describe(self) -> str:
        return (f"index {self.index}: expected {self.expected!r} (0x{self.expected_bits:08x}), "
                f"got {self.got!r} (0x{self.got_bits:08x}); allowed: {self.allowed}")


def compare(tol: Tolerance, expected: np.ndarray, got: np.ndarray, *, magnitude: np.ndarray | None = None,
            terms: int | np.ndarray = 1, argument: np.ndarray | None = None) -> Mismatch | None:
    """First element where ``got`` breaks the tolerance against ``expected`` (both f32/i32/u32,
    or both bf16: judged as their exact f32 values, with bf16's unit roundoff for the output's
    rounding and distances counted on the bf16 line; docs/bf16.md). For the bound classes
    ``magnitude`` is Σ|terms| and ``terms`` the number of terms, both per output (an array of the
    output's size; a scalar applies to every output): proof/bounds.py computes them."""
    expected = np.ascontiguousarray(expected).reshape(-1)
    got = np.ascontiguousarray(got).reshape(-1)
    bf16 = expected.dtype.name == "bfloat16"
    if bf16:                                          # every bf16 is exactly an f32
        expected, got = expected.astype(np.float32), got.astype(np.float32)
    if expected.dtype != np.float32:
        bad = np.flatnonzero(expected != got)
        if bad.size == 0:
            return None
        i = int(bad[0])
        return Mismatch(i, int(expected[i]), int(got[i]), int(expected.view(np.uint32)[i]),
                        int(got.view(np.uint32)[i]), "equal")
    eb, gb = expected.view(np.uint32), got.view(np.uint32)
    enan, gnan = np.isnan(expected), np.isnan(got)
    if tol.kind == "exact":
        ok = (eb == gb) | (enan & gnan)
        allowed = "bitwise equal (any NaN matches any NaN; -0 != +0)"
    elif tol.kind == "ulp":
        with np.errstate(invalid="ignore"):
            dist = np.abs(_ordered(eb) - _ordered(gb)) >> (16 if bf16 else 0)
        inf_ok = ~np.isinf(expected) | (eb == gb)
        # WGSL lets a device flush subnormal results to zero: a ±0 where a subnormal is expected is allowed
        ftz = (np.abs(expected) < np.float32(2.0 ** -126)) & (got == 0)
        ulps, absolute = np.float64(tol.ulps), np.float64(0.0)
        if tol.builtins and argument is not None:       # WGSL's own accuracy for the named built-ins
            x = np.asarray(argument, np.float64).reshape(-1)
            for fn in tol.builtins:
                _, u, a = WGSL_ACCURACY[fn]
                ulps = ulps + u(x)
                absolute = absolute + (a(x) if a is not None else 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            near = np.abs(expected.astype(np.float64) - got.astype(np.float64)) <= absolute
        ok = (((dist <= ulps) | ftz | near) & inf_ok & ~enan & ~gnan) | (enan & gnan)
        extra = f" + WGSL's {', '.join(tol.builtins)} allowance" if tol.builtins else ""
        allowed = f"within {tol.ulps} ulp{extra} (subnormal results may flush to zero)"
    else:
        mag = np.abs(expected).astype(np.float64) if magnitude is None else np.asarray(magnitude, np.float64).reshape(-1)
        k = np.asarray(terms, np.float64).reshape(-1) + 2
        gamma = np.where(k * U32 < 1, k * U32 / np.maximum(1 - k * U32, 1e-300), np.inf)
        # + k smallest subnormals: partial sums that underflow lose at most that much each
        limit = tol.factor * gamma * mag + U32 * np.abs(expected.astype(np.float64)) + k * 2.0 ** -149
        if bf16:   # f32 accumulation, then bf16's rounding of the kernel's sum and of the exact one
            limit = (tol.factor * gamma * mag * (1 + U_BF16) + 2 * U_BF16 / (1 - U_BF16) * np.abs(expected.astype(np.float64))
                     + k * 2.0 ** -149 + 2.0 ** -133)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(expected.astype(np.float64) - got.astype(np.float64))
            ok = (diff <= limit) | (enan & gnan) | ((eb == gb) & ~enan)
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    i = int(bad[0])
    if tol.kind == "bound":
        at = lambda a: float(np.broadcast_to(a, expected.shape)[i])
        ki, mi, lim = int(at(k)), at(mag), at(limit)
        allowed = (f"|diff| <= {tol.factor:g} * gamma_{ki} * sum|terms| * (1 + u_bf16) + 2 u_bf16 |y| (bf16 output)"
                   if bf16 else f"|diff| <= {tol.factor:g} * gamma_{ki} * sum|terms| + u*|y|") + \
            f" = {lim:.3g} here (k = {ki} terms reach this output, sum|terms| = {mi:.3g})"
    return Mismatch(i, float(expected[i]), float(got[i]), int(eb[i]), int(gb[i]), allowed)
