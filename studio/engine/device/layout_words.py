"""wgpu's binding-layout problems in the product's words (the parsing is layout_errors.py's).

The one wgpu says least clearly is a uniform whose descriptor is shorter than the kernel's struct:
"Buffer structure size 32, added to one element of an unbound array, ... `min_binding_size`,
which is 8". Here the kernel's struct is read from its WGSL (members, WGSL's uniform layout rules:
scalars 4 bytes, vec2 8, vec3 and vec4 16-aligned, arrays with a 16-byte stride, `@align`/`@size`)
so the message names what the descriptor lacks — each member, or implicit padding, with its byte
offset — and the hint is the descriptor text to add. ``run_failure`` turns the same problems into
one clear error on the run path (a pipeline built for ``run`` or ``conform`` without ``check``)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import StudioError
from .layout_errors import LayoutProblem, parse_layout_error

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_SCALARS = {"f32": 4, "i32": 4, "u32": 4, "f16": 2}
_VEC = re.compile(r"^vec([234])(?:<\s*(\w+)\s*>|([fiuh]))$")
_ARRAY = re.compile(r"^array<\s*(.+?)\s*,\s*(\d+)u?\s*>$")
_SUFFIX = {"f": "f32", "i": "i32", "u": "u32", "h": "f16"}


@dataclass(frozen=True)
class Member:
    name: str
    type: str
    offset: int
    size: int
    scalar: str                      # the component type (u32 for anything the descriptor cannot hold)


def _layout(t: str) -> tuple[int, int, str] | None:
    """(size, align, component scalar) of a WGSL type in the uniform address space, or None."""
    t = t.strip()
    if t in _SCALARS:
        return _SCALARS[t], _SCALARS[t], t
    m = _VEC.match(t)
    if m:
        n, comp = int(m.group(1)), m.group(2) or _SUFFIX[m.group(3)]
        if comp not in _SCALARS:
            return None
        c = _SCALARS[comp]
        return n * c, (2 if n == 2 else 4) * c, comp
    m = _ARRAY.match(t)
    if m:
        inner = _layout(m.group(1))
        if inner is None:
            return None
        align = max(16, inner[1])
        stride = -(-inner[0] // align) * align
        return stride * int(m.group(2)), align, inner[2]
    return None


def uniform_struct(source: str, var: str) -> tuple[str, list[Member], int] | None:
    """(struct name, members with offsets, struct size) of ``var<uniform> var: S``, or None when the
    WGSL holds a type these rules do not cover."""
    text = _COMMENT.sub(" ", source)
    m = re.search(rf"var\s*<\s*uniform\s*>\s*{re.escape(var)}\s*:\s*(\w+)\s*;", text)
    if not m:
        return None
    s = re.search(rf"\bstruct\s+{re.escape(m.group(1))}\s*\{{(.*?)\}}", text, re.S)
    if not s:
        return None
    members, offset, top = [], 0, 1
    for text in _split(s.group(1)):
        part = re.fullmatch(r"((?:@\w+\s*\(\s*\d+\s*\)\s*)*)(\w+)\s*:\s*(.+)", text, re.S)
        if not part:
            return None
        attrs, name, typ = part.group(1), part.group(2), " ".join(part.group(3).split())
        lay = _layout(typ)
        if lay is None:
            return None
        size, align, scalar = lay
        a = re.search(r"@align\s*\(\s*(\d+)", attrs)
        z = re.search(r"@size\s*\(\s*(\d+)", attrs)
        align = int(a.group(1)) if a else align
        size = int(z.group(1)) if z else size
        offset = -(-offset // align) * align
        members.append(Member(name, typ, offset, size, scalar if scalar in ("u32", "i32", "f32") else "u32"))
        offset += size
        top = max(top, align)
    if not members:
        return None
    return m.group(1), members, -(-offset // top) * top


def _split(body: str) -> list[str]:
    """A struct body's members: split at commas (or old-style semicolons) outside <...>."""
    out, depth, cur = [], 0, ""
    for ch in body:
        depth += (ch == "<") - (ch == ">")
        if ch in ",;" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in out + [cur] if p.strip()]


def _missing_words(members: list[Member], start: int, end: int) -> list[tuple[str, str, int, str]]:
    """(field name, dtype, byte, what it is) for every 4-byte word of [start, end)."""
    out = []
    for o in range(start, end, 4):
        mem = next((mm for mm in members if mm.offset <= o < mm.offset + mm.size), None)
        if mem is None:
            out.append((f"_pad{o}", "u32", o, "implicit padding"))
        elif mem.size == 4 and mem.offset == o:
            out.append((mem.name, mem.scalar, o, mem.type))
        else:
            out.append((f"{mem.name}_{(o - mem.offset) // 4}", mem.scalar, o, f"word {(o - mem.offset) // 4} of "
                                                                           f"{mem.name}: {mem.type}"))
    return out


def struct_size_words(b, source: str | None, p: LayoutProblem) -> tuple[str, str]:
    """(message, hint) for a uniform binding ``b`` whose kernel struct is ``p.struct_size`` bytes
    and whose descriptor fields cover ``p.min_binding_size``."""
    have, need = p.min_binding_size or 4 * len(b.fields), p.struct_size or 0
    found = uniform_struct(source, b.name) if source else None
    last = b.fields[-1].name if b.fields else None
    where = f" after '{last}'" if last else ""
    if found is None or found[2] != need:
        n = max(1, (need - have) // 4)
        fields = ", ".join(f"_pad{have + 4 * k}: u32 = 0" for k in range(n))
        return (f"the kernel's uniform struct has size {need} bytes but the descriptor's {len(b.fields)} "
                f"field(s) cover {have}: bytes {have}..{need - 1} are missing (a pad field, or a field not listed)",
                f"add the missing 4-byte fields{where}, in the struct's order, e.g. {fields}")
    struct, members, size = found
    words = _missing_words(members, have, size)
    parts, data = [], []
    for _name, _dtype, o, _what in words:
        mem = next((mm for mm in members if mm.offset <= o < mm.offset + mm.size), None)
        part = f"{mem.name} ({mem.type} at byte {mem.offset})" if mem else f"implicit padding at byte {o}"
        if part not in parts:
            parts.append(part)
            if mem and not _is_pad(mem.name):
                data.append(mem.name)
    fields = ", ".join(f"{n}: {d} = {'0' if _is_pad(n) else '...'}" for n, d, _, _ in words)
    vectors = sorted({w[3].split(" of ")[1] for w in words if w[3].startswith("word ")})
    return (f"the kernel's struct {struct} has size {size} bytes but the descriptor's {len(b.fields)} field(s) cover "
            f"{have}: it lacks {', '.join(parts)}",
            f"add{where}: {fields}" + (
                f"; a descriptor field is a 4-byte scalar read by its WGSL name, so also declare "
                f"{', '.join(vectors)} in the struct as the scalar members named here (a pad is never read: "
                f"no arithmetic changes)" if vectors else "")
            + (f"; set {', '.join(data)} to its value" if data else "; pad fields are 0"))


def _is_pad(name: str) -> bool:
    return name.startswith("_") or "pad" in name.lower()


def run_failure(program, exc: Exception) -> StudioError | None:
    """A pipeline wgpu refused on the run path, in the product's words (None: not a layout problem)."""
    p = parse_layout_error(str(exc))
    if p is None:
        return None
    desc = program.bindings
    b = next((x for x in desc.bindings if (x.group, x.binding) == (p.group, p.binding)), None)
    fix = "run `scellis check` on the package: it names every disagreement at its line"
    if p.kind == "struct_size" and b is not None and b.kind == "uniform":
        msg, hint = struct_size_words(b, program.source, p)
        return StudioError(f"{program.op}: binding '{b.name}': {msg}", file=desc.file, line=b.line, col=b.col,
                           field=b.name, hint=hint)
    what = {"binding_type": f"the descriptor says {p.layout}, the kernel declares {p.shader}",
            "missing_binding": "the kernel uses it, the descriptor does not declare it",
            "entry_point": f"the kernel has no entry point '{p.entry}'"}.get(p.kind, p.cause)
    return StudioError(f"{program.op}: {p.slot if p.group is not None else 'the kernel'}"
                       f"{' (' + b.name + ')' if b else ''}: {what}", file=program.path, hint=fix)
