"""Tolerance classes, semantic categories, the rule between them, and comparison.

Classes: ``exact`` (bitwise), ``ulp(K)`` (at most K units in the last place),
``bound`` / ``bound(C)`` (C times the category's standard forward-error bound,
C <= 1), ``bound(C, fn, ...)`` (plus WGSL's accuracy for the named built-ins, weighted per output
by the reference's ``terms()``). Comparison semantics are documented in docs/tolerance.md; the one
rule between class and category, applied alike by the checker and by conformance, is
``class_rule``.
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
# accumulate: gamma_k per output; `normalization` is row-wise exp-and-reduce (softmax, layernorm)
BOUND_CATEGORIES = {"reduction", "contraction", "scan", "normalization"}
# categories whose `bound` must name the WGSL built-ins it calls and count its terms with terms()
BUILTIN_BOUND_CATEGORIES = {"elementwise", "stencil"}
CATEGORIES = NON_ARITHMETIC | set(STANDARD_ULP) | BOUND_CATEGORIES

U32 = 2.0 ** -24  # unit roundoff of f32

_CLASS = re.compile(r"^(exact|ulp\((\d+)((?:\s*,\s*[a-zA-Z0-9]+)*)\)|bound(?:\(\s*([0-9.][0-9.eE+-]*)?"
                    r"((?:\s*,?\s*[a-zA-Z][a-zA-Z0-9]*)*)\s*\))?)$")

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

# The same table in the bound form, per built-in call c that reaches an output: the reference's
# terms() gives, per output, W = sum_c |dy/dv_c * v_c| ("weight", v_c the call's value),
# WX = sum_c |dy/dv_c * v_c| * |x_c| ("weighted_arg", x_c its argument) and V = sum_c |dy/dv_c|
# ("abs_weight"). The allowance is 2^-23 (a W + b WX) + u (c W + d WX) + (absolute + e u) V:
# (a, b) WGSL's ulps a + b|x| (one ulp is at most 2^-23 of the value), (c, d, e) one rounding of
# the call's own f32 argument carried through the function (exp(x(1 + δ)) = exp(x)(1 + xδ), a
# relative |x|u; log(x(1 + δ)) = log(x) + δ, an absolute u).
BOUND_ACCURACY = {          # fn: (a, b, absolute, c, d, e)
    "exp": (3, 2, 0.0, 0, 1, 0), "exp2": (3, 2, 0.0, 0, 1, 0),
    "log": (3, 0, 2.0 ** -21, 0, 0, 1), "log2": (3, 0, 2.0 ** -21, 0, 0, 1.5),
    "inverseSqrt": (2, 0, 0.0, 0.5, 0, 0), "sqrt": (5, 0, 0.0, 0.5, 0, 0),
    "sin": (0, 0, 2.0 ** -11, 0, 0, 4), "cos": (0, 0, 2.0 ** -11, 0, 0, 4),
    "tanh": (9, 8, 0.0, 1, 0, 0),
}
BOUND_FIELDS = {fn: ("weight",) + (("weighted_arg",) if acc[1] or acc[4] else ())
                + (("abs_weight",) if acc[2] or acc[5] else ()) for fn, acc in BOUND_ACCURACY.items()}


def builtin_allowance(fn: str, sums: dict) -> np.ndarray:
    """WGSL's allowance for built-in ``fn``, per output, from the reference's sums (above)."""
    a, b, absolute, c, d, e = BOUND_ACCURACY[fn]
    def get(k):
        return np.abs(np.asarray(sums.get(k, 0.0), np.float64))
    w, wx, v = get("weight"), get("weighted_arg"), get("abs_weight")
    return 2.0 ** -23 * (a * w + b * wx) + U32 * (c * w + d * wx) + (absolute + e * U32) * v


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
            args = ([] if self.factor == 1.0 else [f"{self.factor:g}"]) + list(self.builtins)
            return f"bound({', '.join(args)})" if args else "bound"
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
    fns = tuple(f.strip() for f in re.split(r"[\s,]+", m.group(5) or "") if f.strip())
    if "(" in cls and not fns and m.group(4) is None:
        raise StudioError(f"{cls!r} names neither a factor nor a built-in", file=file, field="tolerance.class",
                          hint='write "bound", "bound(C)" or "bound(C, exp, ...)"')
    unknown = [f for f in fns if f not in BOUND_ACCURACY]
    if unknown:
        raise StudioError(f"bound(...) names {unknown[0]!r}, not a WGSL built-in with an accuracy rule",
                          file=file, field="tolerance.class", hint="one of: " + ", ".join(BOUND_ACCURACY))
    try:
        factor = float(m.group(4) or 1.0)
    except ValueError:
        raise StudioError(f"bound factor {m.group(4)!r} is not a number", file=file, field="tolerance.class",
                          hint="e.g. bound(0.5)") from None
    return Tolerance("bound", factor=factor, category=category, justification=justification, builtins=fns)


def check_class_fits_category(tol: Tolerance, *, file: str | None = None, has_terms: bool | None = None,
                              field: str = "tolerance.class") -> list[StudioError]:
    """The checker's rule: exact only for categories that do no arithmetic (with a written
    justification); arithmetic categories may not declare looser than their standard bound; a
    `bound` naming WGSL built-ins needs the reference's terms() (``has_terms``; None: not asked)."""
    errs = []
    cat = tol.category
    def err(msg, hint):
        errs.append(StudioError(msg, file=file, field=field, hint=hint))
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
        fns = ", ".join(tol.builtins)
        if cat in BOUND_CATEGORIES:
            err(f"category '{cat}' accumulates; a fixed ulp count is not its contract",
                f"declare class = \"bound{f'({fns})' if fns else ''}\" (gamma_k * sum|terms| per output"
                + (", plus WGSL's allowance for each built-in, weighted by the reference's terms())" if fns else ")"))
        elif tol.builtins and cat != "elementwise":
            err(f"ulp(K, {fns}) judges each output at its own input element: only for 'elementwise', not '{cat}'",
                f"declare bound({fns}) with a terms() in the reference (each output's terms and built-in calls)")
        elif cat in STANDARD_ULP and tol.ulps > STANDARD_ULP[cat]:
            err(f"ulp({tol.ulps}) is looser than the '{cat}' standard ulp({STANDARD_ULP[cat]})",
                f"tighten to ulp({STANDARD_ULP[cat]}) or less, or fix the kernel")
    elif tol.kind == "bound":
        if cat not in BOUND_CATEGORIES and not (cat in BUILTIN_BOUND_CATEGORIES and tol.builtins):
            err(f"'{tol}' is for reductions, contractions, scans and normalizations, not '{cat}'",
                "declare exact or ulp(K)" + (", or bound(exp, ...) naming the built-ins the kernel calls"
                                             if cat in BUILTIN_BOUND_CATEGORIES else ""))
        elif tol.factor > 1.0:
            err(f"bound({tol.factor:g}) is looser than the '{cat}' standard bound",
                "declare bound (factor 1) or tighter")
        elif (tol.builtins or cat not in {"reduction", "contraction", "scan"}) and has_terms is False:
            err(f"'{tol}' for '{cat}' is judged per output from the reference's terms(), and the reference "
                f"defines none", "define terms(...) in the reference: per output its terms, their magnitude"
                + (f" and, for {', '.join(tol.builtins)}, the weights of its calls" if tol.builtins else "")
                + " (docs/tolerance.md, \"The bound, per output\")")
    return errs


def check_backward_class(tol: Tolerance, *, file: str | None = None, has_terms: bool | None = None
                         ) -> list[StudioError]:
    """A device VJP's class, capped like a forward's: a VJP sums cotangents, so it is judged as a
    reduction — `exact` (a gather in the reference's own order), ulp(K <= 4), or bound(C <= 1, fn...)
    (built-ins only with the reference's ``<vjp>_terms()``)."""
    if tol.kind == "exact":
        return []
    if tol.kind == "ulp":
        if tol.builtins:
            return [StudioError(f"backward class {tol}: ulp(K, fn) judges an output at its own input element, "
                                "which a gradient does not have", file=file, field="backward.tolerance",
                                hint=f"declare bound({', '.join(tol.builtins)}) with a <vjp>_terms() in the reference")]
        if tol.ulps > STANDARD_ULP["elementwise"]:
            return [StudioError(f"backward class ulp({tol.ulps}) is looser than ulp({STANDARD_ULP['elementwise']}), "
                                "the cap a forward class has", file=file, field="backward.tolerance",
                                hint="declare ulp(4) or less, or bound (a gradient that sums its terms)")]
        return []
    if has_terms is False and tol.builtins:
        return [StudioError(f"backward class {tol} names built-ins, and the reference defines no <vjp>_terms()",
                            file=file, field="backward.tolerance",
                            hint="define vjp_terms(inputs..., cotangents..., params): per gradient element its "
                                 "terms, their magnitude and the weights of each built-in's calls")]
    return check_class_fits_category(Tolerance("bound", factor=tol.factor, category="reduction",
                                               builtins=tol.builtins), file=file, field="backward.tolerance")


def defines(source: str | None, name: str) -> bool:
    """Whether the reference's source defines ``name`` at its top level (read, never run)."""
    return bool(source) and re.search(rf"^def {re.escape(name)}\s*\(", source, re.M) is not None


def class_rule(contract, reference_source: str | None, *, file: str | None = None) -> list[StudioError]:
    """The one rule between the classes and the category, for the forward and the device VJP:
    `scellis check` reports it and conformance refuses a receipt on it, so neither says "ok" to
    what the other refuses. Whether the reference defines its terms() hooks is read from its
    source, the same way in both."""
    errs = check_class_fits_category(contract.tolerance, file=file,
                                     has_terms=defines(reference_source, "terms"))
    bk = contract.backward_kernel
    if bk is not None and bk.tolerance is not None:
        hooks = [f"{r.function}_terms" for r in contract.backward.rules if getattr(r, "device_kernel", None)]
        has = all(defines(reference_source, h) for h in hooks) if hooks else False
        errs += check_backward_class(bk.tolerance, file=file, has_terms=has)
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
            terms: int | np.ndarray = 1, argument: np.ndarray | None = None,
            allowance: np.ndarray | None = None) -> Mismatch | None:
    """First element where ``got`` breaks the tolerance against ``expected`` (both f32/i32/u32,
    or both bf16: judged as their exact f32 values, with bf16's unit roundoff for the output's
    rounding and distances counted on the bf16 line; docs/bf16.md). For the bound classes
    ``magnitude`` is Σ|terms| and ``terms`` the number of terms, both per output (an array of the
    output's size; a scalar applies to every output): proof/bounds.py computes them, and
    ``allowance``, WGSL's for the built-ins a `bound(fn, ...)` names (absolute, per output)."""
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
        k = np.asarray(terms, np.float64).reshape(-1) + 2          # gamma_{k+2}: k the terms counted
        gamma = np.where(k * U32 < 1, k * U32 / np.maximum(1 - k * U32, 1e-300), np.inf)
        extra = 0.0 if allowance is None else np.asarray(allowance, np.float64).reshape(-1)
        # + k smallest subnormals: partial sums that underflow lose at most that much each
        limit = tol.factor * (gamma * mag + extra) + U32 * np.abs(expected.astype(np.float64)) + k * 2.0 ** -149
        if bf16:   # f32 accumulation, then bf16's rounding of the kernel's sum and of the exact one
            limit = (tol.factor * (gamma * mag + extra) * (1 + U_BF16)
                     + 2 * U_BF16 / (1 - U_BF16) * np.abs(expected.astype(np.float64))
                     + k * 2.0 ** -149 + 2.0 ** -133)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(expected.astype(np.float64) - got.astype(np.float64))
            ok = (diff <= limit) | (enan & gnan) | ((eb == gb) & ~enan)
            # an infinity of the right sign where the allowed interval reaches past the largest float
            # (values there round to it); a zero where a subnormal is expected (WGSL may flush)
            top = float(np.finfo(np.float32).max) * (1 + U32)
            ok |= np.isinf(got) & (np.sign(got) == np.sign(expected)) & (np.abs(expected.astype(np.float64)) + limit >= top)
            ok |= (np.abs(expected) < np.float32(2.0 ** -126)) & (got == 0)
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    i = int(bad[0])
    if tol.kind == "bound":
        def at(a):
            return float(np.broadcast_to(a, expected.shape)[i])
        ki, mi, lim = int(at(k)) - 2, at(mag), at(limit)       # the k counted, not k + 2
        fns = (f" + {'WGSL' + chr(39) + 's ' + ', '.join(tol.builtins) + ' and ' if tol.builtins else ''}the last "
               f"rounding ({at(extra):.3g})") if allowance is not None else ""
        allowed = (f"|diff| <= {tol.factor:g} * gamma_(k+2) * sum|terms| * (1 + u_bf16) + 2 u_bf16 |y| (bf16 output)"
                   if bf16 else f"|diff| <= {tol.factor:g} * (gamma_(k+2) * sum|terms|{fns}) + u*|y|") + \
            f" = {lim:.3g} here (k = {ki} terms reach this output, sum|terms| = {mi:.3g})"
    return Mismatch(i, float(expected[i]), float(got[i]), int(eb[i]), int(gb[i]), allowed)
