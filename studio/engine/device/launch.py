"""Launch geometry: how many workgroups a kernel launches per axis, and the fold.

A kernel declares its workgroup size (`[kernel] workgroup_size = 64`, or per axis `[8, 8]`,
`[4, 4, 4]`) and its invocations (one expression, or one per axis). Each axis needs
ceil(invocations / workgroup size) workgroups. A WebGPU dispatch allows at most the adapter's
`max-compute-workgroups-per-dimension` (65,535 on most) per axis, so an axis past it is **folded**
into an axis the kernel does not use: a 1-D launch into y, an axis of a 2-D launch into z. The
folded axis is split into equal rows, so the grid can hold up to one row's worth of workgroups more
than needed — past the end: the kernel must guard them (docs/package-format.md, "Launch
geometry"). A 3-D launch has no axis to fold into; past the limit it is refused."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import StudioError

AXES = "xyz"


@dataclass(frozen=True)
class Launch:
    invocations: tuple[int, ...]          # per declared axis
    workgroup: tuple[int, ...]            # the workgroup size per declared axis
    needed: tuple[int, ...]               # workgroups per declared axis: ceil(invocations / size)
    grid: tuple[int, int, int]            # what is dispatched: (0, 0, 0) launches nothing
    folded: str | None = None             # None, or the fold: "x into y", "x into z", "y into z"

    @property
    def total_invocations(self) -> int:
        return math.prod(self.invocations)

    @property
    def workgroups(self) -> int:
        """The workgroups needed (not the grid's: see ``extra``)."""
        return math.prod(self.needed)

    @property
    def extra(self) -> int:
        """Workgroups the grid launches past the needed ones (only a fold adds any)."""
        return math.prod(self.grid) - self.workgroups if self.folded else 0

    def describe(self) -> str:
        need = " × ".join(f"{g:,}" for g in self.needed)
        if not self.folded:
            return f"{need} workgroups"
        grid = " × ".join(f"{g:,}" for g in self.grid[:len(self.needed) + (1 if len(self.needed) < 3 else 0)])
        return (f"{need} workgroups, folded ({self.folded}) into a {grid} grid"
                + (f" with {self.extra:,} workgroup(s) past the end" if self.extra else ""))


def geometry(workgroup: tuple[int, ...], invocations: tuple[int, ...], limit: int, *, op: str = "") -> Launch:
    """The launch of one call; raises StudioError when no grid fits the limit."""
    if len(workgroup) != len(invocations):
        raise StudioError(f"{op}: {len(invocations)} invocation axes for a {len(workgroup)}-D workgroup")
    needed = tuple(max(0, -(-int(i) // w)) for i, w in zip(invocations, workgroup))
    if any(g == 0 for g in needed):
        return Launch(tuple(invocations), tuple(workgroup), needed, (0, 0, 0))
    grid = list(needed) + [1] * (3 - len(needed))
    over = [a for a, g in enumerate(needed) if g > limit]
    if not over:
        return Launch(tuple(invocations), tuple(workgroup), needed, tuple(grid))
    into = len(needed)           # the first axis the kernel does not use
    rows = -(-needed[over[0]] // limit)
    if len(over) > 1 or into > 2 or rows > limit:
        axes = ", ".join(f"{AXES[a]}: {needed[a]:,}" for a in over)
        raise StudioError(
            f"{op}: the launch needs more workgroups than the device allows per axis ({axes}; the limit is "
            f"{limit:,})" + (" and a 3-D launch has no axis to fold into" if into > 2 else ""),
            hint="bound the sizes in the signature (e.g. `n <= LIMIT * WORKGROUP`), raise the workgroup size, or "
                 "process the input in pieces")
    a = over[0]
    grid[a], grid[into] = -(-needed[a] // rows), rows
    return Launch(tuple(invocations), tuple(workgroup), needed, tuple(grid), f"{AXES[a]} into {AXES[into]}")


def of_spec(spec, env: dict, limit: int, *, op: str = "") -> Launch:
    """The launch of a kernel spec or program (``workgroup``/``axes`` per axis when declared, else the
    1-D ``workgroup_size``/``invocations``) for the symbol values ``env``."""
    axes = getattr(spec, "axes", ()) or (spec.invocations,)
    workgroup = getattr(spec, "workgroup", ()) or (spec.workgroup_size,)
    return geometry(tuple(workgroup), tuple(int(e.eval(env)) for e in axes), limit, op=op)


def folds(spec, env: dict, limit: int) -> bool:
    """Whether some axis of the launch needs more than ``limit`` workgroups."""
    axes = getattr(spec, "axes", ()) or (spec.invocations,)
    workgroup = getattr(spec, "workgroup", ()) or (spec.workgroup_size,)
    return any(-(-int(e.eval(env)) // w) > limit for e, w in zip(axes, workgroup))
