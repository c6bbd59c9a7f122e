"""A workflow's memory, planned before anything runs: every value's shape follows from the sources
through the signatures at planning (static shape classes), so its bytes on the device and on the
host are known, and are judged against the memory this machine has available (``available_memory``,
the measure the learner's check of its vectors uses, learner/limits.py).

What is planned is what the executor does (run.py, resident.py): it frees nothing. Every step's
outputs stay on the device until the run ends (the next step reads them in place, and the record
hashes every value), then all of them are read back in one submission, which holds for each value
a staging buffer (host-visible memory) and a host copy of its words. A source is uploaded when a
step first reads it, and stays. A composite step also holds its own intermediates while it runs.
On an adapter without memory of its own (a CPU, as lavapipe; an integrated GPU) the device's bytes
are this machine's memory too, so both count against what is available; on a discrete GPU wgpu does
not say how much of the card's memory is free, and the host's part is judged alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..arrays import available_memory
from ..context import Context
from ..grad.composite import memory_plan
from ..precision import WORD_BYTES

SHARED_ADAPTERS = ("CPU", "IntegratedGPU")   # adapters whose memory is this machine's memory
HINT = ("every value of a run stays on the device until it ends and is read back once: use fewer steps or "
        "smaller signals, or run to an earlier step (--until STEP)")


@dataclass
class WorkflowMemory:
    """Bytes a run of the plan needs at its peak: ``device`` (every value resident, plus the largest
    composite's intermediates) and ``host`` (the read-back: a staging buffer and a copy per value)."""
    device: int
    host: int
    shared: bool                     # the device's memory is this machine's

    @property
    def machine(self) -> int:
        """What counts against this machine's available memory."""
        return self.host + (self.device if self.shared else 0)


def _words(shape) -> int:
    return math.prod(shape) * WORD_BYTES


def shares_memory(ctx: Context) -> bool:
    return ctx.device.profile.adapter.get("adapter_type") in SHARED_ADAPTERS


def plan_memory(ctx: Context, plan, *, have: int | None = None) -> tuple[WorkflowMemory, str | None]:
    """The plan's peak memory, and the first step (in run order) whose values bring what counts
    against this machine past ``have`` (default: the memory available now), or None."""
    shared = shares_memory(ctx)
    have = available_memory() if have is None else have
    device = host = extra = 0
    first = None
    uploaded: set[str] = set()
    for n in plan.order:
        sp = plan.steps.get(n)
        if sp is None:
            continue
        for w in sp.inputs.values():             # a source, uploaded when a step first reads it
            key = plan.key(w)
            if w.node in plan.wf.sources and key not in uploaded:
                uploaded.add(key)
                device += _words(plan.values[key].shape)
        out = sum(_words(v.shape) for v in sp.outputs.values())
        device += out
        host += 2 * out                          # read back: staging buffer + host copy
        if sp.pkg.contract.composite is not None:
            shapes = {k: plan.values[plan.key(w)].shape for k, w in sp.inputs.items()}
            mp = memory_plan(sp.pkg, shapes, sp.params, catalog=ctx.catalog)
            extra = max(extra, max(0, mp.allocated - out))       # its intermediates, while it runs
        need = WorkflowMemory(device + extra, host, shared)
        if first is None and need.machine > have:
            first = n
    return WorkflowMemory(device + extra, host, shared), first


def check_memory(ctx: Context, plan) -> WorkflowMemory:
    """Refuse a plan whose run would not fit the memory available, naming the step where it passes
    it (its line:col) and by how much; before any value is uploaded or any kernel runs."""
    have = available_memory()
    need, first = plan_memory(ctx, plan, have=have)
    if first is None:
        return need
    mib = 1 << 20
    where = (f"{need.device // mib} MiB on the device (this machine's memory) and " if need.shared
             else "") + f"{need.host // mib} MiB to read its values back"
    raise plan.wf.error(("steps", first, "op"),
                        f"the workflow needs about {need.machine // mib} MiB ({where}), {(need.machine - have) // mib} "
                        f"MiB more than the {have // mib} MiB this machine has available; its values pass what is "
                        f"available at step '{first}' ({len(plan.steps)} steps)", hint=HINT)
