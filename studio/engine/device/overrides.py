"""Specialisation constants against the kernel: every ``override W: u32 = w`` line of a binding
descriptor must name a WGSL ``override`` declaration of the same type, and every WGSL override
without a default must be set by the descriptor. Positions on the WGSL side come from pygments'
WGSL lexer (as for bindings, layout.py); wgpu itself then judges each value when the pipeline of
that value is created (Device.pipeline), which conformance does for every value its corpus uses."""
from __future__ import annotations

import re

from ..contract.bindings import BindingDescriptor
from ..errors import StudioError

WGSL_TYPES = ("u32", "i32", "f32")          # what a descriptor override may be
_FLOAT = re.compile(r"^[0-9.]+([eE][+-]?[0-9]+)?[fh]?$")
PLACEHOLDER = {"u32": 1, "i32": 1, "f32": 1.0}   # a value for the checker's compile when WGSL has no default


def wgsl_overrides(source: str) -> dict[str, dict]:
    """Module-scope ``[@id(N)] override name [: type] [= init];`` with type (inferred from a
    literal initializer when not written: 7u u32, 7i or 7 i32, 1.5 f32, true bool), id,
    whether it has a default, and line/col of the name."""
    from pygments.lexers import get_lexer_by_name
    toks = [(pos, val) for pos, tt, val in get_lexer_by_name("wgsl").get_tokens_unprocessed(source)
            if val.strip() and not val.lstrip().startswith("//")]
    found: dict[str, dict] = {}
    depth = 0
    for i, (pos, val) in enumerate(toks):
        if val == "{":
            depth += 1
        elif val == "}":
            depth -= 1
        if val != "override" or depth != 0 or i + 1 >= len(toks):
            continue
        npos, name = toks[i + 1]
        ident = None
        if i >= 4 and toks[i - 4][1] == "@" and toks[i - 3][1] == "id" and toks[i - 2][1] == "(":
            ident = toks[i - 1][1]
        if i >= 5 and toks[i - 5][1] == "@" and toks[i - 4][1] == "id":
            ident = toks[i - 2][1]
        j, wtype, init = i + 2, None, []
        if j < len(toks) and toks[j][1] == ":":
            wtype = toks[j + 1][1] if j + 1 < len(toks) else None
            j += 2
        if j < len(toks) and toks[j][1] == "=":
            j += 1
            while j < len(toks) and toks[j][1] != ";":
                init.append(toks[j][1])
                j += 1
        if wtype is None and len(init) == 1:
            wtype = _literal_type(init[0])
        line = source.count("\n", 0, npos) + 1
        col = npos - (source.rfind("\n", 0, npos) + 1) + 1
        found[name] = {"name": name, "type": wtype, "id": ident, "default": bool(init), "line": line, "col": col}
    return found


def _literal_type(lit: str) -> str | None:
    if lit in ("true", "false"):
        return "bool"
    if lit.endswith("u") and lit[:-1].isdigit():
        return "u32"
    if lit.endswith("i") and lit[:-1].isdigit() or lit.isdigit():
        return "i32"
    if _FLOAT.match(lit) and not lit.endswith("h"):
        return "f32"
    return None


def check_overrides(kernel: str, desc: BindingDescriptor, *, kernel_file: str,
                    descriptor_file: str | None) -> list[StudioError]:
    """Each disagreement between the descriptor's overrides and the kernel's, naming both places."""
    decls = wgsl_overrides(kernel)
    errors: list[StudioError] = []

    def site(d: dict) -> StudioError:
        return StudioError(f"`override {d['name']}{': ' + d['type'] if d['type'] else ''}`", file=kernel_file,
                           line=d["line"], col=d["col"])

    for o in desc.overrides:
        d = decls.get(o.name)
        where = dict(file=descriptor_file, line=o.line, col=o.col, field=f"override {o.name}")
        if d is None:
            have = ", ".join(sorted(decls)) or "none"
            errors.append(StudioError(f"override '{o.name}': the kernel has no `override {o.name}` declaration "
                                      f"(its overrides: {have})", **where,
                                      related=[StudioError("the kernel", file=kernel_file)],
                                      hint=f"declare it at module scope: override {o.name}: {o.dtype};"))
        elif d["type"] is None:
            errors.append(StudioError(f"override '{o.name}': the kernel's declaration has no type the checker "
                                      f"can read", **where, related=[site(d)],
                                      hint=f"write its type: override {o.name}: {o.dtype};"))
        elif d["type"] != o.dtype:
            errors.append(StudioError(f"override '{o.name}': the descriptor says {o.dtype}, the kernel declares "
                                      f"{d['type']}", **where, related=[site(d)],
                                      hint=f"make both {d['type'] if d['type'] in WGSL_TYPES else o.dtype}"))
        elif d["id"] is not None:
            errors.append(StudioError(f"override '{o.name}': the kernel gives it @id({d['id']}); the descriptor "
                                      f"sets overrides by name", **where, related=[site(d)],
                                      hint="remove the @id attribute"))
    bound = {o.name for o in desc.overrides}
    for d in decls.values():
        if not d["default"] and d["name"] not in bound:
            errors.append(StudioError(f"the kernel's `override {d['name']}` has no default and the descriptor "
                                      f"does not set it", file=kernel_file, line=d["line"], col=d["col"],
                                      field=f"override {d['name']}",
                                      hint=f"add to the bindings: override {d['name']}: {d['type'] or 'u32'} = <expr>"
                                           f", or give it a default in the kernel"))
    return errors


def check_constants(kernel: str, desc: BindingDescriptor) -> dict[str, int | float]:
    """Values for compiling the kernel before any call: overrides the kernel gives a default
    keep it; the others get a placeholder of their type (conformance compiles the real values)."""
    decls = wgsl_overrides(kernel)
    return {o.name: PLACEHOLDER[o.dtype] for o in desc.overrides
            if o.name in decls and not decls[o.name]["default"]}
