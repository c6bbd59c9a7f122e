"""The abstract syntax of an assignment program (docs/assignment-programs.md): typed, immutable
nodes whose str() is the canonical text (minimal parentheses; the program's hash is over it).

Types: ``int`` (index arithmetic: integer literals, the sizes k s m, loop variables),
``f32`` and ``bool``. The parser inserts ``ToF32`` wherever an int is used as a value, so every
operator's operands share one type and the evaluators never guess."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

INT, F32, BOOL = "int", "f32", "bool"
VIEWS = ("param", "sample", "contrib", "state", "mean", "slot")   # rate is a view without an index
SIZES = ("k", "s", "m")
UNARY_FUNCS = ("exp", "log", "sqrt", "abs")
BINARY_FUNCS = ("min", "max")
REDUCTIONS = ("sum", "min", "max", "argmin", "argmax")
SEQUENTIAL, PAIRWISE = "sequential", "pairwise"
ORDERS = (SEQUENTIAL, PAIRWISE)          # a sum's declared order; sequential is the default
ORDER_TEXT = {
    SEQUENTIAL: "sequential: left to right, ((t0 + t1) + t2) + ..., each addition one IEEE-754 binary32 addition, "
                "round to nearest even",
    PAIRWISE: "pairwise: level by level, each level adds the pairs (0, 1), (2, 3), ... of the level before, left "
              "operand first, and carries an odd last element up unchanged, until one value is left; each addition "
              "one IEEE-754 binary32 addition, round to nearest even"}
_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6, "neg": 7}
ATOM = 8


@dataclass(frozen=True)
class Node:
    ty: str
    at: tuple[int, int] = field(default=(0, 0), compare=False, repr=False)   # (line, col) in the file

    prec = ATOM

    def children(self) -> tuple[Node, ...]:
        return ()

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children():
            yield from c.walk()

    def wrap(self, min_prec: int) -> str:
        return f"({self})" if self.prec < min_prec else str(self)


@dataclass(frozen=True)
class Num(Node):
    value: float = 0.0            # already an f32 value

    def __str__(self):
        return repr(float(self.value))   # finite and >= 0: the parser refuses the rest


@dataclass(frozen=True)
class Int(Node):
    value: int = 0

    def __str__(self):
        return str(self.value)


@dataclass(frozen=True)
class Size(Node):
    """k, s or m: known once the program is checked against a layout."""
    name: str = "k"

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Var(Node):
    """A loop or reduction variable (int)."""
    name: str = "i"

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class LetRef(Node):
    name: str = "x"

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Read(Node):
    """view[index] (index None: the scalar view 'rate')."""
    view: str = "slot"
    index: Node | None = None

    def children(self):
        return () if self.index is None else (self.index,)

    def __str__(self):
        return self.view if self.index is None else f"{self.view}[{self.index}]"


@dataclass(frozen=True)
class ToF32(Node):
    """An int used as an f32 value (exact: the checker keeps |value| <= 2^24)."""
    operand: Node | None = None

    @property
    def prec(self):
        return self.operand.prec

    def children(self):
        return (self.operand,)

    def __str__(self):
        return str(self.operand)


@dataclass(frozen=True)
class Unary(Node):
    op: str = "-"                 # "-" | "not"
    operand: Node | None = None

    @property
    def prec(self):
        return _PREC["neg" if self.op == "-" else "not"]

    def children(self):
        return (self.operand,)

    def __str__(self):
        return ("-" + self.operand.wrap(_PREC["neg"])) if self.op == "-" else "not " + self.operand.wrap(_PREC["not"])


@dataclass(frozen=True)
class Bin(Node):
    """Arithmetic (+ - * / // %), comparison (< <= > >= == !=) or logic (and, or)."""
    op: str = "+"
    left: Node | None = None
    right: Node | None = None

    @property
    def prec(self):
        return _PREC.get(self.op, _PREC["cmp"])

    def children(self):
        return (self.left, self.right)

    def __str__(self):   # left-associative; a comparison does not chain
        p = self.prec
        right = p + 1
        left = p + 1 if p == _PREC["cmp"] else p
        return f"{self.left.wrap(left)} {self.op} {self.right.wrap(right)}"


@dataclass(frozen=True)
class Call(Node):
    func: str = "exp"             # exp log sqrt abs (1), min max (2), select (3: cond, then, else)
    args: tuple[Node, ...] = ()

    def children(self):
        return self.args

    def __str__(self):
        return f"{self.func}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Reduce(Node):
    """func(var in lo..hi: body), evaluated left to right in f32 (docs/assignment-programs.md);
    a sum may declare the pairwise tree instead: sum(var in lo..hi, pairwise: body). The canonical
    text names the order only when it is not the default, so a program without one keeps its hash."""
    func: str = "sum"
    var: str = "j"
    lo: Node | None = None
    hi: Node | None = None
    body: Node | None = None
    order: str = SEQUENTIAL

    def children(self):
        return (self.lo, self.hi, self.body)

    def __str__(self):
        order = "" if self.order == SEQUENTIAL else f", {self.order}"
        return f"{self.func}({self.var} in {self.lo}..{self.hi}{order}: {self.body})"


@dataclass(frozen=True)
class Loop:
    var: str
    lo: Node
    hi: Node

    def __str__(self):
        return f"{self.var} in {self.lo}..{self.hi}"


@dataclass(frozen=True)
class Let:
    name: str
    expr: Node
    at: tuple[int, int] = field(default=(0, 0), compare=False)

    def __str__(self):
        return f"let {self.name} = {self.expr}"


@dataclass(frozen=True)
class Assign:
    """target := expr over the box of ``loops`` (empty: one assignment), as one parallel write."""
    loops: tuple[Loop, ...]
    target: Read
    expr: Node
    at: tuple[int, int] = field(default=(0, 0), compare=False)

    def __str__(self):
        head = f"for {', '.join(map(str, self.loops))}: " if self.loops else ""
        return f"{head}{self.target} := {self.expr}"


Statement = Let | Assign


def sum_orders(statements) -> set[str]:
    """The orders the sums of these statements declare."""
    return {n.order for st in statements for n in st.expr.walk() if isinstance(n, Reduce) and n.func == "sum"}


def f32(value: float) -> float:
    """A decimal literal as the f32 it denotes (round to nearest even)."""
    with np.errstate(over="ignore"):           # too large: inf, which the parser refuses
        return float(np.float32(value))
