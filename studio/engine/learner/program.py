"""Pointwise assignment programs (docs/assignment-programs.md; grammar:
resources/grammars/assign.lark): parsed into typed syntax (``syntax.py``), named and
typed here, checked against the slot layout of docs/requirements.md L6 by ``slots.py`` before anything runs.

    program = parse_program(text, origin="update.assign")
    bound = check_program(program, role="update", k=k, s=s, m=m)   # StudioError naming the slot
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from lark import Token, Tree

from ..contract.grammar import Source, parse
from ..errors import StudioError
from . import slots
from .syntax import (BINARY_FUNCS, BOOL, F32, INT, ORDERS, REDUCTIONS, SEQUENTIAL, SIZES, UNARY_FUNCS, VIEWS, Assign,
                     Bin, Call, Int, Let, LetRef, Loop, Node, Num, Read, Reduce, Size, Statement, ToF32, Unary, Var, f32)

LANGUAGE = "assign/1"           # part of the hash: a change of semantics is a change of program
EXAMPLE = "for i in 0..k: contrib[i] := sample[i] - param[i]"
RESERVED = set(VIEWS) | set(SIZES) | {"rate"} | set(UNARY_FUNCS) | set(BINARY_FUNCS) | set(REDUCTIONS) | {"select"}
INT_MAX = 2 ** 31 - 1
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%"}


@dataclass(frozen=True)
class Program:
    """A parsed program: immutable; ``hash`` is over the canonical form (LANGUAGE + str of each
    statement), so whitespace, comments, optional ';' and redundant parentheses do not change it."""
    text: str
    origin: str
    hash: str
    statements: tuple[Statement, ...]

    @property
    def canonical(self) -> str:
        return canonical(self.statements)


def canonical(statements) -> str:
    return "\n".join(str(st) for st in statements) + "\n"


def parse_program(text: str, *, origin: str = "<program>") -> Program:
    """Parse and type a program; every mistake is a StudioError at origin:line:col with a hint."""
    _refuse_oversized(text, origin)
    src = Source(text, origin)
    statements = parse("assign", src, lambda tree: _Builder(src).program(tree), EXAMPLE)
    body = canonical(statements)
    digest = hashlib.sha256(f"{LANGUAGE}\n{body}".encode()).hexdigest()
    return Program(text, origin, digest, tuple(statements))


MAX_PROGRAM_BYTES = 256 << 10       # the shipped programs are under 1 KiB
MAX_OPERATORS = 256                 # + - * / in one statement: its tree is that deep (a long sum: sum(j in ...))


def _refuse_oversized(text: str, origin: str) -> None:
    """The real cause of a program too big to read, found at once (a flat 200,000-term sum used to
    take the parser half a minute and come back as "it nests too deeply")."""
    import re
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_PROGRAM_BYTES:
        raise StudioError(f"the program is {size} bytes, over the {MAX_PROGRAM_BYTES} bytes a program may hold",
                          file=origin, hint="a program is a few statements; a long sum is sum(j in 0..n: ...)")
    for n, line in enumerate(text.split("\n"), 1):
        col = 1
        for stmt in line.split("#", 1)[0].split(";"):
            ops = len(re.findall(r"[-+*/]", stmt))
            if ops > MAX_OPERATORS:
                raise StudioError(f"this statement chains {ops} operators (+ - * /), over the {MAX_OPERATORS} one "
                                  f"statement may hold", file=origin, line=n, col=col,
                                  hint="a long sum is sum(j in 0..n: ...); or split it into lets")
            col += len(stmt) + 1


def check_program(prog: Program, *, role: str, k: int, s: int, m: int) -> slots.Bound:
    """Enforce docs/requirements.md L6 before anything runs: every read and write inside its role's ranges
    (the first one outside is reported with its slot, line:col and the allowed range), no slot
    written twice by one statement, every contribution slot written. Returns the program bound
    to this layout, which ``evaluate`` and ``wgsl`` take."""
    return slots.check(prog, role=role, k=k, s=s, m=m)


def slot_width(role: str, k: int, s: int, m: int) -> int:
    """Slots in a role's frame: contribution 2k + s, update 2k + m + 1 (the rate is the last)."""
    return slots.Layout.of(role, k, s, m).width


class _Builder:
    """Parse tree → typed syntax, with scopes: lets (in order), loop and reduction variables."""

    def __init__(self, src: Source):
        self.src = src
        self.lets: dict[str, str] = {}          # name -> type
        self.vars: list[str] = []

    def err(self, message: str, where, hint: str) -> StudioError:
        return self.src.error(message, self.pos(where), hint)

    def pos(self, where) -> tuple[int, int]:
        if isinstance(where, Token):
            return self.src.pos(where)
        if isinstance(where, Tree):
            return self.src.at(where.meta.line, where.meta.column)
        return where

    def program(self, tree: Tree) -> list[Statement]:
        return [self.statement(st) for st in tree.children]

    def statement(self, st: Tree) -> Statement:
        if st.data == "let":
            name, expr = st.children
            self.fresh(name, "a let")
            value = self.expr(expr)
            if value.ty == INT:
                value = self.to_f32(value)
            self.lets[str(name)] = value.ty
            return Let(str(name), value, self.pos(name))
        if st.data == "for":
            *loops, target, expr = st.children
            bound = []
            for lp in loops:
                var, lo, hi = lp.children
                self.fresh(var, "a loop variable")
                bound.append(Loop(str(var), self.constant_int(lo, "a loop bound"), self.constant_int(hi, "a loop bound")))
                self.vars.append(str(var))
            try:
                return Assign(tuple(bound), self.target(target), self.value(expr, "an assigned slot"), self.pos(target))
            finally:
                del self.vars[len(self.vars) - len(bound):]
        target, expr = st.children
        return Assign((), self.target(target), self.value(expr, "an assigned slot"), self.pos(target))

    def fresh(self, name: Token, what: str) -> None:
        n = str(name)
        if n in RESERVED:
            raise self.err(f"'{n}' is a reserved name and cannot name {what}", name,
                           "the views, sizes (k s m), rate and the function names are reserved; choose another")
        if n in self.lets or n in self.vars:
            raise self.err(f"'{n}' is already defined", name, "each let and loop variable needs a name of its own")

    def target(self, t: Tree) -> Read:
        name = t.children[0]
        if t.data == "bare":
            if str(name) != "rate":
                raise self.err(f"cannot assign to '{name}'", name,
                               "assign to a slot: param[i], state[j], contrib[i], slot[n] (lets are immutable)")
            return Read(F32, self.pos(name), "rate", None)
        return self.read(t, name, t.children[1])

    def read(self, t: Tree, name: Token, index: Tree) -> Read:
        view = str(name)
        if view == "rate":
            raise self.err("'rate' is one slot: write rate, not rate[...]", name, "drop the index")
        if view not in VIEWS:
            raise self.err(f"unknown view '{view}'", name, f"the views are {', '.join(VIEWS)} (and rate)")
        return Read(F32, self.pos(name), view, self.index(index))

    def index(self, t: Tree) -> Node:
        e = self.expr(t)
        if e.ty != INT:
            raise self.err(f"a slot index must be an integer expression, not {e.ty}", t,
                           "index with integers, k, s, m and loop variables, e.g. param[i + 1]")
        return e

    def constant_int(self, t: Tree, what: str) -> Node:
        e = self.index(t)
        if any(isinstance(n, Var) for n in e.walk()):
            raise self.err(f"{what} must not depend on a loop variable", t, "bound it with integers and k, s, m")
        return e

    def value(self, t: Tree, what: str) -> Node:
        e = self.expr(t)
        if e.ty == BOOL:
            raise self.err(f"{what} needs an f32 value; this is a bool (a comparison)", t,
                           "turn it into a number with select(cond, 1.0, 0.0)")
        return self.to_f32(e) if e.ty == INT else e

    def cond(self, t: Tree) -> Node:
        e = self.expr(t)
        if e.ty != BOOL:
            raise self.err(f"expected a bool (a comparison), got {e.ty}", t, "compare it, e.g. x > 0.0")
        return e

    @staticmethod
    def to_f32(e: Node) -> Node:
        return ToF32(F32, e.at, e)

    def expr(self, t: Tree) -> Node:
        if isinstance(t, Token):     # unreachable with this grammar; kept for safety
            raise self.err(f"unexpected {t!s}", t, f"a valid example: {EXAMPLE}")
        kind, kids, at = t.data, t.children, self.pos(t)
        if kind == "int":
            if int(kids[0]) > INT_MAX:
                raise self.err(f"the integer {str(kids[0])[:24]} is too large", kids[0], f"integers are at most {INT_MAX}")
            return Int(INT, at, int(kids[0]))
        if kind == "float":
            value = f32(float(kids[0]))
            if value == float("inf"):
                raise self.err(f"the number {str(kids[0])[:24]} is too large for f32", kids[0],
                               "f32 numbers are at most about 3.4e38")
            return Num(F32, at, value)
        if kind == "name":
            return self.name(kids[0])
        if kind == "index":
            return self.read(t, kids[0], kids[1])
        if kind == "neg":
            e = self.expr(kids[0])
            if e.ty == BOOL:
                raise self.err("cannot negate a bool", t, "use not for a condition")
            return Unary(e.ty, at, "-", e)
        if kind == "not":
            return Unary(BOOL, at, "not", self.cond(kids[0]))
        if kind in ("and", "or"):
            return Bin(BOOL, at, kind, self.cond(kids[0]), self.cond(kids[1]))
        if kind == "compare":
            a, b = self.expr(kids[0]), self.expr(kids[2])
            a, b = self.same_number_type(a, b, kids[0], kids[2], str(kids[1]))
            return Bin(BOOL, at, str(kids[1]), a, b)
        if kind in _ARITH:
            return self.arith(_ARITH[kind], t, at)
        if kind == "call":
            return self.call(t, at)
        if kind == "reduce":
            return self.reduce(t, at)
        raise self.err(f"unexpected {kind}", t, f"a valid example: {EXAMPLE}")   # pragma: no cover

    def name(self, tok: Token) -> Node:
        n, at = str(tok), self.pos(tok)
        if n in self.vars:
            return Var(INT, at, n)
        if n in self.lets:
            return LetRef(self.lets[n], at, n)
        if n in SIZES:
            return Size(INT, at, n)
        if n == "rate":
            return Read(F32, at, "rate", None)
        if n in VIEWS:
            raise self.err(f"'{n}' is a view of many slots: index it", tok, f"e.g. {n}[i] or {n}[0]")
        known = sorted(set(self.vars) | set(self.lets) | set(SIZES) | {"rate"})
        raise self.err(f"unknown name '{n}'", tok, f"the names here are {', '.join(known)}; define it with let first")

    def same_number_type(self, a: Node, b: Node, ta, tb, op: str) -> tuple[Node, Node]:
        for e, tr in ((a, ta), (b, tb)):
            if e.ty == BOOL:
                raise self.err(f"'{op}' needs numbers; this operand is a bool", tr,
                               "combine conditions with and/or/not; turn one into a number with select(cond, 1.0, 0.0)")
        if a.ty == b.ty:
            return a, b
        return (self.to_f32(a) if a.ty == INT else a), (self.to_f32(b) if b.ty == INT else b)

    def arith(self, op: str, t: Tree, at) -> Node:
        a, b = self.expr(t.children[0]), self.expr(t.children[1])
        a, b = self.same_number_type(a, b, t.children[0], t.children[1], op)
        if op == "/" and a.ty == INT:                      # '/' always divides values; '//' integers
            a, b = self.to_f32(a), self.to_f32(b)
        if op in ("//", "%") and a.ty != INT:
            raise self.err(f"'{op}' is integer arithmetic (indices); its operands here are f32", t,
                           "divide values with '/'")
        if a.ty == INT:
            has_var = [any(isinstance(n, Var) for n in e.walk()) for e in (a, b)]
            if (op == "*" and all(has_var)) or (op in ("//", "%") and any(has_var)):
                raise self.err(f"integer expressions must be affine in the loop variables; '{op}' here is not", t,
                               "multiply a loop variable only by constants (integers, k, s, m); "
                               "'//' and '%' take no loop variables")
        return Bin(a.ty, at, op, a, b)

    def call(self, t: Tree, at) -> Node:
        name, args = t.children[0], [a for a in t.children[1:] if a is not None]
        f = str(name)
        arity = {**{u: 1 for u in UNARY_FUNCS}, **{b: 2 for b in BINARY_FUNCS}, "select": 3}
        if f not in arity:
            raise self.err(f"unknown function '{f}'", name,
                           f"the functions are {', '.join(arity)}; reductions are {', '.join(REDUCTIONS)}(j in a..b: ...)")
        if len(args) != arity[f]:
            form = {1: f"{f}(x)", 2: f"{f}(a, b)", 3: "select(cond, then, else)"}[arity[f]]
            raise self.err(f"{f}() takes {arity[f]} argument{'s' * (arity[f] > 1)}, not {len(args)}", name, f"write {form}")
        if f == "select":
            return Call(F32, at, f, (self.cond(args[0]), self.value(args[1], "select's then"),
                                     self.value(args[2], "select's else")))
        return Call(F32, at, f, tuple(self.value(a, f"{f}()'s argument") for a in args))

    def reduce(self, t: Tree, at) -> Node:
        name, var, lo, hi, *order, body = t.children
        f = str(name)
        if f not in REDUCTIONS:
            raise self.err(f"'{f}' is not a reduction", name, f"the reductions are {', '.join(REDUCTIONS)}")
        how = str(order[0]) if order and order[0] is not None else SEQUENTIAL
        if how not in ORDERS:
            raise self.err(f"unknown order '{how}'", order[0],
                           "a sum's order is sequential (the default) or pairwise, e.g. sum(j in 0..k, pairwise: ...)")
        if order and order[0] is not None and f != "sum":
            raise self.err(f"only a sum takes an order; {f} keeps the first extreme whatever the order", order[0],
                           f"drop ', {how}'")
        self.fresh(var, "a reduction variable")
        lo_e, hi_e = self.constant_int(lo, "a reduction bound"), self.constant_int(hi, "a reduction bound")
        self.vars.append(str(var))
        try:
            return Reduce(F32, at, f, str(var), lo_e, hi_e, self.value(body, f"{f}'s body"), how)
        finally:
            self.vars.pop()


__all__ = ["Program", "parse_program", "check_program", "slot_width", "LANGUAGE", "Let", "Assign", "Loop"]
