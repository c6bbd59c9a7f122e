"""The buffer binding descriptor (grammar: resources/grammars/bindings.lark): which buffer sits at
which @group/@binding, storage access, in-place buffers (``y : storage read_write f32[n] -> y_out``:
one buffer holds the input ``y`` when the kernel starts and the output ``y_out`` when it ends), outputs
written through WGSL atomics (``h : storage read_write u32[bins] atomic``), the layout of uniform structs, and the values of the kernel's WGSL `override` constants
(specialisation: one pipeline per value)."""
from __future__ import annotations

import math
import numbers
import struct
from dataclasses import dataclass
from typing import Iterator

from lark import Tree

from ..errors import StudioError
from ..precision import DTYPE_BYTES, INT_RANGE
from .expr import Expr, Number, Sym, build, size
from .grammar import Source, parse
from .signature import DataDim, Signature

EXAMPLE = "@group(0) @binding(0) x : storage read f32[n]"
ACCESS = ("read", "read_write")
FIELD_PACK = {"u32": "<I", "i32": "<i", "f32": "<f"}  # uniform field dtype -> struct format


@dataclass(frozen=True)
class UniformField:
    name: str
    dtype: str
    value: Expr
    line: int
    col: int


@dataclass(frozen=True)
class Binding:
    group: int
    binding: int
    name: str
    kind: str  # "storage" | "uniform"
    access: str | None  # storage: "read" | "read_write"
    dtype: str | None  # storage element dtype
    dims: tuple[Expr, ...]
    fields: tuple[UniformField, ...]
    line: int
    col: int
    writes: str | None = None  # in place (`-> y_out`): the output this input's buffer holds after the kernel
    atomic: bool = False  # `... atomic`: written through WGSL atomics, judged by value only (proof/races.py)

    @property
    def output(self) -> str:
        """The name of what this buffer holds after the kernel: the in-place output, else its own."""
        return self.writes or self.name

    @property
    def layout(self) -> str:
        """The part after the colon, canonical: 'storage read f32[n]' or 'uniform { n: u32 = n }'."""
        if self.kind == "uniform":
            return "uniform { " + ", ".join(f"{f.name}: {f.dtype} = {f.value}" for f in self.fields) + " }"
        return f"storage {self.access} {self.dtype}[{', '.join(map(str, self.dims))}]" + (
            f" -> {self.writes}" if self.writes else "") + (" atomic" if self.atomic else "")

    def _require(self, kind: str) -> None:
        if self.kind != kind:
            raise StudioError(f"{self.name} is a {self.kind} binding, not a {kind} one", field=self.name,
                              hint="uniforms have struct_size and uniform_bytes; storage has element_count")

    @property
    def struct_size(self) -> int:
        """WGSL size of the uniform struct: every field is a 4-byte scalar with alignment 4, so
        the fields pack without padding and the struct (alignment 4) needs none at its end."""
        self._require("uniform")
        return 4 * len(self.fields)

    def uniform_bytes(self, env: dict[str, Number]) -> bytes:
        """The uniform struct's contents, little-endian, from the symbol values in env."""
        self._require("uniform")
        return b"".join(_pack(self.name, f, env) for f in self.fields)

    def element_count(self, env: dict[str, Number]) -> int:
        self._require("storage")
        return math.prod(size(d, env, f"{self.name} dim {i}", self.name) for i, d in enumerate(self.dims))

    def __str__(self):
        return f"@group({self.group}) @binding({self.binding}) {self.name} : {self.layout}"


def _pack(binding: str, f: UniformField, env: dict[str, Number]) -> bytes:
    where = f"{binding}.{f.name}"
    try:
        v = f.value.eval(env)
    except StudioError as e:
        e.field = where
        raise
    if f.dtype in INT_RANGE:
        lo, hi = INT_RANGE[f.dtype]
        v = int(v) if isinstance(v, float) and v.is_integer() else v
        if not isinstance(v, numbers.Integral) or not lo <= v <= hi:
            raise StudioError(f"uniform field {where} = {v} does not fit {f.dtype} (an integer in [{lo}, {hi}])",
                              field=where, hint=f"check '{f.value}' or the field dtype")
    try:
        return struct.pack(FIELD_PACK[f.dtype], v)
    except OverflowError:
        raise StudioError(f"uniform field {where} = {v} does not fit f32", field=where,
                          hint=f"check '{f.value}'") from None


@dataclass(frozen=True)
class OverrideConstant:
    """``override W: u32 = w``: the kernel's WGSL ``override W: u32`` takes the value of ``w`` per
    call, so the compiler sees a constant (loops over it unroll) and each value is its own pipeline."""
    name: str
    dtype: str
    value: Expr
    line: int
    col: int
    candidates: tuple[int | float, ...] = ()     # `tune [..]`: the values `scellis tune` may choose
    candidates_at: tuple[tuple[int, int], ...] = ()

    @property
    def tunable(self) -> bool:
        return bool(self.candidates)

    def __str__(self):
        tune = f" tune [{', '.join(map(str, self.candidates))}]" if self.candidates else ""
        return f"override {self.name}: {self.dtype} = {self.value}{tune}"


@dataclass(frozen=True)
class BindingDescriptor:
    bindings: tuple[Binding, ...]
    text: str
    file: str | None = None
    line: int = 1  # where the text starts in file
    col: int = 1
    overrides: tuple[OverrideConstant, ...] = ()

    def override_values(self, env: dict[str, Number]) -> dict[str, int | float]:
        """The override constants' values for one call, each checked against its dtype."""
        return {o.name: _override_value(o, env) for o in self.overrides}

    def by_name(self, name: str) -> Binding:
        for b in self.bindings:
            if b.name == name:
                return b
        raise StudioError(f"no binding named '{name}'", file=self.file, field=name,
                          hint=f"the bindings: {', '.join(b.name for b in self.bindings) or 'none'}")

    @property
    def in_place(self) -> dict[str, Binding]:
        """Output name -> the in-place binding that holds it (an input's buffer, `-> output`)."""
        return {b.writes: b for b in self.bindings if b.writes}

    def __iter__(self) -> Iterator[Binding]:
        return iter(self.bindings)

    def __len__(self) -> int:
        return len(self.bindings)


def _override_value(o: OverrideConstant, env: dict[str, Number]) -> int | float:
    where = f"override {o.name}"
    try:
        v = o.value.eval(env)
    except StudioError as e:
        e.field = where
        raise
    if o.dtype in INT_RANGE:
        lo, hi = INT_RANGE[o.dtype]
        v = int(v) if isinstance(v, float) and v.is_integer() else v
        if not isinstance(v, numbers.Integral) or not lo <= v <= hi:
            raise StudioError(f"{where} = {v} does not fit {o.dtype} (an integer in [{lo}, {hi}])", field=where,
                              hint=f"check '{o.value}' or the override's dtype")
        return int(v)
    v = float(v)
    if not math.isfinite(v) or abs(v) > 3.4028234663852886e38:
        raise StudioError(f"{where} = {v} does not fit f32", field=where, hint=f"check '{o.value}'")
    return v


def parse_bindings(text: str, *, file: str | None = None, line: int = 1, col: int = 1) -> BindingDescriptor:
    """Parse a binding descriptor; text starts at (line, col) of file. Raises StudioError."""
    src = Source(text, file, line, col)
    return parse("bindings", src, lambda tree: _descriptor(tree, src), EXAMPLE)


def _descriptor(tree: Tree, src: Source) -> BindingDescriptor:
    slots: dict[tuple[int, int], str] = {}
    names: set[str] = set()
    out = []
    overrides: list[OverrideConstant] = []
    for b in filter(None, tree.children):
        if b.data == "override":
            name, dtype, value, tune = b.children
            if any(o.name == name for o in overrides):
                raise src.error(f"override '{name}' is already set", name, "set each override once")
            if dtype not in FIELD_PACK:
                raise src.error(f"unknown override dtype '{dtype}'", dtype,
                                f"the override dtypes are {', '.join(FIELD_PACK)}")
            o = OverrideConstant(str(name), str(dtype), build(value, src), *src.pos(name))
            if tune is not None:
                from .tunables import candidates     # the `tune [..]` rules: studio/engine/contract/tunables.py
                o = candidates(o, tune, src)
            overrides.append(o)
            continue
        group, binding, name, kind = b.children
        at = src.at(b.meta.line, b.meta.column)
        if (int(group), int(binding)) in slots:
            raise src.error(f"@group({group}) @binding({binding}) is already taken by "
                            f"{slots[int(group), int(binding)]}", at, "give each binding its own slot")
        if name in names or any(o.writes == name for o in out):
            raise src.error(f"'{name}' is already bound", name, "bind each buffer once")
        slots[int(group), int(binding)] = str(name)
        names.add(str(name))
        if kind.data == "storage":
            access, dtype, dims, inplace, atomic = kind.children
            if access not in ACCESS:
                raise src.error(f"unknown access '{access}'", access,
                                "write read (for an input) or read_write (for an output or scratch)")
            if dtype not in DTYPE_BYTES:
                raise src.error(f"unknown dtype '{dtype}'", dtype, f"the dtypes are {', '.join(DTYPE_BYTES)}")
            writes = None
            if inplace is not None:
                writes = str(inplace.children[0])
                if access != "read_write":
                    raise src.error(f"'{name}' is updated in place (-> {writes}) but bound '{access}'", access,
                                    f"write: {name} : storage read_write {dtype}[...] -> {writes}")
                if writes == name:
                    raise src.error(f"'{name} -> {writes}': the output needs a name of its own", inplace.children[0],
                                    f"name the output as the signature does, e.g. {name}_out (the input "
                                    f"stays '{name}')")
                if writes in names or any(o.writes == writes for o in out):
                    raise src.error(f"'{writes}' is already bound", inplace.children[0],
                                    "an in-place buffer names an output of the signature that no other "
                                    "binding holds")
            if atomic is not None and access != "read_write":
                raise src.error(f"'{name}' is declared atomic but bound '{access}'", access,
                                "only what the kernel writes (an output or scratch, read_write) is declared atomic")
            dims = tuple(build(d, src) for d in dims.children) if dims else ()
            out.append(Binding(int(group), int(binding), str(name), "storage", str(access), str(dtype), dims, (), *at,
                               writes=writes, atomic=atomic is not None))
        else:
            out.append(Binding(int(group), int(binding), str(name), "uniform", None, None, (),
                               _fields(kind.children, src), *at))
    return BindingDescriptor(tuple(out), src.text, src.file, src.line, src.col, tuple(overrides))


def _fields(trees: list[Tree], src: Source) -> tuple[UniformField, ...]:
    fields: list[UniformField] = []
    for t in trees:
        name, dtype, value = t.children
        if any(f.name == name for f in fields):
            raise src.error(f"field '{name}' is repeated", name, "give each field its own name")
        if dtype not in FIELD_PACK:
            raise src.error(f"unknown uniform field dtype '{dtype}'", dtype,
                            f"the uniform field dtypes are {', '.join(FIELD_PACK)}")
        fields.append(UniformField(str(name), str(dtype), build(value, src), *src.pos(name)))
    return tuple(fields)


def check_against_signature(desc: BindingDescriptor, sig: Signature) -> list[StudioError]:
    """Every input needs a 'storage read' binding and every output a 'storage read_write' one with
    the same dtype and dims; an in-place binding (`x : storage read_write f32[n] -> y`) is both an
    input's and an output's, and must fit both; other storage is read_write scratch; expressions use
    signature symbols."""
    errors: list[StudioError] = []
    bound = {b.name: b for b in desc}
    inputs, outputs = {t.name: t for t in sig.inputs}, {t.name: t for t in sig.outputs}
    for b in desc:
        if not b.writes:
            continue
        if b.name not in inputs or b.writes not in outputs:
            role, what = ("input", b.name) if b.name not in inputs else ("output", b.writes)
            errors.append(StudioError(f"'{b.name}' is updated in place (-> {b.writes}) but the signature has no "
                                      f"{role} '{what}'", file=desc.file, line=b.line, col=b.col, field=b.name,
                                      hint="an in-place buffer is an input of the signature that becomes one of "
                                           "its outputs: name both as the signature does"))
            continue
        t_in, t_out = inputs[b.name], outputs[b.writes]
        if t_in.dtype != t_out.dtype or [str(d) for d in t_in.dims] != [str(d) for d in t_out.dims]:
            errors.append(StudioError(f"'{b.name}' is updated in place (-> {b.writes}) but the input is "
                                      f"{t_in.dtype}[{', '.join(map(str, t_in.dims))}] and the output "
                                      f"{t_out.dtype}[{', '.join(map(str, t_out.dims))}]", file=desc.file,
                                      line=b.line, col=b.col, field=b.name,
                                      hint="one buffer holds both: give them the same dtype and dims, or bind "
                                           "the output to a buffer of its own"))
            continue
        bound.setdefault(b.writes, b)
    for role, access, specs in (("input", "read", sig.inputs), ("output", "read_write", sig.outputs)):
        for t in specs:
            b = bound.get(t.name)
            if b is not None and b.writes and role == "input":
                access = "read_write"     # an in-place buffer: its input is read_write (checked above)
            want = f"storage {access} {t.dtype}[{', '.join(map(str, t.dims))}]"
            if b is None:
                errors.append(StudioError(f"no binding for the {role} '{t.name}'", file=desc.file, line=desc.line,
                                          col=desc.col, field=t.name,
                                          hint=f"add: @group(0) @binding(N) {t.name} : {want}"))
            elif (b.kind, b.access, b.dtype) != ("storage", access, t.dtype) or len(b.dims) != len(t.dims) or any(
                    not isinstance(s, DataDim) and str(s) != str(d) for s, d in zip(t.dims, b.dims)):
                errors.append(StudioError(f"{t.name} is bound as '{b.layout}' but the signature's "
                                          f"{role} needs '{want}'", file=desc.file, line=b.line, col=b.col,
                                          field=t.name, hint=f"write: {t.name} : {want}"))
    tensors = {t.name for t in sig.inputs + sig.outputs}
    for b in desc:
        if b.name in tensors or b.writes:
            continue
        if b.kind == "storage" and b.access == "read":
            errors.append(StudioError(f"'{b.name}' is read-only storage but the signature has no input "
                                      f"'{b.name}'", file=desc.file, line=b.line, col=b.col, field=b.name,
                                      hint="bind scratch as read_write, or use an input's name"))
        for e in (*b.dims, *(f.value for f in b.fields)):
            for s in e.nodes():
                if isinstance(s, Sym) and s.name not in sig.symbols:
                    errors.append(StudioError(f"'{s.name}' is not a symbol of the signature", file=desc.file,
                                              line=s.at[0], col=s.at[1], field=b.name,
                                              hint=f"use {', '.join(sorted(sig.symbols)) or 'constants'}"))
    for o in desc.overrides:
        for s in o.value.nodes():
            if isinstance(s, Sym) and s.name not in sig.symbols:
                errors.append(StudioError(f"'{s.name}' is not a symbol of the signature", file=desc.file,
                                          line=s.at[0], col=s.at[1], field=f"override {o.name}",
                                          hint=f"use {', '.join(sorted(sig.symbols)) or 'constants'}"))
    return errors
