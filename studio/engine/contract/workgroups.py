"""2-D and 3-D kernels in op.toml: `[kernel] workgroup_size = [8, 8]` (or `[4, 4, 4]`) with one
`invocations` expression per axis, x first (`invocations = ["p", "m"]`). Each axis launches
ceil(invocations / size) workgroups; the engine folds an axis past the adapter's limit into the
next unused one (studio/engine/device/launch.py). A plain `workgroup_size = 64` with
`invocations = "n"` is the 1-D kernel, as before."""
from __future__ import annotations

import math

from ..errors import StudioError
from .expr import Expr, parse_expr
from .manifest import Manifest
from .toml_position import position

MAX_SIZE = (256, 256, 64)           # WebGPU's default per-axis workgroup size limits
MAX_INVOCATIONS = 256               # and invocations per workgroup


def kernel_geometry(m: Manifest) -> tuple[tuple[int, ...], tuple[Expr, ...]]:
    """((), ()) for a 1-D kernel; else (workgroup size per axis, invocations per axis)."""
    section = m.data.get("kernel")
    if not isinstance(section, dict):
        return (), ()
    wg, inv = section.get("workgroup_size"), section.get("invocations")
    if not isinstance(wg, list) and not isinstance(inv, list):
        return (), ()
    line, col = m.position("kernel.workgroup_size")
    if not isinstance(wg, list) or not 1 <= len(wg) <= 3 or not all(
            isinstance(w, int) and not isinstance(w, bool) for w in wg):
        raise StudioError("a kernel launched per axis needs workgroup_size as a list of 1 to 3 integers, x first",
                          file=m.file, field="kernel.workgroup_size", line=line, col=col,
                          hint='e.g. workgroup_size = [8, 8] with invocations = ["p", "m"]')
    for a, (w, top) in enumerate(zip(wg, MAX_SIZE)):
        if not 1 <= w <= top:
            raise StudioError(f"kernel.workgroup_size axis {'xyz'[a]} = {w} is outside [1, {top}]", file=m.file,
                              field="kernel.workgroup_size", line=line, col=col,
                              hint="WebGPU allows 256 in x and y and 64 in z")
    if math.prod(wg) > MAX_INVOCATIONS:
        raise StudioError(f"kernel.workgroup_size {wg} has {math.prod(wg)} invocations per workgroup, over "
                          f"{MAX_INVOCATIONS}", file=m.file, field="kernel.workgroup_size", line=line, col=col,
                          hint="make the product of the sizes at most 256, e.g. [16, 16]")
    iline, icol = m.position("kernel.invocations")
    if not isinstance(inv, list) or len(inv) != len(wg) or not all(isinstance(e, str) for e in inv):
        raise StudioError(f"workgroup_size {wg} is {len(wg)}-D, so invocations needs {len(wg)} expressions, one "
                          "per axis, x first", file=m.file, field="kernel.invocations", line=iline, col=icol,
                          hint="e.g. invocations = [" + ", ".join(f'"{s}"' for s in ("p", "m", "b")[:len(wg)]) + "]")
    return tuple(wg), tuple(_axis(m, e, k) for k, e in enumerate(inv))


def _axis(m: Manifest, text: str, k: int) -> Expr:
    """Axis ``k``'s expression, positioned at its string in op.toml (the one position finder)."""
    line, col = position(m.text, ("kernel", "invocations", k), content=True)
    return parse_expr(text, file=m.file, line=line or 1, col=col or 1)
