"""Tunable overrides: ``override RUN: u32 = 512 tune [64, 128, 256, 512, 1024, 2048]`` in a binding
descriptor. The declared default (512) runs unless a sealed tuning record for this package content
and GPU profile chose another candidate (studio/engine/services/tuning.py); every candidate is
proven by conformance before it is timed (studio/engine/proof/tuning.py).

The rules, each refused at the line:col of the offending text:

- candidates are constants (numbers), fit the override's dtype, are distinct, at most MAX_CANDIDATES;
- the default is a constant and one of the candidates (what runs untuned was among what is proven).

A kernel's ``invocations`` may name a constant override (``cdiv(n - w + 1, RUN)``): the name is
bound to the override's value when the contract is built (``bind_invocations``), so every place that
evaluates a launch sees a number; a candidate is the same contract with the value replaced
(``variant``), built here so that conformance and the one executor run it unchanged."""
from __future__ import annotations

import dataclasses
import numbers

from lark import Tree

from ..errors import StudioError
from ..precision import INT_RANGE
from .expr import BinOp, Call, Expr, Neg, Num, Sym, build
from .grammar import Source

MAX_CANDIDATES = 16
F32_MAX = 3.4028234663852886e38


def candidates(o, tune: Tree, src: Source):
    """``o`` (an OverrideConstant) with the candidates of its ``tune [..]`` clause, validated."""
    hint = f"write e.g. override {o.name}: {o.dtype} = 512 tune [128, 256, 512, 1024]"
    if o.value.symbols():
        raise src.error(f"tunable override '{o.name}' has a default that depends on "
                        f"{', '.join(sorted(o.value.symbols()))}: a tunable's default is a constant",
                        (o.line, o.col), hint)
    default = _fit(o, o.value.eval({}), (o.line, o.col), src, hint)
    values, where = [], []
    for t in tune.children:
        if t is None:
            continue
        at = src.at(t.meta.line, t.meta.column) if isinstance(t, Tree) and not t.meta.empty else (o.line, o.col)
        e = build(t, src)
        syms = [s for s in e.nodes() if isinstance(s, Sym)]
        if syms:
            raise src.error(f"tune candidate '{e}' of '{o.name}' is not a constant", syms[0].at or at,
                            "list numbers only: the candidates are fixed when the package is written")
        v = _fit(o, e.eval({}), at, src, hint)
        if v in values:
            raise src.error(f"tune candidate {v} of '{o.name}' is listed twice", at, "list each candidate once")
        values.append(v)
        where.append(at)
    if len(values) > MAX_CANDIDATES:
        raise src.error(f"'{o.name}' lists {len(values)} tune candidates (at most {MAX_CANDIDATES})", where[0],
                        "keep the candidates that can win: each one is proven by conformance, then timed")
    if default not in values:
        raise src.error(f"the default {default} of tunable override '{o.name}' is not among its candidates "
                        f"[{', '.join(map(str, values))}]", (o.line, o.col),
                        f"add {default} to the tune list: the untuned run must be one of the proven candidates")
    return dataclasses.replace(o, value=Num(default), candidates=tuple(values), candidates_at=tuple(where))


def _fit(o, v, at, src: Source, hint: str):
    if o.dtype in INT_RANGE:
        lo, hi = INT_RANGE[o.dtype]
        v = int(v) if isinstance(v, float) and v.is_integer() else v
        if not isinstance(v, numbers.Integral) or not lo <= v <= hi:
            raise src.error(f"tune value {v} of '{o.name}' does not fit {o.dtype} (an integer in [{lo}, {hi}])",
                            at, hint)
        return int(v)
    v = float(v)
    if not abs(v) <= F32_MAX:
        raise src.error(f"tune value {v} of '{o.name}' does not fit f32", at, hint)
    return v


# ------------------------------------------------------------------ binding and variants
def constant_values(desc) -> dict[str, int | float]:
    """The overrides of a descriptor whose value is a constant (every tunable is one)."""
    return {o.name: o.value.eval({}) for o in desc.overrides if not o.value.symbols()}


def substitute(e: Expr, values: dict[str, int | float]) -> Expr:
    """``e`` with each symbol named in ``values`` replaced by its number."""
    if isinstance(e, Sym):
        return Num(values[e.name]) if e.name in values else e
    if isinstance(e, Neg):
        return Neg(substitute(e.operand, values))
    if isinstance(e, BinOp):
        return BinOp(e.op, substitute(e.left, values), substitute(e.right, values))
    if isinstance(e, Call):
        return Call(e.func, tuple(substitute(a, values) for a in e.args))
    return e


def bind_invocations(contract) -> None:
    """Bind the constant overrides a kernel's ``invocations`` names (``cdiv(n - w + 1, RUN)``) to
    their values, keeping the written expression for variants. Nothing else changes."""
    k = contract.kernel
    if k is None:
        return
    values = constant_values(contract.bindings)
    if k.invocations.symbols() & set(values):
        contract.kernel = dataclasses.replace(k, invocations=substitute(k.invocations, values), written=k.invocations)


def tunables(contract) -> list:
    """The tunable overrides of the forward kernel, in descriptor order."""
    return [o for o in contract.bindings.overrides if o.tunable] if contract.kernel is not None else []


def variant(contract, values: dict[str, int | float]):
    """The contract with the tunables in ``values`` set to those candidates (the rest as declared)."""
    by_name = {o.name: o for o in tunables(contract)}
    for name, v in values.items():
        o = by_name.get(name)
        if o is None:
            raise StudioError(f"{contract.id} has no tunable override '{name}'", field=name,
                              hint=f"its tunables: {', '.join(by_name) or 'none'}")
        if v not in o.candidates:
            raise StudioError(f"{v} is not a tune candidate of '{name}' ({list(o.candidates)})", field=name,
                              hint="a value that was never declared and proven is never run")
    desc = contract.bindings
    overrides = tuple(dataclasses.replace(o, value=Num(values[o.name])) if o.name in values else o
                      for o in desc.overrides)
    out = dataclasses.replace(contract, bindings=dataclasses.replace(desc, overrides=overrides))
    k = contract.kernel
    written = getattr(k, "written", None)
    if written is not None:
        out.kernel = dataclasses.replace(k, invocations=substitute(written, constant_values(out.bindings)))
    return out


def declared(contract) -> dict[str, int | float]:
    """The declared default of every tunable."""
    return {o.name: o.value.eval({}) for o in tunables(contract)}
