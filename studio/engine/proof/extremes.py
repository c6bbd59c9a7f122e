"""The extremes of a signature's declared domain, per dimension and per parameter, and the cases
that reach them (docs/verification.md, "The domain's extremes").

Every dimension and every parameter (an *axis* here) has a domain the signature declares: a
parameter's range and parity, and the relations (``w <= n``, ``cols <= 256``, ``c * k <= 65535``).
Its levels are its minimum, the next admissible value, the one below its maximum and its maximum
(a dimension with no upper bound has none: the per-axis large and fold sizes stand for it,
sizes.py), plus the workgroup boundaries along it (multiples of the kernel's workgroup along that
axis, ± 1). A level is a *role* resolved against the axes already fixed: ``n = min`` next to
``w = 31`` is n = 31. Cases:

* **solo**: each axis at each of its levels, resolved first (its absolute extreme), the others
  then at their minimum;
* **pairwise**: a pairwise covering of every axis's levels (pairwise.py), so every pair of
  extremes meets in at least one case; a pair the relations exclude is named as unreachable.

A case whose arrays hold more than ``SMALL_ELEMENTS`` elements is not repeated per seed: it is
made once, with the large sizes (corpus.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..contract.signature import COMPARE, DataDim, Signature
from ..errors import StudioError
from ..precision import DTYPE_BYTES, is_float
from . import pairwise

SEARCH_TOP = 1 << 31
SCAN = 4096                # the minimum and its successor are searched this far above the lowest value
SMALL_ELEMENTS = 1 << 16   # a case bigger than this is made once (the large family), not per seed
INT_LIMITS = {"u32": (0, 2**32 - 1), "i32": (-2**31, 2**31 - 1)}
FLT_MAX = float(np.finfo(np.float32).max)
ROLES = ("min", "min+1", "max-1", "max")


@dataclass
class Axis:
    name: str
    kind: str                         # dim | param | float
    lo: float | int | None = None     # the absolute domain (every other axis free)
    hi: float | int | None = None     # None: no declared maximum
    workgroup: int | None = None      # the kernel's workgroup along this axis


@dataclass
class Reach:
    """Per axis, the values the cases reached and the levels that could not be, with why."""
    values: dict[str, set] = field(default_factory=dict)
    missing: list[dict] = field(default_factory=list)     # {"what", "why"}
    pairs: int = 0                                         # pairs of levels covered
    unreachable_pairs: list[str] = field(default_factory=list)

    def see(self, env: dict) -> None:
        for k, v in env.items():
            self.values.setdefault(k, set()).add(v)


def axes(sig: Signature, dims: list[str], workgroups: dict[str, int] | None) -> list[Axis]:
    """The dims and parameters, parameters first (relations more often bound a dim by a parameter)."""
    out = [Axis(p.name, "float" if is_float(p.dtype) else "param") for p in sig.params]
    out += [Axis(d, "dim", workgroup=(workgroups or {}).get(d)) for d in dims]
    for a in out:
        a.lo, a.hi = _resolve_role(sig, out, {}, a, "min"), _resolve_role(sig, out, {}, a, "max")
    return out


def _param_range(sig: Signature, name: str, env: dict):
    p = next(p for p in sig.params if p.name == name)
    lo = hi = None
    try:
        lo = p.lo.eval(env) if p.lo is not None else None
        hi = p.hi.eval(env) if p.hi is not None else None
    except StudioError:
        pass
    if is_float(p.dtype):
        return (-FLT_MAX if lo is None else float(lo)), (FLT_MAX if hi is None else float(hi)), None
    tlo, thi = INT_LIMITS.get(p.dtype, (0, 2**32 - 1))
    return max(tlo, int(lo) if lo is not None else tlo), min(thi, int(hi) if hi is not None else thi), p.parity


def partial_ok(sig: Signature, env: dict) -> bool:
    """Whether what ``env`` fixes can hold: the parameters' ranges and parity, every relation whose
    symbols are all fixed, every input dim fixed non-negative and every output dim fixed positive."""
    params, relations, dims = _checks(sig, frozenset(env))
    try:
        for p, fixed in params:
            lo, hi, parity = fixed or _param_range(sig, p.name, env)
            v = env[p.name]
            if not lo <= v <= hi or (parity and (int(v) % 2 == 1) != (parity == "odd")):
                return False
        for r in relations:
            if not COMPARE[r.op](r.left.eval(env), r.right.eval(env)):
                return False
        for d, least in dims:
            v = d.eval(env)
            if v < least or (isinstance(v, float) and not v.is_integer()):
                return False
    except (StudioError, ZeroDivisionError, OverflowError, ValueError, TypeError):
        return False
    return True


def _checks(sig: Signature, fixed: frozenset) -> tuple[list, list, list]:
    """What partial_ok checks when the names ``fixed`` are fixed: the parameters among them, the
    relations and the (dim, least value) of the tensor dims they determine. Kept on the signature
    (immutable) per set of names: the extremes ask the same few sets hundreds of thousands of times."""
    plans = sig.__dict__.get("_partial_checks")
    if plans is None:
        plans = {}
        object.__setattr__(sig, "_partial_checks", plans)
    plan = plans.get(fixed)
    if plan is None:
        plan = plans[fixed] = (
            [(p, _constant_range(sig, p)) for p in sig.params if p.name in fixed],
            [r for r in sig.relations if (r.left.symbols() | r.right.symbols()) <= fixed],
            [(d, 0 if t in sig.inputs else 1) for t in sig.inputs + sig.outputs for d in t.dims
             if not isinstance(d, DataDim) and d.symbols() <= fixed])
    return plan


def _constant_range(sig: Signature, p) -> tuple | None:
    """A parameter's range when its bounds name no symbol (the usual ``in [1, 31]``), else None."""
    if any(b is not None and b.symbols() for b in (p.lo, p.hi)):
        return None
    return _param_range(sig, p.name, {})


def _lowest(sig, axis: Axis, env: dict):
    if axis.kind == "dim":
        return 0, SEARCH_TOP
    lo, hi, _ = _param_range(sig, axis.name, env)
    return lo, hi


def _resolve_role(sig: Signature, all_axes: list[Axis], env: dict, axis: Axis, role):
    """The value of ``axis`` at ``role`` given ``env`` (None: no such value). A function of the
    signature, the axis, the role and ``env`` alone: remembered on the signature (immutable), since
    every seed and every pair of the cover asks the same few hundred questions again."""
    memo = sig.__dict__.get("_resolved")
    if memo is None:
        memo = {}
        object.__setattr__(sig, "_resolved", memo)
    key = (axis.name, axis.kind, role, type(role), frozenset((k, v, type(v)) for k, v in env.items()))
    if key not in memo:
        memo[key] = _resolve_role_now(sig, env, axis, role)
    return memo[key]


def _resolve_role_now(sig: Signature, env: dict, axis: Axis, role):
    def ok(v):
        return partial_ok(sig, {**env, axis.name: v})
    lo, hi = _lowest(sig, axis, env)
    if axis.kind == "float":
        def f32(v):
            return float(np.float32(v))
        lo, hi = f32(lo), f32(hi)
        v = {"min": lo, "max": hi, "min+1": f32(np.nextafter(np.float32(lo), np.float32(hi))),
             "max-1": f32(np.nextafter(np.float32(hi), np.float32(lo)))}.get(role, role)
        return v if isinstance(v, float) and np.isfinite(v) and ok(v) else None
    if isinstance(role, int):
        return role if ok(role) else None
    if role in ("min", "min+1"):
        first = _smallest(ok, int(lo), int(hi))
        if role == "min" or first is None:
            return first
        return next((v for v in range(first + 1, int(min(hi, first + SCAN)) + 1) if ok(v)), None)
    top = _largest(ok, int(lo), int(hi), axis.kind == "dim")
    if top is None or role == "max":
        return top
    return next((v for v in range(top - 1, max(int(lo), top - 64) - 1, -1) if ok(v)), None)


WINDOW = 64               # admissibility is taken as monotone up to a period this short (parity, k % 4 == 1)


def _near(ok, v: int, hi: int) -> bool:
    return any(ok(u) for u in range(v, min(hi, v + WINDOW) + 1))


def _smallest(ok, lo: int, hi: int) -> int | None:
    """The smallest admissible value in [lo, hi]: a scan, then (admissibility taken as monotone
    past the scan, up to a short period: ``n >= k`` with k = 65,534) a bisection."""
    top = min(hi, lo + SCAN)
    first = next((v for v in range(lo, top + 1) if ok(v)), None)
    if first is not None or top >= hi or not _near(ok, max(top, hi - WINDOW), hi):
        return first
    a, b = top, hi                                    # nothing near a, something near b
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (a, mid) if _near(ok, mid, hi) else (mid, b)
    return next((v for v in range(b, min(hi, b + WINDOW) + 1) if ok(v)), None)


def _largest(ok, lo: int, hi: int, unbounded_is_none: bool) -> int | None:
    """The largest admissible value in [lo, hi] (admissibility taken as monotone above the first,
    up to a short period: ``k % 2 == 1, k <= 31`` is 31)."""
    first = next((v for v in range(lo, min(hi, lo + SCAN) + 1) if ok(v)), None)
    if first is None:
        return None
    if _near(ok, max(first, hi - WINDOW), hi):
        if unbounded_is_none and hi >= SEARCH_TOP:
            return None
        return next(v for v in range(hi, max(first, hi - WINDOW) - 1, -1) if ok(v))
    a, b = first, hi                                  # something near a, nothing near b
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if ok(mid) or _near(ok, mid, hi) else (a, mid)
    return next((v for v in range(min(hi, a + WINDOW), a - 1, -1) if ok(v)), first)


def levels(axis: Axis) -> list:
    """The roles of ``axis``: its extremes and, where its kernel has a workgroup along it, the
    boundaries (wg - 1, wg, wg + 1, 2 wg + 1) that lie inside its domain."""
    out = [r for r in ROLES if not (r in ("max", "max-1") and axis.hi is None)]
    if axis.workgroup and axis.kind == "dim":
        wg = axis.workgroup
        out += [v for v in (wg - 1, wg, wg + 1, 2 * wg + 1) if axis.lo is not None and v > axis.lo + 1
                and (axis.hi is None or v < axis.hi - 1)]
    return out


def resolve(sig: Signature, all_axes: list[Axis], roles: dict, fill) -> dict | None:
    """The environment of a case: each axis in ``roles`` at its role, the others at
    ``fill(axis)``'s role. The axes with a role are resolved first (``k = max`` is k's absolute
    maximum, n then follows), else in axis order (``n = min`` next to w's minimum). None: the
    roles cannot hold together."""
    named = {a.name: a for a in all_axes}
    rest = [a.name for a in all_axes if a.name not in roles]
    orders = []
    for order in ([*roles, *rest], [*reversed(list(roles)), *rest], [a.name for a in all_axes]):
        if order not in orders:
            orders.append(order)
    for order in orders:
        env: dict = {}
        for name in order:
            axis = named[name]
            if name in roles:
                v = _resolve_role(sig, all_axes, env, axis, roles[name])
            else:             # a free axis: its fill role, else the first role that holds
                v = next((v for r in (fill(axis), *ROLES, *((0.0, 1.0) if axis.kind == "float" else ()))
                          if (v := _resolve_role(sig, all_axes, env, axis, r)) is not None), None)
            if v is None:
                break
            env[name] = v
        else:
            return env
    return None


def elements(sig: Signature, env: dict) -> int:
    """Input and output elements of a case (the cost of one case)."""
    total = 0
    for t in sig.inputs + sig.outputs:
        if any(isinstance(d, DataDim) for d in t.dims):
            continue
        total += int(np.prod([int(d.eval(env)) for d in t.dims])) if t.dims else 1
    return total


def bytes_of(sig: Signature, env: dict) -> int:
    return sum(int(np.prod([int(d.eval(env)) for d in t.dims])) * DTYPE_BYTES[t.dtype]
               for t in sig.inputs + sig.outputs if not any(isinstance(d, DataDim) for d in t.dims))


def extreme_cases(sig: Signature, all_axes: list[Axis], rng: np.random.Generator, emit, big) -> Reach:
    """Emit the solo and pairwise cases: ``emit(kind, env) -> bool`` for a small case (made per
    seed), ``big(kind, env) -> bool`` for one over SMALL_ELEMENTS (made once; False: over the
    budget, named by the caller). Returns what was reached."""
    reach = Reach()
    if not all_axes:
        return reach
    for a in all_axes:
        if a.kind == "dim" and a.hi is None:
            reach.missing.append({"what": f"{a.name} = max", "why": f"the signature declares no maximum for "
                                  f"{a.name}: its large and fold sizes stand for it"})
    def small_fill(axis):           # the free axes: a small value, not always the minimum
        return "min" if axis.kind != "dim" or rng.random() < 0.5 else "min+1"

    made: dict[tuple, bool] = {}

    def make(kind, roles, fill=small_fill):
        env = resolve(sig, all_axes, roles, fill)
        if env is None:
            return None
        try:
            n = elements(sig, env)
        except (StudioError, ValueError, TypeError):
            return None
        key = tuple(sorted(env.items()))
        if key not in made:       # a case already made holds these values: it covers the roles too
            made[key] = emit(kind, env) if n <= SMALL_ELEMENTS else big(kind, env)
        done = made[key]
        if done:
            reach.see(env)
        return env if done else None

    for a in all_axes:                                     # solo: each axis's absolute extremes
        for role in levels(a):
            if make("extreme", {a.name: role}, lambda axis: "min") is None:
                reach.missing.append({"what": f"{a.name} = {role}", "why": (
                    "no admissible case holds it: the relations exclude it, or its arrays are over the default "
                    "corpus's budget (`scellis conform --large` holds them)")})
    factors = {a.name: levels(a) for a in all_axes}
    # pairs reach a dimension's maximum only where its arrays stay small: a maximum that alone
    # needs more than SMALL_ELEMENTS elements is met once, in its solo case
    for a in all_axes:
        for role in ("max", "max-1"):
            env = resolve(sig, all_axes, {a.name: role}, lambda axis: "min")
            if role in factors[a.name] and (env is None or elements(sig, env) > SMALL_ELEMENTS):
                factors[a.name].remove(role)
                reach.missing.append({"what": f"pairs with {a.name} = {role}", "why": (
                    f"{a.name} = {env[a.name]:,} alone needs {elements(sig, env):,} elements: it is reached once, "
                    "with the others at their minimum" if env is not None else "not admissible")})
    def build(row):
        env = make("pairwise extreme", row)
        if env is None:
            return None
        return dict(row)
    _, unreachable = pairwise.cover(factors, build)
    reach.pairs = len(pairwise.all_pairs(factors)) - len(unreachable)
    reach.unreachable_pairs = [f"{a} = {x} with {b} = {y}" for (a, x), (b, y) in unreachable]
    return reach
