"""Value domains of a signature's inputs (docs/grammars.md, "Value domains"): what each admits,
built from the parse tree with errors at the author's line:col, and the check of a run's input
values against the domains that name dims or params (index inputs), before anything runs.

* ``any`` (NaN and ±inf too), ``finite``, ``nonneg``, ``in [lo, hi]`` with constant bounds;
* ``index``: an integer input whose bounds name dims or params, ``in [0, cols)`` (half-open) or
  ``in [0, m - 1]`` (closed): every element is a valid index into something of size cols;
* ``csr``: ``csr(nnz)`` on a 1-D integer input of length rows + 1, a CSR row pointer:
  ``row_ptr[0] = 0``, never decreasing, ``row_ptr[rows] = nnz``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from lark import Tree

from ..errors import StudioError
from ..precision import INT_RANGE
from .expr import BinOp, Expr, Num, Number, Sym, build
from .grammar import Source

STRUCTURED = ("index", "csr")        # the kinds whose admissible values depend on the dims and params


@dataclass(frozen=True)
class Domain:
    """The values an input may hold: any (NaN and ±inf included), finite, nonneg (finite, >= 0),
    in [lo, hi] (constants), index (integer bounds that name dims or params: ``lo_expr``,
    ``hi_expr``, the upper one excluded when ``open_hi``) or csr (a row pointer ending at ``total``)."""
    kind: str = "any"
    lo: Number | None = None
    hi: Number | None = None
    lo_expr: Expr | None = None
    hi_expr: Expr | None = None
    open_hi: bool = False
    total: Expr | None = None

    @property
    def admits_nan(self) -> bool:
        return self.kind == "any"

    @property
    def admits_inf(self) -> bool:
        return self.kind == "any"

    @property
    def structured(self) -> bool:
        return self.kind in STRUCTURED

    def exprs(self) -> tuple[Expr, ...]:
        return tuple(e for e in (self.lo_expr, self.hi_expr, self.total) if e is not None)

    def bounds(self, env: dict[str, Number]) -> tuple[int, int]:
        """The closed integer range [lo, hi] of an ``in`` or ``index`` domain in ``env``."""
        if self.kind == "in":
            return math.ceil(self.lo), math.floor(self.hi)
        lo, hi = self.lo_expr.eval(env), self.hi_expr.eval(env)
        return math.ceil(lo), (math.ceil(hi) - 1 if self.open_hi else math.floor(hi))

    def __str__(self):
        if self.kind == "in":
            return f"in [{self.lo}, {self.hi}]"
        if self.kind == "index":
            return f"in [{self.lo_expr}, {self.hi_expr}{')' if self.open_hi else ']'}"
        if self.kind == "csr":
            return f"csr({self.total})"
        return self.kind


# ---- building, from the signature grammar's `domain` rule ----

def build_domain(tree: Tree, src: Source, name: str, dtype: str, rank: int) -> Domain:
    """The domain of input ``name`` (``dtype``, ``rank`` dims); refusals at line:col."""
    kind, *args = tree.children
    integer = dtype in INT_RANGE
    if tree.data == "domain_csr":
        if not integer or rank != 1:
            why = f"{name} is {dtype}" if not integer else f"{name} has {rank} dims"
            raise src.error(f"csr(...) describes a 1-D integer row pointer, but {why}", kind,
                            f"declare it as {name}: u32[rows + 1] csr(nnz)")
        return Domain("csr", total=build(args[0], src))
    if not args:
        return Domain(str(kind))
    lo, hi = (build(b, src) for b in args)
    open_hi = tree.data == "domain_open"
    named = [s for e in (lo, hi) for s in e.nodes() if isinstance(s, Sym)]
    if (named or open_hi) and not integer:
        if named:
            raise src.error(f"a value domain bound on {dtype} must be a constant, not '{named[0].name}': bounds "
                            "that name dims or params are for integer (index) inputs", named[0].at,
                            f"write numbers (x: f32[n] in [-1, 1]), or declare {name} as u32 or i32")
        raise src.error(f"a half-open range needs an integer input, but {name} is {dtype}", kind,
                        "write a closed range for it, e.g. in [0, 1]")
    if named:
        return Domain("index", lo_expr=lo, hi_expr=hi, open_hi=open_hi)
    lo_v, hi_v = (_constant(e, b, src) for e, b in zip((lo, hi), args))
    if open_hi:
        if not float(hi_v).is_integer():
            raise src.error(f"the excluded bound {hi_v} is not an integer", src.at(args[1].meta.line,
                            args[1].meta.column), "write an integer, e.g. in [0, 10)")
        hi_v = int(hi_v) - 1
    if lo_v > hi_v:
        raise src.error(f"empty range [{lo_v}, {hi_v}]", kind, "write the lower bound first")
    return Domain("in", lo_v, hi_v)


def _constant(e: Expr, tree: Tree, src: Source) -> Number:
    try:
        return e.eval({})
    except StudioError as err:
        raise src.error(err.message, src.at(tree.meta.line, tree.meta.column),
                        "write numbers, e.g. in [-1, 1]") from None


def open_upper(hi: Expr) -> Expr:
    """A param's ``in [lo, hi)`` as the closed ``[lo, hi - 1]``."""
    return Num(hi.value - 1) if isinstance(hi, Num) and isinstance(hi.value, int) else BinOp("-", hi, Num(1))


# ---- the check of a run's values, before dispatch ----

def check_values(sig, inputs: dict, params: dict, *, files: dict | None = None) -> None:
    """Refuse a run whose index inputs hold a value their domain does not admit: the input, the
    first bad index and its value, the bound and the dims it names. A no-op for signatures without
    index or csr domains (nothing is resolved)."""
    structured = [t for t in sig.inputs if t.domain.structured and t.name in inputs]
    if not structured:
        return
    env = sig.resolve({k: np.shape(v) for k, v in inputs.items()}, dict(params))
    for t in structured:
        check_input_values(t, inputs[t.name], env, file=(files or {}).get(t.name))


def check_input_values(spec, array, env: dict[str, Number], *, file: str | None = None) -> None:
    """Judge one input's values against its ``index``/``csr`` (or integer ``in``) domain in ``env``."""
    d = spec.domain
    a = np.asarray(array).reshape(-1)
    if a.dtype.kind not in "iu":
        return                           # check_input refuses non-integers for integer inputs
    a = a.astype(np.int64)
    where = f" ({spec})"
    if d.kind == "csr":
        total = int(d.total.eval(env))
        named = "" if isinstance(d.total, Sym) else _named(d.total, env=env)
        if a.size == 0 or a[0] != 0:
            got = f"{spec.name}[0] = {int(a[0])}" if a.size else f"{spec.name} is empty"
            raise _error(f"{got}, but a CSR row pointer starts at 0{where}", spec, file,
                         f"{spec.name}[r]..{spec.name}[r + 1] are row r's entries: the first row starts at 0")
        drops = np.flatnonzero(a[1:] < a[:-1])
        if drops.size:
            i = int(drops[0]) + 1
            raise _error(f"{spec.name}[{i}] = {int(a[i])} is below {spec.name}[{i - 1}] = {int(a[i - 1])}: a CSR row "
                         f"pointer never decreases{where}", spec, file,
                         "each row's entries start where the previous row's end; sort the entries by row")
        if a[-1] != total:
            raise _error(f"{spec.name}[{a.size - 1}] = {int(a[-1])}, but a csr({d.total}) row pointer ends at "
                         f"{d.total} = {total}{named}{where}", spec, file,
                         f"the last entry is the number of entries ({d.total}); pass matching arrays")
        return
    lo, hi = d.bounds(env)
    bad = np.flatnonzero((a < lo) | (a > hi))
    if bad.size:
        i = int(bad[0])
        at = ", ".join(map(str, np.unravel_index(i, np.shape(array)))) if np.ndim(array) else ""
        rng = f"[{lo}, {hi}]" if lo <= hi else "empty"
        raise _error(f"{spec.name}[{at}] = {int(a[i])} is outside {d} = {rng}"
                     f"{_named(*d.exprs(), env=env) if d.kind == 'index' else ''}{where}", spec, file,
                     f"every element of {spec.name} must be a valid index in {rng}; fix the data, or pass the "
                     "arrays it indexes with their full size")


def _named(*exprs: Expr, env: dict) -> str:
    names = list(dict.fromkeys(n.name for e in exprs for n in e.nodes() if isinstance(n, Sym)))
    return f" ({', '.join(f'{n} = {env[n]}' for n in names if n in env)})" if names else ""


def _error(message: str, spec, file: str | None, hint: str) -> StudioError:
    return StudioError(message, file=file, field=spec.name, hint=hint)
