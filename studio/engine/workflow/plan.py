"""Before anything runs: one lookup and one verification per step, and every shape.

Each step's op is looked up once (an op id through the catalog, a package path relative to the
workflow's folder) and verified once, the same way whoever wrote it: its conformance receipt for
this GPU profile (``receipts.local_status``; a composite op is verified through its steps' ops,
since its kernels are theirs). Then every value's shape and dtype follows from the sources through
the signatures (static shapes: the memory is known before the device is touched, and a run that
would not fit the memory available is refused here, workflow/memory.py), and a mistake is reported
at the step's field in the workflow file."""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..arrays import check_input
from ..contract.domains import check_input_values
from ..context import Context
from ..contract.package import MANIFEST, OpPackage, load_package, read_regular
from ..errors import StudioError
from ..grad.composite import bind
from ..precision import DTYPE_BYTES
from ..proof.receipts import MAX_RECEIPT_BYTES, judge_receipts, local_status
from ..proof.reliance import outside, shaped
from . import graph
from .memory import check_memory
from .sources import dataset_batch, fill_like, initial, inline_values, load_file, spike_free
from .spec import Step, Wire, Workflow


@dataclass
class Verification:
    """What the run knows of a step's proof on this GPU profile (the card's receipt badge)."""
    status: str                      # valid | uncovered | none | stale | failed | foreign | malformed
    receipt: str | None = None       # the receipt's file name (its GPU profile id)
    sha256: str | None = None        # of the receipt file's bytes
    parts: list[dict] = field(default_factory=list)     # a composite: its steps' ops' verifications
    why: str | None = None           # uncovered: what of the step's run the receipt does not cover

    def to_json(self) -> dict:
        out = {"status": self.status, "receipt": self.receipt, "sha256": self.sha256}
        if self.parts:
            out["parts"] = self.parts
        if self.why:
            out["why"] = self.why
        return out


def verify_op(ctx: Context, pkg: OpPackage, *, shapes: dict | None = None, params: dict | None = None) -> Verification:
    """The one verification: a valid conformance receipt for this GPU profile (sealed by this
    machine's key, ``ctx.seal``), or why not. With a step's input ``shapes`` and ``params``, a valid
    receipt that does not cover that run's size (past its largest, or a launch fold it never reached:
    proof/reliance.py) is ``uncovered``, which `--prove` proves at the step's own size and parameters."""
    profile = ctx.device.profile.id
    if pkg.contract.composite is not None:
        parts = []
        for bs in bind(pkg, ctx.catalog):
            v = verify_op(ctx, bs.pkg)
            parts.append({"op": bs.pkg.id, "package_hash": bs.pkg.hash, **v.to_json()})
        worst = next((p["status"] for p in parts if p["status"] != "valid"), "valid")
        return Verification(worst, None, None, parts)
    for path, v in judge_receipts(pkg, profile, ctx.seal, corpora=ctx.corpora):   # the valid one, by file and hash
        if v.status == "valid":
            raw = read_regular(path, MAX_RECEIPT_BYTES, what="receipt", file=str(path))
            why = None if shapes is None else outside(pkg.contract, v.receipt, shaped(shapes), dict(params or {}),
                                                      ctx.device.profile.limits.get(
                                                          "max-compute-workgroups-per-dimension", 65535),
                                                      judge_params=False)[0]
            return Verification("valid" if why is None else "uncovered", path.name, hashlib.sha256(raw).hexdigest(),
                                why=why)
    status = local_status(pkg, profile, ctx.seal)                  # none valid: the rule says why not
    return Verification("stale" if status == "valid" else status)   # (valid now: it changed in between)


@dataclass
class Value:
    """A value of the graph, before it exists: its shape and dtype."""
    shape: tuple[int, ...]
    dtype: str


@dataclass
class StepPlan:
    name: str
    step: Step
    pkg: OpPackage
    inputs: dict[str, Wire]          # the op's input -> the wire feeding it
    params: dict
    outputs: dict[str, Value]
    verification: Verification
    verify_s: float = 0.0            # the time the lookup's verification took
    tuning: dict = field(default_factory=dict)   # tunable overrides: the values that run (proof/tuning_record.py)

    @property
    def badge(self) -> dict:
        """What a notebook cell shows of its op: tolerance, category, receipt status."""
        c = self.pkg.contract
        return {"op": self.pkg.id, "tolerance": str(c.tolerance), "category": c.tolerance.category,
                "receipt": self.verification.status, "backward": c.backward.kind}


@dataclass
class Plan:
    wf: Workflow
    order: list[str]                 # the nodes to run, in order (all, or those a "run to" needs)
    steps: dict[str, StepPlan]
    values: dict[str, Value]         # "node.output" (steps) and "node" (sources)
    host: dict[str, tuple[np.ndarray, dict]]   # sources known on the host now: (array, record info)
    until: str | None = None
    dataset: object = None           # the [data] rows, read once (dataset.Dataset) when a source takes a batch

    def key(self, w: Wire) -> str:
        return w.node if w.node in self.wf.sources else f"{w.node}.{w.output or self._single(w)}"

    def _single(self, w: Wire) -> str:
        return next(iter(self.steps[w.node].outputs)) if w.node in self.steps else ""

    @property
    def unverified(self) -> list[StepPlan]:
        return [s for s in self.steps.values() if s.verification.status != "valid"]

    @property
    def device_bytes(self) -> int:
        return sum(math.prod(v.shape) * DTYPE_BYTES[v.dtype] for v in self.values.values())


def resolve_op(ctx: Context, wf: Workflow, step: Step) -> OpPackage:
    """The one lookup: an op id through the catalog, or a package folder (relative to the workflow)."""
    ref = step.op
    p = Path(ref).expanduser()
    p = p if p.is_absolute() else wf.base / p
    try:
        if ref.startswith((".", "/", "~")) or (p / MANIFEST).is_file():
            return load_package(p)
        return ctx.catalog.resolve(ref)
    except StudioError as e:
        raise wf.error(("steps", step.name, "op"), f"step '{step.name}': {e.message}", hint=e.hint) from None


def make_plan(ctx: Context, wf: Workflow, *, until: str | None = None) -> Plan:
    everything = graph.order(wf)
    need = graph.needed_for(wf, until) if until else set(everything)
    plan = Plan(wf, [n for n in everything if n in need], {}, {}, {}, until)
    for n in plan.order:
        if n in wf.sources:
            _plan_source(ctx, plan, n)
        else:
            _plan_step(ctx, plan, wf.steps[n])
    check_memory(ctx, plan)                # every value's bytes, against the memory available
    return plan


def _plan_source(ctx: Context, plan: Plan, n: str) -> None:
    wf, src = plan.wf, plan.wf.sources[n]
    if src.kind == "file":
        arr, info = load_file(wf, src)
    elif src.kind == "values":
        arr, info = inline_values(wf, src)
    elif src.kind == "fill":
        like = plan.values.get(plan.key(src.like)) if _exists(plan, src.like) else None
        if like is None:
            raise wf.error(src.like.path, f"source '{n}': '{src.like.text}' has no value to take the shape of")
        arr, info = fill_like(src, like.shape)
    elif src.kind == "dataset":
        arr, info = dataset_batch(wf, src, plan)
    elif src.kind == "init":
        arr, info = initial(src)
    else:
        step = plan.steps[src.spike_free]           # planned before it (graph.order): its one lookup
        arr, info = spike_free(wf, src, step.pkg.id, step.params)
    info["dtype"], info["shape"] = src.dtype, list(arr.shape)
    plan.host[n] = (arr, info)
    plan.values[n] = Value(tuple(arr.shape), src.dtype)


def _exists(plan: Plan, w: Wire) -> bool:
    return w.node in plan.wf.sources or w.node in plan.steps


def _plan_step(ctx: Context, plan: Plan, step: Step) -> None:
    wf, at = plan.wf, ("steps", step.name)
    pkg = resolve_op(ctx, wf, step)
    sig = pkg.contract.signature
    names = [t.name for t in sig.inputs]
    for k in step.inputs:
        if k not in names:
            raise wf.error((*at, "inputs", k), f"step '{step.name}': {pkg.id} has no input '{k}'",
                           hint=f"its inputs: {', '.join(names) or 'none'}")
    for k in names:
        if k not in step.inputs:
            raise wf.error(at, f"step '{step.name}': input '{k}' of {pkg.id} is not wired",
                           hint=f"add inputs = {{ {k} = \"step.output\" }}")
    shapes = {}
    for k, w in step.inputs.items():
        if w.node in plan.steps:
            outs = plan.steps[w.node].outputs
            if w.output is None and len(outs) != 1:
                raise wf.error(w.path, f"'{w.text}': step '{w.node}' has {len(outs)} outputs; name one",
                               hint="write " + " or ".join(f"\"{w.node}.{o}\"" for o in outs))
            if w.output is not None and w.output not in outs:
                raise wf.error(w.path, f"'{w.text}': step '{w.node}' has no output '{w.output}'",
                               hint="its outputs: " + ", ".join(outs))
        v = plan.values[plan.key(w)]
        t = sig.input(k)
        if v.dtype != t.dtype:
            raise wf.error(w.path, f"step '{step.name}': '{w.text}' is {v.dtype}, input '{k}' of {pkg.id} is {t.dtype}")
        shapes[k] = v.shape
    try:
        env = sig.resolve(shapes, dict(step.params))
        out_shapes = sig.output_shapes(env)
    except StudioError as e:
        if e.field in step.params:
            path = (*at, "params", e.field)
        elif e.field in step.inputs:
            path = step.inputs[e.field].path
        else:
            path = (*at, "params") if e.field in {p.name for p in sig.params} else (*at, "op")
        raise wf.error(path, f"step '{step.name}' ({pkg.id}): {e.message}", hint=e.hint) from None
    for k, w in step.inputs.items():               # data from the host is judged against the signature now
        if w.node in plan.host:
            try:
                check_input(plan.host[w.node][0], sig.input(k), file=plan.host[w.node][1].get("path"))
                if sig.input(k).domain.structured:     # an index input, judged at this step's dims
                    check_input_values(sig.input(k), plan.host[w.node][0], env, file=plan.host[w.node][1].get("path"))
            except StudioError as e:
                raise wf.error(w.path, f"step '{step.name}' ({pkg.id}), input '{k}' from source '{w.node}': "
                                       f"{e.message}", hint=e.hint) from None
    outputs = {t.name: Value(tuple(out_shapes[t.name]), t.dtype) for t in sig.outputs}
    t0 = time.perf_counter()
    verification = verify_op(ctx, pkg, shapes=shapes, params=step.params)
    from ..proof.tuning_record import tuned_for      # this GPU profile's proven winner, else the default
    pkg, tuning = tuned_for(pkg, ctx.device.profile.id, ctx.seal, step.params)
    plan.steps[step.name] = StepPlan(step.name, step, pkg, dict(step.inputs), dict(step.params), outputs,
                                     verification, time.perf_counter() - t0, tuning)
    for o, v in outputs.items():
        plan.values[f"{step.name}.{o}"] = v


def refuse_unverified(plan: Plan, *, allowed: bool = False) -> None:
    """The run's rule: every step's op proven on this GPU profile, unless the user allows
    unverified ops for this run (``allowed``: the record then names them). A step whose receipt
    records a failing conformance run is refused even then: a failed receipt is never run past."""
    bad = plan.unverified
    wf = plan.wf
    failed = [s for s in bad if s.verification.status == "failed"]
    if allowed and failed:
        s = failed[0]
        line, col = wf.fields.position(("steps", s.name, "op"))
        raise StudioError(f"step '{s.name}': {s.pkg.id}'s receipt on this GPU profile records a failing conformance "
                          "run; unverified ops may run when allowed, an op that failed never does", file=wf.file,
                          line=line, col=col, field=f"steps.{s.name}.op",
                          hint=f"fix the kernel; `scellis receipts {s.pkg.root}` names the failing case")
    if not bad or allowed:
        return
    first = bad[0]
    line, col = wf.fields.position(("steps", first.name, "op"))
    related = []
    for s in bad[1:]:
        ln, cl = wf.fields.position(("steps", s.name, "op"))
        related.append(StudioError(f"step '{s.name}': {s.pkg.id} — receipt {s.verification.status}"
                                   + (f": {s.verification.why}" if s.verification.why else ""), file=wf.file,
                                   line=ln, col=cl, field=f"steps.{s.name}.op"))
    def conform(s: StepPlan) -> list[str]:
        # a composite has no kernel of its own: its unproven parts are what to conform
        if s.verification.parts:
            return [f"`scellis conform {p['op']}`" for p in s.verification.parts if p["status"] != "valid"]
        return [f"`scellis conform {s.pkg.root}`"]
    cmds = "; ".join(dict.fromkeys(c for s in bad for c in conform(s)))
    raise StudioError(f"step '{first.name}': {first.pkg.id} has no valid conformance receipt on this GPU profile "
                      f"(receipt {first.verification.status}" + (f": {first.verification.why}" if first.verification.why
                                                                   else "") + ")"
                      + (f", nor {len(bad) - 1} other step(s)" if len(bad) > 1 else "")
                      + "; the run refuses unverified ops", file=wf.file, line=line, col=col,
                      field=f"steps.{first.name}.op", related=related,
                      hint=f"prove them here: {cmds} (or `scellis workflow run --prove`); or allow unverified ops "
                           "for this run: --allow-unverified (the record says so)")
