"""The sharding use case: the report of a workflow — or of a learner — on R replicas
(docs/bf16.md). The CLI and the Studio call it through the device worker (the ``shard_report`` request, services/requests.py), so the
rules are written once: a workflow's numbers come only from ops proven on this GPU profile
(studio/engine/sharding/report.py); a learner runs through its own programs and combine tree
(studio/engine/sharding/learner.py)."""
from __future__ import annotations

from pathlib import Path

import msgspec

from ..context import Context
from ..sharding.report import report_lines, shard_report


class ShardingReport(msgspec.Struct, kw_only=True):
    """The worker's ``shard_report`` request, a workflow's or a learner's (``kind``): whether every node
    claimed exact was exact (``ok``), the warnings, the report as text (``lines``: what the CLI prints and
    the Studio's Sharding dock shows) and ``measured``, the measurement itself (sharding/report.py's or
    sharding/learner.py's to_json: the nodes, the replicas...). A workflow's ``unverified``: its steps
    whose ops ran without a receipt here; a learner's ``file`` and ``name``."""
    kind: str
    ok: bool
    warnings: list[str]
    lines: list[str]
    measured: dict
    unverified: list[str] = msgspec.field(default_factory=list)
    file: str | None = None
    name: str | None = None

    def to_json(self) -> dict:
        """What `scellis shard-report --json` prints: the measurement with the report's own fields."""
        if self.kind == "learner":
            return self.measured | {"kind": "learner", "file": self.file, "name": self.name, "ok": self.ok,
                                    "warnings": self.warnings}
        return self.measured | {"kind": "workflow", "unverified": self.unverified}

    def verdict(self) -> str:
        if not self.ok:
            return "a node claimed exact DIFFERS"
        if self.unverified:
            return (f"unverified: {len(self.unverified)} op(s) ran without a receipt on this GPU ("
                    f"{', '.join(self.unverified)}); the claims hold as measured, but those numbers are not proven")
        return "every claim verified"


def is_learner(path: str | Path) -> bool:
    p = Path(path)
    return (p.is_dir() and (p / "learner.toml").is_file()) or p.name == "learner.toml"


def shard_report_json(ctx: Context, path: str, replicas: int, *, allow_unverified: bool = False,
                      steps: int | None = None, prove: bool = False, progress=None) -> ShardingReport:
    if is_learner(path):
        from ..learner.system import load_system
        from ..sharding.learner import learner_lines, learner_run
        system = load_system(path)
        run = learner_run(system, replicas, steps)
        ok = all(m.get("bitwise_steps", m["steps"]) == m["steps"] for m in run.nodes.values())
        return ShardingReport(kind="learner", ok=ok, warnings=[run.warning] if run.warning else [],
                              lines=learner_lines(system.name, run), measured=run.to_json(), file=str(path),
                              name=system.name)
    proofs = []
    if prove:       # earn the missing receipts first, as `scellis workflow run --prove` does
        from ..workflow.plan import make_plan
        from ..workflow.spec import load_workflow
        from .workflows import prove_ops
        plan = make_plan(ctx, load_workflow(Path(path)))
        proofs = prove_ops(ctx, [s.pkg for s in plan.unverified], plan=plan)
    unverified = []
    if allow_unverified:      # the steps whose ops ran without a valid receipt here: the report says so
        from ..workflow.plan import make_plan
        from ..workflow.spec import load_workflow
        unverified = [s.name for s in make_plan(ctx, load_workflow(Path(path))).unverified]
    rep = shard_report(ctx, path, replicas, allow_unverified=allow_unverified, progress=progress)
    lines = report_lines(rep)
    if unverified:
        lines.append(f"unverified    {', '.join(unverified)}: ran without a valid conformance receipt on this GPU "
                     "profile (allowed for this report); their numbers are not proven")
    return ShardingReport(kind="workflow", ok=rep.ok, warnings=list(rep.warnings), lines=proofs + lines,
                          measured=rep.to_json(), unverified=unverified)
