"""The backward notation (grammar: resources/grammars/backward.lark): how gradients flow through
an op: nondifferentiable, composite (the op is its steps: autodiff through its parts), or declared
VJP rules. A composite's steps follow the `composite` line; binding and running them is
studio/engine/grad/composite.py."""
from __future__ import annotations

import re
from dataclasses import dataclass

from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from ..errors import StudioError
from .expr import Expr, build
from .grammar import Source, parse
from .signature import Signature

EXAMPLE = 'vjp x: reference(vjp_x) on device("backward.wgsl")'
STEP_EXAMPLE = "u = core/shape/unfold@1(x; w = w)"
COMPOSITE_EXAMPLE = f"composite, then one step per line such as {STEP_EXAMPLE}"
_STEP_LIKE = re.compile(r"[A-Za-z_]\w*(\s*,\s*[A-Za-z_]\w*)*\s*=")


@dataclass(frozen=True)
class VjpRule:
    inputs: tuple[str, ...]
    form: str  # "reference" | "route"
    function: str | None  # reference: the VJP function in reference.py
    device_kernel: str | None  # reference: optional WGSL file of the device VJP
    cotangent: str | None  # route: the incoming cotangent, e.g. dy
    index: str | None  # route: where the forward took each output from, e.g. argmedian
    line: int
    col: int

    def __str__(self):
        rhs = (f"route({self.cotangent}, to = {self.index})" if self.form == "route" else
               f"reference({self.function})" + (f' on device("{self.device_kernel}")' if self.device_kernel else ""))
        return f"vjp {', '.join(self.inputs)}: {rhs}"


@dataclass(frozen=True)
class Step:
    """One step of a composite: `outputs = op(args; params)`."""
    outputs: tuple[str, ...]
    op: str                                      # namespace/author/name@version
    args: tuple[tuple[str | None, str], ...]     # (callee input or None when positional, value name)
    params: tuple[tuple[str, Expr], ...]         # callee param = expression over the composite's symbols
    line: int
    col: int

    def __str__(self):
        args = ", ".join(v if k is None else f"{k} = {v}" for k, v in self.args)
        params = ", ".join(f"{k} = {e}" for k, e in self.params)
        return f"{', '.join(self.outputs)} = {self.op}({args}{'; ' + params if params else ''})"


@dataclass(frozen=True)
class Composition:
    """The steps of a composite op, in order (positions are in file coordinates)."""
    steps: tuple[Step, ...]
    file: str | None = None

    def __str__(self):
        return "\n".join(map(str, self.steps))

    def chain(self) -> str:
        return " -> ".join(s.op for s in self.steps)


@dataclass(frozen=True)
class Backward:
    kind: str  # "nondifferentiable" | "composite" | "vjp"
    rules: tuple[VjpRule, ...]
    text: str
    file: str | None = None
    composition: Composition | None = None  # the steps, for kind "composite"

    @property
    def differentiable(self) -> bool:
        return self.kind != "nondifferentiable"

    def __str__(self):
        if self.kind == "composite":
            return f"composite\n{self.composition}"
        return "\n".join(map(str, self.rules)) if self.kind == "vjp" else self.kind


def parse_backward(text: str, *, file: str | None = None, line: int = 1, col: int = 1) -> Backward:
    """Parse a backward declaration; text starts at (line, col) of file. Raises StudioError."""
    src = Source(text, file, line, col)
    composite = isinstance(text, str) and bool(re.search(r"(?m)^[\t \f]*composite\b|/\w*@", text))
    return parse("backward", src, lambda tree: _backward(tree, src), COMPOSITE_EXAMPLE if composite else EXAMPLE,
                 lambda e: _misplaced_step(e, src))


def _kind(decl) -> str:
    return str(decl) if isinstance(decl, Token) else str(decl.data)  # nondifferentiable, composite, vjp, step


def _backward(tree: Tree, src: Source) -> Backward:
    decls = [d for d in tree.children if d is not None]
    if not decls:
        raise src.error("no backward declared", src.at(1, 1),
                        f"write nondifferentiable, {EXAMPLE}, or {COMPOSITE_EXAMPLE}")
    kinds = [_kind(d) for d in decls]
    first = kinds[0]  # never a step: the grammar admits steps only after 'composite'
    for d, kind in zip(decls[1:], kinds[1:]):
        if not (kind == first == "vjp" or (kind == "step" and first == "composite")):
            at = d if isinstance(d, Token) else src.at(d.meta.line, d.meta.column)
            raise src.error(f"'{kind}' after '{first}'", at,
                            "declare one of: nondifferentiable, composite and its steps, or vjp lines "
                            "(one per input group)")
    if first == "composite":
        steps = tuple(_step(d, src) for d in decls[1:])
        if not steps:
            raise src.error("'composite' without steps: the op is its steps", decls[0],
                            f"list them on the lines after it, one per line, e.g. {STEP_EXAMPLE}")
        return Backward(first, (), src.text, src.file, Composition(steps, src.file))
    return Backward(first, tuple(_rule(d, src) for d in decls if first == "vjp"), src.text, src.file)


def _rule(tree: Tree, src: Source) -> VjpRule:
    *inputs, rhs = tree.children
    at = src.at(tree.meta.line, tree.meta.column)
    names = tuple(map(str, inputs))
    if rhs.data == "route":
        cotangent, index = rhs.children
        return VjpRule(names, "route", None, None, str(cotangent), str(index), *at)
    function, kernel = rhs.children
    function = function.children[0]  # fname keeps its token, keyword or not
    if kernel is not None and not kernel.endswith('.wgsl"'):
        raise src.error(f"the device VJP {kernel} is not a .wgsl file", kernel, 'write on device("backward.wgsl")')
    return VjpRule(names, "reference", str(function), str(kernel)[1:-1] if kernel else None, None, None, *at)


def _step(tree: Tree, src: Source) -> Step:
    kids = list(tree.children)
    args_t = next((k for k in kids if isinstance(k, Tree) and k.data == "args"), None)
    params_t = next((k for k in kids if isinstance(k, Tree) and k.data == "params"), None)
    *outs, op = [k for k in kids if isinstance(k, Token)]
    args = tuple((None, str(a.children[0])) if a.data == "positional" else (str(a.children[0]), str(a.children[1]))
                 for a in (args_t.children if args_t else []))
    params = tuple((str(p.children[0]), build(p.children[1], src)) for p in (params_t.children if params_t else []))
    return Step(tuple(map(str, outs)), str(op), args, params, *src.at(tree.meta.line, tree.meta.column))


def _misplaced_step(e: UnexpectedInput, src: Source) -> StudioError | None:
    """A step where the grammar admits none (first, or after nondifferentiable or vjp lines):
    say so, rather than 'unexpected name'."""
    tok = getattr(e, "token", None)
    if not isinstance(tok, Token) or tok.type != "NAME" or tok.line is None:
        return None
    lines = src.text.split("\n")
    line = lines[tok.line - 1]
    if line[:tok.column - 1].strip(" \t\f") or not _STEP_LIKE.match(line, tok.column - 1):
        return None
    before = [m.group(1) for text in lines[:tok.line - 1] if (m := re.match(r"[\t \f]*([A-Za-z_]\w*)", text))]
    if not before:
        return src.error("a composition step with no 'composite' line before it", tok,
                         "write composite on a line of its own above the steps")
    return src.error(f"a composition step after '{before[-1]}'", tok,
                     "steps belong to a composite backward alone: composite on the first line, then the steps, "
                     "with no vjp or nondifferentiable lines")


def check_against_signature(bw: Backward, sig: Signature) -> list[StudioError]:
    """Each VJP input must be an input of the signature, covered by one rule only."""
    errors: list[StudioError] = []
    covered: set[str] = set()
    inputs = {t.name for t in sig.inputs}
    for r in bw.rules:
        for name in r.inputs:
            problem = (f"'{name}' is not an input of {sig.name}" if name not in inputs else
                       f"'{name}' already has a VJP" if name in covered else None)
            if problem:
                errors.append(StudioError(problem, file=bw.file, line=r.line, col=r.col, field=name,
                                          hint=f"the inputs: {', '.join(sorted(inputs)) or 'none'}; one rule each"))
            covered.add(name)
    return errors
