"""Running a workflow: one execution path for every step, whoever wrote its op.

The plan (studio/engine/workflow/plan.py) has looked every op up and verified it; the run refuses
unverified ones unless the user allowed them for this run. Then each step runs on the device
through ``Resident`` in graph order: a step's inputs are the device buffers of the steps before it
(nothing is read back and uploaded again between two steps); a source is uploaded once, when a step
first reads it. After the last step, every value is read back once, in one submission, for the
record's hashes and for the caller (the CLI's plot and sinks, the Studio's cells).

A GUI drives it through ``run_plan``: ``until`` (run to a step), ``on_event`` (a callback per
source and step: start and done, with its time) and ``stop`` (checked between steps)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..context import Context
from ..errors import StudioError
from ..records.canonical import array_digest
from .plan import Plan, StepPlan, make_plan, refuse_unverified
from .resident import DeviceTensor, Resident, Timing
from .spec import WIRE, Wire, Workflow

@dataclass
class Event:
    """What a progress callback is told: a node starts or is done (``seconds``: its time)."""
    kind: str                        # start | done
    node: str
    index: int                       # 0-based among the nodes this run runs
    total: int
    seconds: float = 0.0
    pkg: object = None               # the step's OpPackage (None for a source)


@dataclass
class StepResult:
    name: str
    plan: StepPlan
    timing: Timing
    inputs: dict[str, str]           # the op's input -> the value key it read
    outputs: dict[str, str]          # the op's output -> the value key it wrote

    def to_record(self, run: RunResult) -> dict:
        p = self.plan
        return {"name": self.name, "op": p.pkg.id, "ref": p.step.op, "package_hash": p.pkg.hash,
                "receipt": p.verification.to_json(), "params": dict(p.params),
                **({"tuning": dict(p.tuning)} if p.tuning else {}),      # which tunable values ran, and why
                "inputs": {k: {"from": v, **run.digests[v]} for k, v in self.inputs.items()},
                "outputs": {k: {"value": v, **run.digests[v]} for k, v in self.outputs.items()},
                "seconds": {"verify": round(p.verify_s, 6), "compile": round(self.timing.compile_s, 6),
                            "run": round(self.timing.run_s, 6)}}


@dataclass
class RunResult:
    plan: Plan
    allow_unverified: bool
    status: str = "done"             # done | stopped
    steps: dict[str, StepResult] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)     # every value that ran, on the host
    digests: dict[str, dict] = field(default_factory=dict)
    sources: dict[str, dict] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    transfers: dict[str, int] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)       # uploads, dispatches, read-backs in order

    def value(self, wire_text: str) -> np.ndarray:
        """A value by wire ("step.output", "step" or "source")."""
        m = WIRE.fullmatch(wire_text)
        if m is None:
            raise StudioError(f"'{wire_text}' is not a wire", field="series")
        key = self.plan.key(Wire(wire_text, m.group(1), m.group(2), ("series",)))
        if key not in self.arrays:
            raise StudioError(f"'{wire_text}' did not run in this run", field="series",
                              hint="run the whole workflow, or up to a step that needs it")
        return self.arrays[key]


def run_workflow(ctx: Context, wf: Workflow, *, until: str | None = None, allow_unverified: bool = False,
                 on_event: Callable[[Event], None] | None = None, stop=None) -> RunResult:
    t0 = time.perf_counter()
    plan = make_plan(ctx, wf, until=until)
    t_plan = time.perf_counter() - t0
    res = run_plan(ctx, plan, allow_unverified=allow_unverified, on_event=on_event, stop=stop)
    res.seconds["plan"] = round(t_plan, 6)
    res.seconds["total"] = round(time.perf_counter() - t0, 6)
    return res


def _stopped(stop) -> bool:
    if stop is None:
        return False
    return bool(stop.is_set() if hasattr(stop, "is_set") else stop())


def run_plan(ctx: Context, plan: Plan, *, allow_unverified: bool = False,
             on_event: Callable[[Event], None] | None = None, stop=None) -> RunResult:
    """Run a plan on ``ctx``'s device. ``stop``: a threading.Event (or a callable) checked between
    nodes; a stopped run returns what ran, with status "stopped"."""
    refuse_unverified(plan, allowed=allow_unverified)     # a failed receipt refuses even when allowed
    res = RunResult(plan, allow_unverified)
    exe = Resident(ctx.device)
    on_device: dict[str, DeviceTensor] = {}
    t0 = time.perf_counter()
    total = len(plan.order)
    for i, n in enumerate(plan.order):
        if _stopped(stop):
            res.status = "stopped"
            break
        pkg = plan.steps[n].pkg if n in plan.steps else None
        if on_event:
            on_event(Event("start", n, i, total, 0.0, pkg))
        t = time.perf_counter()
        if n in plan.wf.sources:
            arr, info = plan.host[n]
            res.sources[n] = dict(info)
            res.arrays[n] = arr
        else:
            sp = plan.steps[n]
            args = {}
            for k, w in sp.inputs.items():
                key = plan.key(w)
                if key not in on_device:                  # a source, uploaded once, when first read
                    on_device[key] = exe.upload(res.arrays[key], plan.values[key].dtype, label=key)
                args[k] = on_device[key]
            timing = Timing()
            try:
                outs = exe.run_op(sp.pkg, args, sp.params, catalog=ctx.catalog, label=n, timing=timing)
            except StudioError as e:
                raise plan.wf.error(("steps", n, "op"), f"step '{n}' ({sp.pkg.id}): {e.message}", hint=e.hint) from None
            res.steps[n] = StepResult(n, sp, timing, {k: plan.key(w) for k, w in sp.inputs.items()},
                                      {o: f"{n}.{o}" for o in outs})
            for o, tensor in outs.items():
                on_device[f"{n}.{o}"] = tensor
        if on_event:
            on_event(Event("done", n, i, total, time.perf_counter() - t, pkg))
    t1 = time.perf_counter()
    keys = [k for k in on_device if k not in res.arrays]
    for k, a in zip(keys, exe.read([on_device[k] for k in keys])):
        res.arrays[k] = a
    t2 = time.perf_counter()
    res.digests = {k: array_digest(a) for k, a in res.arrays.items()}
    for n, info in res.sources.items():
        info["value"] = res.digests[n]
    res.seconds.update(run=round(t1 - t0, 6), read=round(t2 - t1, 6), hash=round(time.perf_counter() - t2, 6))
    res.transfers = {"uploads": exe.uploads, "upload_bytes": exe.upload_bytes, "readbacks": exe.readbacks,
                     "readback_bytes": exe.readback_bytes, "dispatches": exe.dispatches}
    res.log = list(exe.log)
    return res


def evaluate(ctx: Context, plan: Plan, sources: dict[str, np.ndarray], wanted: list[str],
             exe: Resident | None = None) -> dict[str, np.ndarray]:
    """Run every step of ``plan`` on the device with some sources' values replaced (a trainer's batch
    and parameters: ``sources``, by name, already of the source's dtype), reading back only the
    ``wanted`` values ("step.output" or a source), in one submission: no record, no hashes. The
    plan's receipts were judged when it was made (the caller refuses unverified ops first)."""
    exe = exe or Resident(ctx.device, wait=False)
    on_device: dict[str, DeviceTensor] = {}
    for n in plan.order:
        if n in plan.wf.sources:
            continue
        sp = plan.steps[n]
        args = {}
        for k, w in sp.inputs.items():
            key = plan.key(w)
            if key not in on_device:
                value = sources[key] if key in sources else plan.host[key][0]
                on_device[key] = exe.upload(value, plan.values[key].dtype, label=key)
            args[k] = on_device[key]
        try:
            outs = exe.run_op(sp.pkg, args, sp.params, catalog=ctx.catalog, label=n, timing=Timing())
        except StudioError as e:
            raise plan.wf.error(("steps", n, "op"), f"step '{n}' ({sp.pkg.id}): {e.message}", hint=e.hint) from None
        for o, tensor in outs.items():
            on_device[f"{n}.{o}"] = tensor
    on_host = {k: (sources[k] if k in sources else plan.host[k][0]) for k in wanted if k not in on_device}
    read = [k for k in wanted if k in on_device]
    return on_host | dict(zip(read, exe.read([on_device[k] for k in read])))
