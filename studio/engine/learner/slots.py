"""The slot layout of docs/requirements.md L6 and the static check of a program against it.

Contribution frame (width 2k + s): param = [0, k), sample = [k, k + s), contrib = [k + s, 2k + s);
it reads [0, k + s) and writes [k + s, 2k + s), every contribution slot at least once.
Update frame (width 2k + m + 1): param = [0, k), state = [k, k + m), mean = [k + m, 2k + m),
rate = 2k + m; it reads all of them and writes [0, k + m).

Every integer expression is affine in the loop variables, so with k, s, m known each access's
slot range over its loop box is computed exactly (no enumeration), and a write's slots are
enumerated to find a slot written twice by one statement."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..errors import StudioError
from .syntax import Assign, Bin, Int, Let, Node, Read, Reduce, Size, ToF32, Unary, Var

ROLES = ("contribution", "update")
EXACT_INT = 2 ** 24            # ints used as f32 values stay exact
I32 = 2 ** 31 - 1


@dataclass(frozen=True)
class Layout:
    role: str
    k: int
    s: int
    m: int
    views: dict                 # view -> (first slot, extent)
    read: tuple[int, int]       # allowed half-open ranges
    write: tuple[int, int]
    width: int

    @classmethod
    def of(cls, role: str, k: int, s: int, m: int) -> Layout:
        for name, v in (("k", k), ("s", s), ("m", m)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0 or v > I32 // 4:
                raise StudioError(f"{name} = {v!r} is not a size", field=name, hint="sizes are integers >= 0")
        k, s, m = int(k), int(s), int(m)
        if role == "contribution":
            w = 2 * k + s
            views = {"param": (0, k), "sample": (k, s), "contrib": (k + s, k), "slot": (0, w)}
            return cls(role, k, s, m, views, (0, k + s), (k + s, w), w)
        if role == "update":
            w = 2 * k + m + 1
            views = {"param": (0, k), "state": (k, m), "mean": (k + m, k), "rate": (2 * k + m, 1), "slot": (0, w)}
            return cls(role, k, s, m, views, (0, w), (0, k + m), w)
        raise StudioError(f"unknown program role {role!r}", field="role", hint=f"one of {', '.join(ROLES)}")

    @property
    def sizes(self) -> dict[str, int]:
        return {"k": self.k, "s": self.s, "m": self.m}


@dataclass(frozen=True)
class Bound:
    """A program checked against one layout: what ``evaluate`` and the WGSL compiler run."""
    program: object             # Program
    layout: Layout
    volume: int                 # most loop points alive at once in one row (the evaluator's chunking)

    @property
    def role(self) -> str:
        return self.layout.role

    @property
    def hash(self) -> str:
        return self.program.hash


Affine = tuple[int, dict[str, int]]     # constant + sum of coefficient * variable


def affine(e: Node, sizes: dict[str, int]) -> Affine:
    """An int expression as c0 + sum ci*vi (the parser keeps them affine)."""
    if isinstance(e, Int):
        return e.value, {}
    if isinstance(e, Size):
        return sizes[e.name], {}
    if isinstance(e, Var):
        return 0, {e.name: 1}
    if isinstance(e, Unary):
        c, co = affine(e.operand, sizes)
        return -c, {v: -x for v, x in co.items()}
    if isinstance(e, Bin):
        (a, ac), (b, bc) = affine(e.left, sizes), affine(e.right, sizes)
        if e.op in ("+", "-"):
            sign = 1 if e.op == "+" else -1
            co = dict(ac)
            for v, x in bc.items():
                co[v] = co.get(v, 0) + sign * x
            return a + sign * b, {v: x for v, x in co.items() if x}
        if e.op == "*":
            if ac and bc:                                              # pragma: no cover (parser refuses)
                raise ValueError("not affine")
            c, co = (b, ac) if ac else (a, bc)
            return a * b, {v: x * c for v, x in co.items() if x * c}
        if b == 0:
            raise ZeroDivisionError
        return (a // b, {}) if e.op == "//" else (a % b, {})
    raise TypeError(f"not an int expression: {e!r}")                   # pragma: no cover


def span(form: Affine, box: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """Smallest and largest value of an affine form over a non-empty box {var: (lo, hi)}."""
    c, co = form
    lo = hi = c
    for v, x in co.items():
        a, b = box[v][0] * x, (box[v][1] - 1) * x
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def check(prog, *, role: str, k: int, s: int, m: int) -> Bound:
    lay = Layout.of(role, k, s, m)
    c = _Checker(prog, lay)
    written = np.zeros(lay.width, bool)
    for st in prog.statements:
        c.statement(st, written)
    if role == "contribution" and lay.k:
        lo, hi = lay.write
        missing = np.flatnonzero(~written[lo:hi])
        if missing.size:
            j = int(missing[0])
            raise StudioError(f"contribution slot {lo + j} (contrib[{j}]) is never written; "
                              f"a contribution defines all of [{lo}, {hi}) ({missing.size} slot(s) unwritten)",
                              file=prog.origin, hint="assign every contribution slot, e.g. "
                                                     "for i in 0..k: contrib[i] := 0.0 where nothing else applies")
    return Bound(prog, lay, c.volume)


class _Checker:
    def __init__(self, prog, lay: Layout):
        self.prog, self.lay, self.sizes, self.volume = prog, lay, lay.sizes, 1

    def err(self, msg: str, at, hint: str) -> StudioError:
        line, col = at if at and at[0] else (None, None)
        return StudioError(msg, file=self.prog.origin, line=line, col=col, hint=hint)

    def const(self, e: Node, what: str) -> int:
        try:
            c, _ = affine(e, self.sizes)
        except ZeroDivisionError:
            raise self.err(f"{what} '{e}' divides by zero (k={self.lay.k}, s={self.lay.s}, m={self.lay.m})", e.at,
                           "change the expression") from None
        if abs(c) > I32:
            raise self.err(f"{what} '{e}' = {c} does not fit 32 bits", e.at, "use smaller bounds")
        return c

    def statement(self, st, written: np.ndarray) -> None:
        if isinstance(st, Let):
            self.expr(st.expr, {})
            return
        box = {lp.var: (self.const(lp.lo, "a loop bound"), self.const(lp.hi, "a loop bound")) for lp in st.loops}
        if any(hi <= lo for lo, hi in box.values()):
            return                                      # an empty loop writes nothing and reads nothing
        self.volume = max(self.volume, _count(box))
        self.access(st.target, box, write=True)
        slots = self.write_slots(st, box)
        written[slots] = True
        self.expr(st.expr, box)

    def write_slots(self, st: Assign, box) -> np.ndarray:
        base, _ = self.lay.views[st.target.view]
        c, co = affine(st.target.index, self.sizes) if st.target.index is not None else (0, {})
        n = _count(box)
        lo, hi = self.lay.write
        if n > hi - lo:
            raise self.err(f"this statement writes {n} values into the {hi - lo} writable slots [{lo}, {hi}): "
                           f"some slot is written twice", st.at, "one statement writes each slot at most once")
        axes = np.meshgrid(*[np.arange(a, b, dtype=np.int64) for a, b in box.values()], indexing="ij") if box else []
        slots = np.full(max(n, 1), base + c, np.int64)
        for (v, _), ax in zip(box.items(), axes):
            slots = slots + co.get(v, 0) * ax.reshape(-1)
        order = np.argsort(slots, kind="stable")
        ss = slots[order]
        dup = np.flatnonzero(ss[1:] == ss[:-1])
        if dup.size:
            first = int(order[dup + 1].min())           # the first iteration that writes a slot again
            raise self.err(f"slot {int(slots[first])} is written twice by this one statement "
                           f"({st.target} over {', '.join(f'{v} in {a}..{b}' for v, (a, b) in box.items())})",
                           st.target.at, "each iteration of a for must write its own slot (e.g. index by i)")
        return slots

    def expr(self, e: Node, box: dict) -> None:
        if isinstance(e, Reduce):
            lo, hi = self.const(e.lo, "a reduction bound"), self.const(e.hi, "a reduction bound")
            if hi <= lo:
                return                                  # empty: the identity of the reduction, nothing read
            inner = {**box, e.var: (lo, hi)}
            self.volume = max(self.volume, _count(inner))
            self.expr(e.body, inner)
            return
        if isinstance(e, Read):            # an index is an int expression: no reads inside
            self.access(e, box, write=False)
        elif isinstance(e, ToF32):
            self.int_value(e.operand, box)
        else:
            for ch in e.children():
                self.expr(ch, box)

    def int_value(self, e: Node, box) -> None:
        try:
            lo, hi = span(affine(e, self.sizes), box)
        except ZeroDivisionError:
            raise self.err(f"'{e}' divides by zero", e.at, "change the expression") from None
        if max(abs(lo), abs(hi)) > EXACT_INT:
            raise self.err(f"the integer '{e}' reaches {hi if abs(hi) > abs(lo) else lo}, beyond 2^24: "
                           f"as an f32 value it would be rounded", e.at, "keep integers used as values within ±16777216")

    def access(self, r: Read, box, *, write: bool) -> None:
        lay = self.lay
        verb = "writes" if write else "reads"
        if r.view not in lay.views:
            names = ", ".join(v for v in lay.views if v != "slot")
            raise self.err(f"'{r.view}' is not a view of the {lay.role} program", r.at,
                           f"the {lay.role} program's views are {names} and slot[n]")
        base, extent = lay.views[r.view]
        if r.index is None:
            lo = hi = base
        else:
            try:
                lo, hi = span(affine(r.index, self.sizes), box)
            except ZeroDivisionError:
                raise self.err(f"the index '{r.index}' divides by zero", r.at, "change the expression") from None
            if r.view != "slot" and (lo < 0 or hi >= extent):
                bad = lo if lo < 0 else hi
                raise self.err(f"{r.view}[{bad}] (slot {base + bad}) is outside {r.view}, which is "
                               f"{r.view}[0..{extent}) = slots [{base}, {base + extent})", r.at,
                               f"keep the index of {r.view} within 0..{extent} (k={lay.k}, s={lay.s}, m={lay.m})")
            lo, hi = base + lo, base + hi
        a, b = lay.write if write else lay.read
        if lo < a or hi >= b:
            bad = _first_outside(base, affine(r.index, self.sizes) if r.index is not None else (0, {}), box, a, b)
            what = "writes only" if write else "reads only"
            raise self.err(f"the {lay.role} program {verb} slot {bad}, outside [{a}, {b}): it {what} "
                           f"{_describe(lay, write)}", r.at,
                           f"keep {'writes' if write else 'reads'} within slots [{a}, {b}) (k={lay.k}, s={lay.s}, m={lay.m})")


def _describe(lay: Layout, write: bool) -> str:
    k, s, m = lay.k, lay.s, lay.m
    if lay.role == "contribution":
        return f"its contribution [{k + s}, {2 * k + s})" if write else f"parameters [0, {k}) and the sample [{k}, {k + s})"
    return (f"parameters [0, {k}) and state [{k}, {k + m})" if write else
            f"parameters, state, mean and rate [0, {2 * k + m + 1})")


def _first_outside(base: int, form: Affine, box: dict, a: int, b: int) -> int:
    """The slot of the first access (in iteration order) outside [a, b); over a box too large to
    enumerate, the extreme slot that is outside."""
    c, co = form
    used = {v: r for v, r in box.items() if v in co}          # in iteration order, outermost first
    if _count(used) <= 1 << 20:
        axes = np.meshgrid(*[np.arange(lo, hi, dtype=np.int64) for lo, hi in used.values()], indexing="ij")
        slots = np.full(max(_count(used), 1), base + c, np.int64)
        for v, ax in zip(used, axes):
            slots = slots + co[v] * ax.reshape(-1)
        return int(slots[np.flatnonzero((slots < a) | (slots >= b))[0]])
    lo, hi = span(form, box)
    return base + (lo if base + lo < a else hi)


def slot_set(form: Affine, box: dict) -> np.ndarray:
    """Every slot an affine form takes over the box (its variables' part of it), in iteration order."""
    c, co = form
    used = {v: r for v, r in box.items() if v in co}
    axes = np.meshgrid(*[np.arange(lo, hi, dtype=np.int64) for lo, hi in used.values()], indexing="ij")
    slots = np.full(max(_count(used), 1) if all(hi > lo for lo, hi in used.values()) else 0, c, np.int64)
    for v, ax in zip(used, axes):
        slots = slots + co[v] * ax.reshape(-1)
    return slots


def _count(box: dict) -> int:
    n = 1
    for lo, hi in box.values():
        n *= max(0, hi - lo)
    return n


def reads(e: Node) -> Iterator[Read]:
    for n in e.walk():
        if isinstance(n, Read):
            yield n


__all__ = ["Layout", "Bound", "check", "affine", "span", "slot_set", "ROLES"]
