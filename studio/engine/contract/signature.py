"""The shape-signature language (grammar: resources/grammars/signature.lark): typed inputs with
symbolic shapes, params with constraints, relations, outputs with shape expressions."""
from __future__ import annotations

import math
import numbers
import operator
from dataclasses import dataclass

from lark import Token, Tree

from ..errors import StudioError
from ..precision import DTYPE_BYTES, INT_RANGE
from .domains import Domain, build_domain, open_upper
from .expr import BinOp, Expr, Num, Number, Sym, build, size
from .grammar import Source, parse

COMPARE = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
           "==": operator.eq, "!=": operator.ne}
EXAMPLE = "windowed_median(x: f32[n] finite; w: u32 odd in [1, 31], w <= n) -> y: f32[n - w + 1]"


@dataclass(frozen=True)
class DataDim:
    """An output size known only after the op runs (written ?m)."""
    name: str

    def __str__(self):
        return f"?{self.name}"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    dims: tuple[Expr | DataDim, ...]
    domain: Domain
    line: int
    col: int

    def shape(self, env: dict[str, Number]) -> tuple[int, ...]:
        for d in self.dims:
            if isinstance(d, DataDim):
                raise StudioError(f"{self.name} has the data-dependent size '{d}': its shape is known only "
                                  "after the op runs", field=self.name,
                                  hint="size its buffer from an upper bound, or read the size from the result")
        return tuple(size(d, env, f"{self.name} dim {i}", self.name) for i, d in enumerate(self.dims))

    def __str__(self):
        domain = "" if self.domain.kind == "any" else f" {self.domain}"
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.dims))}]{domain}"


@dataclass(frozen=True)
class ParamSpec:
    name: str
    dtype: str
    parity: str | None
    lo: Expr | None
    hi: Expr | None
    line: int
    col: int

    def __str__(self):
        rng = f" in [{self.lo}, {self.hi}]" if self.lo is not None else ""
        return f"{self.name}: {self.dtype}{' ' + self.parity if self.parity else ''}{rng}"


@dataclass(frozen=True)
class Relation:
    left: Expr
    op: str
    right: Expr
    line: int
    col: int

    def __str__(self):
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class Signature:
    name: str
    inputs: tuple[TensorSpec, ...]
    params: tuple[ParamSpec, ...]
    relations: tuple[Relation, ...]
    outputs: tuple[TensorSpec, ...]
    text: str

    @property
    def shape_class(self) -> str:
        dynamic = any(isinstance(d, DataDim) for t in self.outputs for d in t.dims)
        return "dynamic" if dynamic else "static"

    @property
    def symbols(self) -> frozenset[str]:
        """The names expressions may use: dim symbols bound by inputs, and params."""
        return bound_symbols(self.inputs, self.params)

    def param(self, name: str) -> ParamSpec:
        return self._find(self.params, name, "param")

    def input(self, name: str) -> TensorSpec:
        return self._find(self.inputs, name, "input")

    def output(self, name: str) -> TensorSpec:
        return self._find(self.outputs, name, "output")

    def tensor(self, name: str) -> TensorSpec:
        return self._find(self.inputs + self.outputs, name, "tensor")

    def _find(self, specs, name, what):
        for s in specs:
            if s.name == name:
                return s
        raise StudioError(f"{self.name} has no {what} named '{name}'", field=name,
                          hint=f"its {what}s: {', '.join(s.name for s in specs) or 'none'}")

    def resolve(self, input_shapes: dict[str, tuple[int, ...]], params: dict[str, Number]) -> dict[str, Number]:
        """Bind dim symbols from the input shapes, check params, parity, ranges and relations.
        Returns the environment of dims and params."""
        self._no_strangers(input_shapes, self.inputs, "input")
        self._no_strangers(params, self.params, "param")
        env: dict[str, Number] = {}
        bound_by: dict[str, str] = {}  # dim symbol -> the input that bound it
        shapes = {t.name: self._shape_of(t, input_shapes) for t in self.inputs}
        for t in self.inputs:
            for d, s in zip(t.dims, shapes[t.name]):
                if not isinstance(d, Sym):
                    continue
                if env.setdefault(d.name, s) != s:
                    raise StudioError(f"{t.name} has {d.name} = {s} but {bound_by[d.name]} has {d.name} = "
                                      f"{env[d.name]}", field=t.name, hint=f"give both the same size {d.name}")
                bound_by.setdefault(d.name, t.name)
        self._bind_affine(shapes, env, bound_by)
        for p in self.params:
            env[p.name] = _check_param(p, params)
        for p in self.params:
            v = env[p.name]
            if p.parity and (v % 2 == 1) != (p.parity == "odd"):
                raise _violation(p.name, v, p.parity, (), env, p.name)
            if p.lo is not None and not _eval(p.lo, env, p.name) <= v <= _eval(p.hi, env, p.name):
                raise _violation(p.name, v, f"in [{p.lo}, {p.hi}]", (p.lo, p.hi), env, p.name)
        for t in self.inputs:
            for i, (d, s) in enumerate(zip(t.dims, input_shapes[t.name])):
                if not isinstance(d, Sym) and _eval(d, env, t.name) != s:
                    raise StudioError(f"{t.name} dim {i} is {s} but the signature says '{d}' = "
                                      f"{_eval(d, env, t.name)}{_values(d.symbols(), env)}", field=t.name,
                                      hint=f"pass {t.name} with the shape [{', '.join(map(str, t.dims))}]")
        for r in self.relations:
            if not COMPARE[r.op](_eval(r.left, env, None), _eval(r.right, env, None)):
                names = _ordered(r.left, r.right)  # blame the first param, else the first dim
                who = next((n for n in names if n not in bound_by), names[0] if names else None)
                raise _violation(who, env.get(who), str(r), (r.left, r.right), env, bound_by.get(who, who))
        return env

    def _bind_affine(self, shapes, env: dict, bound_by: dict) -> None:
        """A symbol only written as `s + c` or `s - c` in input dims (row_ptr: u32[rows + 1]) is
        bound by the first such dim: s = size - c."""
        params = {p.name for p in self.params}
        for t in self.inputs:
            for d, s in zip(t.dims, shapes[t.name]):
                a = affine(d)
                if a is None or a[0] in env or a[0] in params:
                    continue
                if s - a[1] < 0:
                    raise StudioError(f"{t.name} has {s} in the dim declared '{d}', so {a[0]} would be {s - a[1]}",
                                      field=t.name, hint=f"pass {t.name} with a size that makes {a[0]} >= 0")
                env[a[0]], bound_by[a[0]] = s - a[1], t.name

    def _no_strangers(self, given: dict, specs, what: str) -> None:
        for name in given:
            if name not in {s.name for s in specs}:
                raise StudioError(f"{self.name} has no {what} named '{name}'", field=name,
                                  hint=f"its {what}s: {', '.join(s.name for s in specs) or 'none'}")

    def _shape_of(self, t: TensorSpec, input_shapes) -> tuple[int, ...]:
        if t.name not in input_shapes:
            raise StudioError(f"missing input '{t.name}'", field=t.name, hint=f"pass {t}")
        shape = tuple(input_shapes[t.name])
        if len(shape) != len(t.dims) or not all(isinstance(s, numbers.Integral) and s >= 0 for s in shape):
            raise StudioError(f"{t.name} has shape {shape} but the signature declares {t} (rank {len(t.dims)})",
                              field=t.name, hint=f"pass {t.name} with {len(t.dims)} non-negative sizes")
        return tuple(map(int, shape))

    def output_shapes(self, env: dict[str, Number]) -> dict[str, tuple[int, ...]]:
        return {t.name: t.shape(env) for t in self.outputs}

    def memory_bytes(self, env: dict[str, Number]) -> int:
        """Bytes of all inputs and outputs, known before anything runs (static shape class only)."""
        for t in self.outputs:
            dyn = [str(d) for d in t.dims if isinstance(d, DataDim)]
            if dyn:
                raise StudioError(f"the memory budget of {self.name} is not static: output {t.name} has the "
                                  f"data-dependent size '{dyn[0]}'", field=t.name,
                                  hint="budget it from an upper bound on the output size")
        return sum(math.prod(t.shape(env)) * DTYPE_BYTES[t.dtype] for t in self.inputs + self.outputs)

    def __str__(self):
        params = ", ".join([*map(str, self.params), *map(str, self.relations)])
        outs = ", ".join(map(str, self.outputs))
        return (f"{self.name}({', '.join(map(str, self.inputs))}{'; ' + params if params else ''}) -> "
                + (outs if len(self.outputs) == 1 else f"({outs})"))


def affine(d) -> tuple[str, int] | None:
    """A dim written `s + c`, `c + s` or `s - c` (c an integer): (s, the offset c with its sign)."""
    if isinstance(d, BinOp) and d.op in ("+", "-"):
        left, right = d.left, d.right
        if isinstance(left, Sym) and isinstance(right, Num) and isinstance(right.value, int):
            return left.name, right.value if d.op == "+" else -right.value
        if d.op == "+" and isinstance(right, Sym) and isinstance(left, Num) and isinstance(left.value, int):
            return right.name, left.value
    return None


def bound_symbols(inputs, params) -> frozenset[str]:
    """Dim symbols bound by input shapes (plainly, or as `s + c`), and the params."""
    pnames = {p.name for p in params}
    dims = {d.name for t in inputs for d in t.dims if isinstance(d, Sym)}
    dims |= {a[0] for t in inputs for d in t.dims if (a := affine(d)) is not None and a[0] not in pnames}
    return frozenset(dims | pnames)


def _check_param(p: ParamSpec, params: dict[str, Number]) -> Number:
    if p.name not in params:
        raise StudioError(f"missing param '{p.name}' ({p})", field=p.name, hint=f"give a value for {p.name}")
    v = params[p.name]
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise StudioError(f"{p.name} = {v!r} is not a number", field=p.name, hint=f"give {p.name} a {p.dtype} value")
    if p.dtype not in INT_RANGE:
        return float(v)
    lo, hi = INT_RANGE[p.dtype]
    if not isinstance(v, numbers.Integral) or not lo <= v <= hi:
        raise StudioError(f"{p.name} = {v!r} is not a {p.dtype} (an integer in [{lo}, {hi}])", field=p.name,
                          hint=f"give {p.name} an integer value in [{lo}, {hi}]")
    return int(v)


def _eval(e: Expr, env: dict[str, Number], field: str | None) -> Number:
    try:
        return e.eval(env)
    except StudioError as err:
        err.field = err.field or field
        raise


def _ordered(*exprs: Expr) -> list[str]:
    """Symbol names in order of first appearance."""
    return list(dict.fromkeys(n.name for e in exprs for n in e.nodes() if isinstance(n, Sym)))


def _values(names, env: dict[str, Number]) -> str:
    return f" ({', '.join(f'{n} = {env[n]}' for n in names)})" if names else ""


def _violation(who: str | None, value, constraint: str, exprs, env, field) -> StudioError:
    head = f"{who} = {value} violates" if who else "violated:"
    others = [n for n in _ordered(*exprs) if n != who]
    return StudioError(f"{head} '{constraint}'{_values(others, env)}", field=field,
                       hint=f"choose values that satisfy '{constraint}'")


# ---- building a Signature from the parse tree, with the checks that need names ----

def parse_signature(text: str, *, file: str | None = None, line: int = 1, col: int = 1) -> Signature:
    """Parse a signature; text starts at (line, col) of file. Raises StudioError."""
    src = Source(text, file, line, col)
    return parse("signature", src, lambda tree: _Builder(src).signature(tree), EXAMPLE)


class _Builder:
    def __init__(self, src: Source):
        self.src = src
        self.names: dict[str, str] = {}  # input, param, output and dim-symbol names -> what they are

    def signature(self, tree: Tree) -> Signature:
        name, inputs_t, params_t, outputs_t = tree.children
        inputs = tuple(self.tensor(t, "input") for t in inputs_t.children) if inputs_t else ()
        items = params_t.children if params_t else []
        params = tuple(self.param(t) for t in items if t.data == "param")
        relations = tuple(self.relation(t) for t in items if t.data == "relation")
        outputs = tuple(self.tensor(t, "output") for t in outputs_t.children)
        known = bound_symbols(inputs, params)
        for e in [*(d for t in inputs + outputs for d in t.dims if not isinstance(d, DataDim)),
                  *(e for t in inputs for e in t.domain.exprs()),
                  *(b for p in params for b in (p.lo, p.hi) if b is not None),
                  *(s for r in relations for s in (r.left, r.right))]:
            for s in e.nodes():
                if isinstance(s, Sym) and s.name not in known:
                    raise self.src.error(f"unknown symbol '{s.name}'", s.at,
                                         f"bind '{s.name}' with an input dim (x: f32[{s.name}]) or declare it "
                                         f"as a param after ';' ({s.name}: u32)")
        return Signature(str(name), inputs, params, relations, outputs, self.src.text)

    def declare(self, tok: Token, what: str) -> None:
        if tok in self.names:
            raise self.src.error(f"'{tok}' is already declared as {self.names[tok]}", tok,
                                 "give each input, param, output and dim symbol its own name")
        self.names[str(tok)] = what

    def dtype(self, tok: Token) -> str:
        if tok not in DTYPE_BYTES:
            raise self.src.error(f"unknown dtype '{tok}'", tok, f"the dtypes are {', '.join(DTYPE_BYTES)}")
        return str(tok)

    def tensor(self, tree: Tree, what: str) -> TensorSpec:
        name, dtype, dims_t, *domain_t = tree.children
        self.declare(name, f"an {what}")
        dtype = self.dtype(dtype)
        dims = tuple(self.dim(d, what) for d in dims_t.children) if dims_t else ()
        domain = build_domain(domain_t[0], self.src, str(name), dtype, len(dims)) if domain_t and domain_t[0] \
            else Domain()
        return TensorSpec(str(name), dtype, dims, domain, *self.src.pos(name))

    def dim(self, tree: Tree, what: str) -> Expr | DataDim:
        if tree.data == "data_dim":
            tok = tree.children[0]
            if what == "input":
                raise self.src.error(f"an input cannot have the data-dependent size '?{tok}'", tok,
                                     "write the input's size as a name, e.g. x: f32[n]")
            if self.names.get(tok, "a data-dependent size") != "a data-dependent size":
                raise self.src.error(f"'{tok}' is already declared as {self.names[tok]}", tok,
                                     "give the data-dependent size its own name")
            self.names[str(tok)] = "a data-dependent size"
            return DataDim(str(tok))
        e = build(tree, self.src)
        if what == "input" and isinstance(e, Sym):
            if self.names.get(e.name, "a dim symbol") != "a dim symbol":
                raise self.src.error(f"'{e.name}' is already declared as {self.names[e.name]}", tree.children[0],
                                     "give each input, param, output and dim symbol its own name")
            self.names[e.name] = "a dim symbol"
        return e

    def param(self, tree: Tree) -> ParamSpec:
        name, dtype_tok, *quals = tree.children
        self.declare(name, "a param")
        dtype = self.dtype(dtype_tok)
        parity, lo, hi = None, None, None
        for q in quals:
            kw, *bounds = q.children
            if kw in ("odd", "even"):
                if parity is not None:
                    raise self.src.error(f"'{kw}' is repeated" if kw == parity else f"{name} cannot be both "
                                         "odd and even", kw, "keep one of odd and even")
                if dtype not in INT_RANGE:
                    raise self.src.error(f"'{kw}' needs an integer param, but {name} is {dtype}", kw,
                                         f"declare {name} as u32 or i32, or drop '{kw}'")
                parity = str(kw)
            else:
                if lo is not None:
                    raise self.src.error("a second range", kw, "keep one 'in [lo, hi]'")
                if q.data == "qualifier_open" and dtype not in INT_RANGE:
                    raise self.src.error(f"a half-open range needs an integer param, but {name} is {dtype}", kw,
                                         f"write in [lo, hi] for {name}, or declare it as u32 or i32")
                lo, hi = (build(b, self.src) for b in bounds)
                hi = open_upper(hi) if q.data == "qualifier_open" else hi
        return ParamSpec(str(name), dtype, parity, lo, hi, *self.src.pos(name))

    def relation(self, tree: Tree) -> Relation:
        left, op, right = tree.children
        return Relation(build(left, self.src), str(op), build(right, self.src),
                        *self.src.at(tree.meta.line, tree.meta.column))
