"""A kernel's WGSL as the product's grammar reads it (resources/grammars/wgsl.lark): the parse tree
and its module-scope declarations, each at the 1-based line:col of its name. The device layer's
checks (bindings, device/layout.py; overrides, device/overrides.py) and the proof layer's
(@workgroup_size, proof/geometry.py; the flow and bounds checks and the race sanitizer, through
proof/wgsl_reader.py) all read the kernel here, so a comment, a line break or an attribute order
reads the same for every check. It is not a compiler (naga is): a text the grammar refuses raises
a StudioError at the line:col where the grammar stopped."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from lark import Token, Tree

from .grammar import Source, parse

EXAMPLE = "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3<u32>) { }"


@lru_cache(maxsize=32)
def parse_wgsl(source: str, *, file: str | None = None) -> Tree:
    """The parse tree of a WGSL module (shared between callers: read it, never change it); a
    StudioError at line:col where the grammar stops."""
    return parse("wgsl", Source(source, file), lambda t: t, EXAMPLE)


def kids(t: Tree) -> list:
    """The children that are subtrees (the placeholders of absent optional parts dropped)."""
    return [c for c in t.children if isinstance(c, Tree)]


def name_of(t: Tree) -> Token:
    """The first NAME token among ``t``'s own children (a declaration's or a function's name)."""
    return next(c for c in t.children if isinstance(c, Token) and c.type == "NAME")


def attrs(t: Tree) -> dict[str, list]:
    """{attribute name: its argument subtrees} of a declaration, parameter or member."""
    out = {}
    for a in t.children:
        if isinstance(a, Tree) and a.data == "attr":
            out[str(a.children[1])] = kids(a)
    return out


def attr_token(t: Tree, name: str) -> Token | None:
    """The name token of ``t``'s attribute ``@name`` (where it is written), if it has one."""
    return next((a.children[1] for a in t.children if isinstance(a, Tree) and a.data == "attr"
                 and str(a.children[1]) == name), None)


def type_of(t: Tree) -> Tree | None:
    return next((c for c in t.children if isinstance(c, Tree) and c.data == "type"), None)


def text_of(node: Tree | Token) -> str:
    """An expression's text on one line: its tokens, a space only where the source had a gap (so
    comments and line breaks inside it go, and a shift's `>` `>` stays together)."""
    if isinstance(node, Token):
        return str(node)
    out, end = [], None
    for tok in node.scan_values(lambda v: isinstance(v, Token)):
        out.append(("" if end is None or tok.start_pos == end else " ") + str(tok))
        end = tok.end_pos
    return "".join(out)


def int_value(t: Tree | None) -> int | None:
    """The value of a plain integer literal (`3`, `3u`, `0x10i`), else None (a name, an expression)."""
    if t is None or t.data != "int":
        return None
    try:
        return int(str(t.children[0]).rstrip("iu"), 0)
    except ValueError:
        return None


# ---- module-scope declarations ---------------------------------------------------------------------

@dataclass(frozen=True)
class Variable:
    """A module-scope ``var``: ``@group(g) @binding(b) var<space...> name: type``."""
    name: str
    space: tuple[str, ...]           # the words between `<` and `>`: ("storage", "read_write"), ("uniform",)
    group: int | None                # None: no @group, or one the checker cannot read as a number
    binding: int | None
    line: int                        # of the name
    col: int


@dataclass(frozen=True)
class Override:
    """A module-scope ``[@id(N)] override name [: type] [= init];``."""
    name: str
    type: str | None                 # as written, else inferred from a literal initializer, else None
    id: str | None                   # the @id argument as written
    default: bool                    # has an initializer
    init: str | None                 # the initializer's text
    line: int                        # of the name
    col: int


@dataclass(frozen=True)
class EntryAttributes:
    """A function's `@workgroup_size(...)` arguments as written (None: it has none), where the
    attribute's name is (else where `fn` is)."""
    workgroup_size: tuple[str, ...] | None
    line: int
    col: int


def variables(source: str, *, file: str | None = None) -> list[Variable]:
    out = []
    for d in kids(parse_wgsl(source, file=file)):
        if d.data != "global_var":
            continue
        at, name = attrs(d), name_of(d)
        space = next((c for c in kids(d) if c.data == "space"), None)
        words = tuple(str(c) for c in space.children if isinstance(c, Token) and c.type == "NAME") if space else ()
        group, binding = (int_value(at[k][0]) if at.get(k) else None for k in ("group", "binding"))
        out.append(Variable(str(name), words, group, binding, name.line, name.column))
    return out


def overrides(source: str, *, file: str | None = None) -> dict[str, Override]:
    out = {}
    for d in kids(parse_wgsl(source, file=file)):
        if d.data != "override_decl":
            continue
        at, name = attrs(d), name_of(d)
        ty = type_of(d)
        init = next((c for c in kids(d) if c.data not in ("attr", "type")), None)
        ident = text_of(at["id"][0]) if at.get("id") else None
        wtype = text_of(ty) if ty is not None else (literal_type(init) if init is not None else None)
        out[str(name)] = Override(str(name), wtype, ident, init is not None,
                                  text_of(init) if init is not None else None, name.line, name.column)
    return out


def literal_type(t: Tree) -> str | None:
    """The type of an initializer that is one literal: `7u` u32, `7i` or `7` i32, `1.5` or `1.5f`
    f32, `true` bool; None for anything else (a negated literal, a name, an `h` literal)."""
    if t.data in ("true", "false"):
        return "bool"
    if t.data not in ("int", "float"):
        return None
    lit = str(t.children[0])
    if t.data == "int":
        return "u32" if lit.endswith("u") else "i32"
    return None if lit.endswith("h") else "f32"


def entry_attributes(source: str, entry: str, *, file: str | None = None) -> EntryAttributes | None:
    """The attributes of ``fn entry`` (None: no such function)."""
    for d in kids(parse_wgsl(source, file=file)):
        if d.data == "function" and str(name_of(d)) == entry:
            at = attrs(d)
            where = attr_token(d, "workgroup_size") or next(c for c in d.children if isinstance(c, Token)
                                                           and c.type == "FN")
            size = tuple(text_of(a) for a in at["workgroup_size"]) if "workgroup_size" in at else None
            return EntryAttributes(size, where.line, where.column)
    return None
