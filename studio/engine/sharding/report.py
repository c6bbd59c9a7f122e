"""The sharding report (``scellis shard-report FILE --replicas R``; the Studio's shard panel): every
node of a workflow classified by its op's declared kind (kinds.py) and verified on real data — the
workflow's own values, node by node on the device (measure.py) — with the divisor warning for a
replica count that is not a power of two (divisor.py). docs/bf16.md says what it claims."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..context import Context
from ..errors import StudioError
from ..grad.run import run_op
from ..workflow.plan import make_plan, refuse_unverified
from ..workflow.spec import load_workflow
from . import measure
from .divisor import divisor_warning, power_of_two, scaling_commutes
from .kinds import EXACT, EXACT_AT_ID, ROUNDED, UNDECLARED, NodeKind, classify

MAX_REPLICAS = 4096
# a cotangent input, named as the engine names cotangents and gradients (grad/vjp.py: d + a tensor's
# one-letter name, e.g. the VJP ops' dy); docs/bf16.md, "The divisor step"
COTANGENT = re.compile(r"d[a-z][0-9]*")


def cotangent_reached(plan) -> set[str]:
    """The steps a (scaled) cotangent reaches: those taking a cotangent input, and every step fed by
    one of them. A forward node (a convolution of data and weights) carries none."""
    hit: set[str] = set()
    for name in plan.order:
        sp = plan.steps.get(name)
        if sp is not None and any(COTANGENT.fullmatch(k) or w.node in hit for k, w in sp.inputs.items()):
            hit.add(name)
    return hit


@dataclass
class NodeReport:
    name: str
    op: str
    kind: NodeKind
    batch: int | None = None                     # the node's batch (R·N), when it declares a kind
    outputs: dict = field(default_factory=dict)  # per output: measure.per_example / batch_contracting
    divisor: dict = field(default_factory=dict)  # per output (bf16 nodes, R not a power of two)

    @property
    def verified(self) -> bool | None:
        """Whether the measurement agrees with the kind: per example bit for bit; contracting nodes
        zero at rnd = id (and, at bf16, whatever the difference is, it is reported); None: undeclared."""
        if self.kind.label == UNDECLARED:
            return None
        if self.kind.label == EXACT:
            return all(o["bitwise"] for o in self.outputs.values())
        return all(o["den_f32"]["max"] == 0.0 for o in self.outputs.values())

    def to_json(self) -> dict:
        return {"name": self.name, "op": self.op, "kind": self.kind.to_json(), "batch": self.batch,
                "verified": self.verified, "outputs": self.outputs, "divisor": self.divisor}


@dataclass
class ShardReport:
    file: str
    replicas: int
    nodes: list[NodeReport]
    warnings: list[str]
    device: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(n.verified is not False for n in self.nodes)

    def to_json(self) -> dict:
        return {"file": self.file, "replicas": self.replicas, "power_of_two": power_of_two(self.replicas),
                "device": self.device, "ok": self.ok, "warnings": self.warnings,
                "nodes": [n.to_json() for n in self.nodes], "seconds": round(self.seconds, 3)}


def shard_report(ctx: Context, path: str | Path, replicas: int, *, allow_unverified: bool = False,
                 progress=None) -> ShardReport:
    if not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise StudioError(f"--replicas {replicas!r} is not a whole number in [1, {MAX_REPLICAS}]", field="--replicas",
                          hint="e.g. --replicas 4")
    t0 = time.perf_counter()
    wf = load_workflow(Path(path))
    plan = make_plan(ctx, wf)
    refuse_unverified(plan, allowed=allow_unverified)    # the report's numbers come only from proven ops
    values = {k: a for k, (a, _) in plan.host.items()}
    nodes = []
    steps = [n for n in plan.order if n in plan.steps]
    reached = cotangent_reached(plan)
    for done, name in enumerate(steps):
        sp = plan.steps[name]
        inputs = {k: values[plan.key(w)] for k, w in sp.inputs.items()}
        whole = run_op(ctx, sp.pkg, inputs, sp.params)
        for o, a in whole.items():
            values[f"{name}.{o}"] = a
        nodes.append(_node(ctx, name, sp.pkg, inputs, sp.params, whole, replicas, name in reached))
        if progress:
            progress(done + 1, len(steps))
    bf16 = [n.name for n in nodes if n.kind.bf16 and n.name in reached]
    warnings = [w for w in [divisor_warning(replicas, bf16)] if w]
    undeclared = [n.name for n in nodes if n.kind.label == UNDECLARED]
    if undeclared:
        warnings.append(f"no sharding kind declared by the op(s) of {', '.join(undeclared)}: not classified "
                        "(add [sharding] to their op.toml; docs/bf16.md)")
    profile = ctx.device.profile.to_json()
    return ShardReport(str(wf.file), replicas, nodes, warnings,
                       f"{profile['adapter'].get('device')} ({profile['id']})", time.perf_counter() - t0)


def _node(ctx: Context, name: str, pkg, inputs: dict, params: dict, whole: dict, replicas: int,
          reached: bool) -> NodeReport:
    kind = classify(pkg)
    rep = NodeReport(name, pkg.id, kind)
    sh = pkg.contract.sharding
    if sh is None:
        return rep
    rep.batch = int(np.shape(inputs[sh.batch[0]])[0])
    if kind.label == EXACT:
        rep.outputs = measure.per_example(ctx, pkg, inputs, params, whole, replicas)
    else:
        rep.outputs = measure.batch_contracting(ctx, pkg, inputs, params, whole, replicas)
    if kind.bf16 and reached and not power_of_two(replicas):
        exact = ctx.references.call(pkg, pkg.contract.reference_forward, inputs, params)
        exact = exact if isinstance(exact, dict) else {pkg.contract.signature.outputs[0].name: exact}
        for t in pkg.contract.signature.outputs:
            x = np.asarray(exact[t.name], dtype=np.float64)
            ok = scaling_commutes(x, float(replicas))
            rep.divisor[t.name] = {"scale": replicas, "elements": int(ok.size), "fails": int(np.count_nonzero(~ok))}
    return rep


def report_lines(rep: ShardReport) -> list[str]:
    lines = [f"shard report  {Path(rep.file).name}  on {rep.replicas} replica(s)"
             + ("" if power_of_two(rep.replicas) else " (not a power of two)"),
             f"device        {rep.device}"]
    for n in rep.nodes:
        head = f"node {n.name:<10} {n.op:<42} {n.kind.label}"
        if n.batch is not None:
            head += f"   (batch {n.batch} = {rep.replicas} × {n.batch // rep.replicas})"
        lines.append(head)
        for o, m in n.outputs.items():
            if n.kind.label == EXACT:
                eq = m["replica_equals_shard"]
                lines.append(f"  {o}: replica r = shard r bit for bit: {sum(eq)}/{len(eq)} replicas"
                             + ("" if all(eq) else f"  — DIFFERS: max {m['difference']['max_ulps']:g} ulp"))
            else:
                dv, dn, di = m["device"], m["den"], m["den_f32"]
                lines.append(f"  {o}: (1/R)(Σ rnd S_r − rnd Σ S_r)  device: {dv['nonzero']}/{dv['elements']} non-zero, "
                             f"max {dv['max_ulps']:.3g} ulp (mean {dv['mean_ulps']:.3g}), max rel {dv['max_rel']:.3g} "
                             f"(mean {dv['mean_rel']:.3g})")
                lines.append(f"  {o}: at the den (f64 partial sums, rnd from f64): {dn['nonzero']}/{dn['elements']} "
                             f"non-zero, max {dn['max_ulps']:.3g} ulp (mean {dn['mean_ulps']:.3g}), max rel "
                             f"{dn['max_rel']:.3g}; at rnd = id (f32): max {di['max']:g}, {di['nonzero']} non-zero")
        for o, d in n.divisor.items():
            lines.append(f"  {o}: divisor step rnd({d['scale']}·x) = {d['scale']}·rnd(x) fails on {d['fails']}/{d['elements']}"
                         " element(s)")
        if n.kind.label == UNDECLARED:
            lines.append(f"  {n.kind.why}")
    for w in rep.warnings:
        lines.append(f"warning: {w}")
    counts = {k: sum(n.kind.label == k for n in rep.nodes) for k in (EXACT, ROUNDED, EXACT_AT_ID, UNDECLARED)}
    lines.append("summary       " + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
                 + ("; verified" if rep.ok else "; a per-example node DIFFERS from its shard"))
    return lines
