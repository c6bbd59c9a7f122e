"""Integer/real arithmetic over named symbols: the shape and value expressions of the
signature and the binding descriptor (grammar: resources/grammars/expr.lark)."""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Callable, Iterator

from lark import Tree

from ..errors import StudioError
from .grammar import Source, parse

Number = int | float
FUNCTIONS = {"min": min, "max": max, "cdiv": lambda a, b: -(-a // b)}
_BINARY: dict[str, Callable[[Number, Number], Number]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a // b if isinstance(a, int) and isinstance(b, int) and a % b == 0 else a / b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b,
}
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2}  # unary minus: 3, atoms: 4


class Expr:
    """An immutable expression node. str() is the canonical text (minimal parentheses)."""
    prec = 4

    def eval(self, env: dict[str, Number]) -> Number:
        raise NotImplementedError

    def children(self) -> tuple[Expr, ...]:
        return ()

    def nodes(self) -> Iterator[Expr]:
        yield self
        for c in self.children():
            yield from c.nodes()

    def symbols(self) -> frozenset[str]:
        """The symbol names in the expression (kept on the node: it is immutable, and the corpus
        asks for a relation's symbols hundreds of thousands of times per signature)."""
        known = self.__dict__.get("_symbols")
        if known is None:
            known = frozenset(n.name for n in self.nodes() if isinstance(n, Sym))
            object.__setattr__(self, "_symbols", known)
        return known

    def wrap(self, min_prec: int) -> str:
        return f"({self})" if self.prec < min_prec else str(self)


@dataclass(frozen=True)
class Num(Expr):
    value: Number

    @property
    def prec(self) -> int:
        return 3 if self.value < 0 else 4

    def eval(self, env):
        return self.value

    def __str__(self):
        return repr(self.value)


@dataclass(frozen=True)
class Sym(Expr):
    name: str
    at: tuple[int, int] | None = field(default=None, compare=False, repr=False)  # (line, col) in the file

    def eval(self, env):
        if self.name not in env:
            raise StudioError(f"unknown symbol '{self.name}'",
                              hint=f"bind '{self.name}' as an input dim or declare it as a param")
        return env[self.name]

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Neg(Expr):
    operand: Expr
    prec = 3

    def eval(self, env):
        return -self.operand.eval(env)

    def children(self):
        return (self.operand,)

    def __str__(self):
        return "-" + self.operand.wrap(3)


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    left: Expr
    right: Expr

    @property
    def prec(self) -> int:
        return _PREC[self.op]

    def eval(self, env):
        a, b = self.left.eval(env), self.right.eval(env)
        if self.op in ("/", "//", "%") and b == 0:
            raise StudioError(f"division by zero in '{self}'", hint="check the values of its symbols")
        try:
            return _BINARY[self.op](a, b)
        except (OverflowError, ValueError):
            raise StudioError(f"'{self}' overflows", hint="check the values of its symbols") from None

    def children(self):
        return (self.left, self.right)

    def __str__(self):  # left-associative: an equal-precedence right operand keeps its parentheses
        return f"{self.left.wrap(self.prec)} {self.op} {self.right.wrap(self.prec + 1)}"


@dataclass(frozen=True)
class Call(Expr):
    func: str
    args: tuple[Expr, ...]

    def eval(self, env):
        a, b = (x.eval(env) for x in self.args)
        if self.func == "cdiv" and b == 0:
            raise StudioError(f"division by zero in '{self}'", hint="check the values of its symbols")
        return FUNCTIONS[self.func](a, b)

    def children(self):
        return self.args

    def __str__(self):
        return f"{self.func}({', '.join(map(str, self.args))})"


def size(expr: Expr, env: dict[str, Number], what: str, field: str | None = None) -> int:
    """Evaluate expr as a size: a non-negative integer (an integral float is accepted)."""
    v = expr.eval(env)
    if isinstance(v, float) and v.is_integer():  # False for inf and nan
        v = int(v)
    if not isinstance(v, numbers.Integral) or v < 0:
        raise StudioError(f"{what} '{expr}' = {v} is not a size (a non-negative integer)", field=field,
                          hint="choose params and input shapes that make it a non-negative integer")
    return int(v)


_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%"}


def parse_expr(text: str, *, file: str | None = None, line: int = 1, col: int = 1) -> Expr:
    src = Source(text, file, line, col)
    return parse("expr", src, lambda tree: build(tree, src), "n - w + 1")


def build(tree: Tree, src: Source) -> Expr:
    """Turn an expr parse tree of src into an Expr (StudioError: unknown function, wrong arity)."""
    kind = tree.data.removeprefix("expr__")  # rules imported with %import .expr are prefixed
    kids = tree.children
    if kind == "start":
        return build(kids[0], src)
    if kind == "sym":
        return Sym(str(kids[0]), src.pos(kids[0]))
    if kind in ("int", "float"):
        try:
            value = int(kids[0]) if kind == "int" else float(kids[0])
        except ValueError:               # more digits than Python converts (sys.get_int_max_str_digits)
            value = None
        if value is None or value in (float("inf"), float("-inf")):   # found by tests/contract/test_fuzz.py
            raise src.error(f"the number {str(kids[0])[:24]}{'...' if len(kids[0]) > 24 else ''} is too large",
                            kids[0], "write a smaller number (a float must be finite in f64)")
        return Num(value)
    if kind == "neg":
        return Neg(build(kids[0], src))
    if kind == "call":
        name, args = kids[0], tuple(build(k, src) for k in kids[1:])
        if name not in FUNCTIONS:
            raise src.error(f"unknown function '{name}'", name, f"the functions are {', '.join(FUNCTIONS)}")
        if len(args) != 2:
            raise src.error(f"{name}() takes 2 arguments, not {len(args)}", name, f"write {name}(a, b)")
        return Call(str(name), args)
    return BinOp(_OPS[kind], build(kids[0], src), build(kids[1], src))


def unknown_symbols(expr, known: set[str], what: str, file: str, field: str) -> list[StudioError]:
    """An error at the line:col (in op.toml) of the first symbol of ``expr`` the signature lacks."""
    stray = [n for n in expr.nodes() if isinstance(n, Sym) and n.name not in known]
    if not stray:
        return []
    names = sorted({n.name for n in stray})
    line, col = stray[0].at or (None, None)
    return [StudioError(f"{what} uses unknown symbol(s) {', '.join(names)}", file=file, line=line, col=col,
                        field=field, hint=f"use the signature's symbols: {', '.join(sorted(known))}")]
