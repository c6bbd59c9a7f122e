"""Specialisation constants against the kernel: every ``override W: u32 = w`` line of a binding
descriptor must name a WGSL ``override`` declaration of the same type, and every WGSL override
without a default must be set by the descriptor. The WGSL side is read with the product's WGSL
grammar (contract/wgsl.py: module-scope declarations only, at the line:col of their name); wgpu
itself then judges each value when the pipeline of that value is created (Device.pipeline), which
conformance does for every value its corpus uses."""
from __future__ import annotations

from ..contract import wgsl
from ..contract.bindings import BindingDescriptor
from ..errors import StudioError

WGSL_TYPES = ("u32", "i32", "f32")          # what a descriptor override may be
PLACEHOLDER = {"u32": 1, "i32": 1, "f32": 1.0}   # a value for the checker's compile when WGSL has no default


def wgsl_overrides(source: str, *, file: str | None = None) -> dict[str, dict]:
    """Module-scope ``[@id(N)] override name [: type] [= init];`` with type (inferred from a
    literal initializer when not written: 7u u32, 7i or 7 i32, 1.5 f32, true bool), id,
    whether it has a default, and line/col of the name. Raises the grammar's StudioError (at the
    line:col where it stopped) for a text it cannot read."""
    return {name: {"name": name, "type": o.type, "id": o.id, "default": o.default, "line": o.line, "col": o.col}
            for name, o in wgsl.overrides(source, file=file).items()}


def check_overrides(kernel: str, desc: BindingDescriptor, *, kernel_file: str,
                    descriptor_file: str | None) -> list[StudioError]:
    """Each disagreement between the descriptor's overrides and the kernel's, naming both places (none
    for a text the grammar refuses: the compile that follows reports it, in naga's words)."""
    try:
        decls = wgsl_overrides(kernel, file=kernel_file)
    except (StudioError, RecursionError):   # a text the grammar refuses: the compile reports it
        return []
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
    keep it; the others get a placeholder of their type (conformance compiles the real values). A
    text the grammar refuses gets none: the compile then reports it."""
    try:
        decls = wgsl_overrides(kernel)
    except (StudioError, RecursionError):
        return {}
    return {o.name: PLACEHOLDER[o.dtype] for o in desc.overrides
            if o.name in decls and not decls[o.name]["default"]}
