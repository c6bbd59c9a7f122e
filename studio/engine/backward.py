"""The backward notation (grammar: resources/grammars/backward.lark): how gradients flow through
an op: nondifferentiable, composite (autodiff through its parts), or declared VJP rules."""
from __future__ import annotations

from dataclasses import dataclass

from lark import Token, Tree

from .errors import StudioError
from .grammar import Source, parse
from .signature import Signature

EXAMPLE = 'vjp x: reference(vjp_x) on device("backward.wgsl")'


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
class Backward:
    kind: str  # "nondifferentiable" | "composite" | "vjp"
    rules: tuple[VjpRule, ...]
    text: str
    file: str | None = None

    @property
    def differentiable(self) -> bool:
        return self.kind != "nondifferentiable"

    def __str__(self):
        return "\n".join(map(str, self.rules)) if self.kind == "vjp" else self.kind


def parse_backward(text: str, *, file: str | None = None, line: int = 1, col: int = 1) -> Backward:
    """Parse a backward declaration; text starts at (line, col) of file. Raises StudioError."""
    src = Source(text, file, line, col)
    return parse("backward", src, lambda tree: _backward(tree, src), EXAMPLE)


def _backward(tree: Tree, src: Source) -> Backward:
    decls = [d for d in tree.children if d is not None]
    if not decls:
        raise src.error("no backward declared", src.at(1, 1), f"write nondifferentiable, composite, or {EXAMPLE}")
    kinds = [str(d) if isinstance(d, Token) else "vjp" for d in decls]
    for d, kind in zip(decls[1:], kinds[1:]):
        if kind != "vjp" or kinds[0] != "vjp":
            at = d if isinstance(d, Token) else src.at(d.meta.line, d.meta.column)
            raise src.error(f"'{kind}' after '{kinds[0]}'", at,
                            "declare one of: nondifferentiable, composite, or vjp lines (one per input group)")
    return Backward(kinds[0], tuple(_rule(d, src) for d in decls if kinds[0] == "vjp"), src.text, src.file)


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
