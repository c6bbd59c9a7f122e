"""Static launch-geometry checks: the workgroup size a contract declares (`[kernel]` and
`[backward]` workgroup_size, which the engine launches with) against the `@workgroup_size` of the
WGSL entry point. A disagreement used to surface only at run time as elements "never written".
wgpu exposes no reflection of an entry point's workgroup size, so the attribute is read from the
kernel's parse tree (contract/wgsl.py: the product's WGSL grammar, so a comment or a string of
attributes across lines reads as the compiler reads it); a size written with a constant, an
override or an expression cannot be read and earns a warning, not a pass."""
from __future__ import annotations

from ..contract.wgsl import entry_attributes
from ..errors import StudioError


def entry_workgroup_size(source: str, entry: str) -> tuple[list[str] | None, int | None, int | None]:
    """The `@workgroup_size(...)` arguments of ``fn entry`` as written, and the attribute's line:col
    (no attribute: None and where `fn` is; no such entry point, or a text the grammar refuses:
    None, None, None, for the compiler to report)."""
    try:
        found = entry_attributes(source, entry)
    except (StudioError, RecursionError):
        return None, None, None
    if found is None:
        return None, None, None
    return (list(found.workgroup_size) if found.workgroup_size is not None else None), found.line, found.col


def check_workgroup_size(source: str, entry: str, declared: int | tuple[int, ...], *, kernel_file: str, field: str,
                         manifest_file: str) -> tuple[list[StudioError], list[StudioError]]:
    """(errors, warnings) for one kernel; ``declared``: the 1-D size, or the size per axis."""
    per_axis = isinstance(declared, tuple) and len(declared) > 1
    want = list(declared) + [1] * (3 - len(declared)) if isinstance(declared, tuple) else [declared, 1, 1]
    shown = ", ".join(map(str, declared)) if isinstance(declared, tuple) else str(declared)
    declared = f"[{shown}]" if per_axis else shown
    args, line, col = entry_workgroup_size(source, entry)
    if line is None:
        return [], []              # no such entry point: the compiler reports it
    if args is None:
        return [StudioError(f"entry point '{entry}' has no @workgroup_size attribute", file=kernel_file, line=line,
                            col=col, hint=f"write @compute @workgroup_size({shown}) before fn {entry}")], []
    try:
        dims = [int(a.rstrip("ui"), 0) for a in args]
    except ValueError:
        return [], [StudioError(f"@workgroup_size({', '.join(args)}) of '{entry}' uses a name; the engine "
                                f"launches {declared} invocations per workgroup ({field})", file=kernel_file,
                                line=line, col=col, hint="write the number so the checker can compare it")]
    dims += [1] * (3 - len(dims))
    if dims != want:
        if per_axis:
            launches = f"launches workgroups of ({shown}) per axis, x first"
            fix = f"make both the same size per axis, e.g. {field} = [{', '.join(args)}]"
        else:
            launches = (f"launches 1-D workgroups of {shown} and kernels index gid.x + gid.y * num_workgroups.x * "
                        f"{shown}")
            fix = (f"for a {'3' if dims[2] != 1 else '2'}-D workgroup write {field} = [{', '.join(args)}] and "
                   f"invocations as one expression per axis, x first" if dims[1:] != [1, 1] else
                   f"make both {shown}, or both the same other size")
        return [StudioError(
            f"@workgroup_size({', '.join(args)}) of '{entry}' disagrees with {field} = {declared}: the engine "
            f"{launches}", file=kernel_file, line=line, col=col, field=field,
            related=[StudioError(f"{field} = {declared}", file=manifest_file, field=field)],
            hint=fix)], []
    return [], []
