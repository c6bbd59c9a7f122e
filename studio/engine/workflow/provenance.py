"""The provenance record of a run (schema: docs/workflows.md), and ``verify_record``: run it again
and say, step by step, whether every output reproduces.

The record pins every step's op by content hash, the user's op exactly as the builtins beside it
(a step's entry has the same fields whoever wrote the op; nothing in it says builtin or user), with
its receipt on this GPU profile, its parameters, the hashes of what it read and wrote, and its
times; the workflow's text and hash; the GPU profile with its backend; the engine, wgpu, numpy and
Python versions; the seed of every generated source. It is a record (studio/engine/records/):
sealed with the user folder's key, so any field edited afterwards is refused by name, and a record
from another user folder is re-derived rather than believed."""
from __future__ import annotations

import datetime as _dt
import hashlib
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
from msgspec import Meta, Struct

from ... import __version__
from ..context import Context
from ..errors import StudioError
from ..records.canonical import ARRAY_HASH
from ..records.reader import Record, read_regular
from ..records.reader import read_record as read_sealed
from ..records.seal import Seal
from ..records.writer import write_record as write_sealed
from .plan import make_plan
from .report import spike_report
from .run import RunResult, run_plan
from .spec import parse_workflow

SCHEMA = "scellis-workflow-record/1"
MAX_RECORD_BYTES = 64 << 20
HINT = "give a record written by `scellis workflow run --record` in this user folder (docs/workflows.md)"
_Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]


class _Workflow(Struct):
    name: str
    file: str
    sha256: _Hex64
    text: str


class _Run(Struct):
    status: str
    allow_unverified: bool
    unverified_steps: list[str]
    order: list[str]
    until: str | None = None
    options: dict = {}


class _Digest(Struct):
    sha256: _Hex64


class _Step(Struct):
    name: str
    package_hash: _Hex64
    outputs: dict[str, _Digest]
    op: str = ""
    params: dict = {}
    inputs: dict[str, _Digest] = {}
    receipt: dict = {}


class RecordSchema(Struct):
    schema: str
    workflow: _Workflow
    run: _Run
    gpu_profile: dict
    sources: dict[str, dict]
    steps: list[_Step]


def engine_versions() -> dict:
    import wgpu
    return {"studio": __version__, "wgpu": wgpu.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "platform": platform.platform()}


def seeds(res: RunResult) -> dict:
    """The seed of every generated source: generator ops' ``seed`` params, the engine's generators."""
    out = {}
    for n, s in res.steps.items():
        if s.plan.pkg.contract.tolerance.category == "generator" and "seed" in s.plan.params:
            out[n] = s.plan.params["seed"]
    for n, info in res.sources.items():
        if info.get("kind") == "generator":
            out[n] = info["seed"]
    return out


def make_record(ctx: Context, res: RunResult, *, options: dict | None = None) -> dict:
    wf = res.plan.wf
    return {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "workflow": {"name": wf.name, "file": str(Path(wf.file).resolve()) if wf.file[:1] != "<" else wf.file,
                     "sha256": wf.hash, "text": wf.text},
        "run": {"status": res.status, "until": res.plan.until, "allow_unverified": res.allow_unverified,
                "unverified_steps": [s.name for s in res.plan.unverified], "order": list(res.plan.order),
                "options": dict(options or {})},
        "gpu_profile": ctx.device.profile.to_json(),
        "engine": engine_versions(),
        "array_hash": ARRAY_HASH,
        "seeds": seeds(res),
        "sources": {n: dict(info) for n, info in res.sources.items()},
        "steps": [s.to_record(res) for s in res.steps.values()],
        "seconds": dict(res.seconds),
        "transfers": dict(res.transfers),
        "sinks": {},
    }


def write_record(path: str | Path, record: dict, seal: Seal) -> Path:
    return write_sealed(path, record, seal, what="the record")


def read_record(path: str | Path, seal: Seal) -> Record:
    """The record at ``path``, typed; refused when a field was edited after sealing (named), its
    workflow text does not match its hash, or it is not one. A record sealed in another user folder
    is returned with ``seal.status == "foreign"``: verify re-derives it instead of believing it."""
    rec = read_sealed(path, seal, schema=SCHEMA, what="the record", hint=HINT, max_bytes=MAX_RECORD_BYTES,
                      struct=RecordSchema)
    if rec.seal.status == "forged":
        rec.require_sealed("the record", HINT)
    problems = record_problems(rec.doc)
    if problems:
        raise StudioError(f"not a workflow record: {problems[0]}", file=str(path), field=problems[0].split()[0],
                          hint=HINT)
    return rec


def record_problems(r) -> list[str]:
    """What is inconsistent within a typed record (the schema has checked its fields' types)."""
    w = r["workflow"]
    if hashlib.sha256(w["text"].encode("utf-8")).hexdigest() != w["sha256"]:
        return ["workflow.sha256 is not the hash of workflow.text: the record was edited"]
    return []


# ------------------------------------------------------------------ verify: run it again
@dataclass
class StepCheck:
    name: str
    op: str
    problems: list[str] = field(default_factory=list)
    outputs: dict[str, tuple[str, str | None]] = field(default_factory=dict)   # output -> (then, now)
    receipt: tuple[str, str] = ("", "")                                          # status then, now

    @property
    def ok(self) -> bool:
        return not self.problems and all(a == b for a, b in self.outputs.values())

    def line(self) -> str:
        head = f"{'ok  ' if self.ok else 'FAIL'}  step {self.name:12s} {self.op}"
        outs = ", ".join(f"{o} {'reproduced' if a == b else 'DIFFERS'} ({a[:12]}{'' if a == b else ' → ' + str(b)[:12]})"
                         for o, (a, b) in self.outputs.items())
        rec = f"; receipt then {self.receipt[0]}, now {self.receipt[1]}" if self.receipt[0] != self.receipt[1] else ""
        return "  ".join(x for x in (head, outs + rec, "; ".join(self.problems)) if x)


@dataclass
class VerifyReport:
    workflow: str
    steps: list[StepCheck]
    notes: list[str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems and all(s.ok for s in self.steps)

    def lines(self) -> list[str]:
        out = [f"verify  {self.workflow}: every step run again"]
        out += [f"  {s.line()}" for s in self.steps]
        out += [f"  note  {n}" for n in self.notes]
        out += [f"  FAIL  {p}" for p in self.problems]
        out.append("verdict: " + ("reproduced: every output hash matches the record" if self.ok
                                  else "NOT reproduced"))
        return out

    def to_json(self) -> dict:
        return {"workflow": self.workflow, "ok": self.ok, "notes": self.notes, "problems": self.problems,
                "steps": [{"name": s.name, "op": s.op, "ok": s.ok, "problems": s.problems,
                           "outputs": {k: {"recorded": a, "now": b} for k, (a, b) in s.outputs.items()},
                           "receipt": {"recorded": s.receipt[0], "now": s.receipt[1]}} for s in self.steps],
                "lines": self.lines()}


FOREIGN_NOTE = ("from elsewhere: sealed in another user folder, so nothing in it is taken on trust. Re-derived "
                "here: the workflow text against its hash, every op's content hash and parameters, every input "
                "and output hash, the report's figures. Not checkable here: the receipt statuses and receipt "
                "hashes it records (a receipt counts only in the folder that sealed it; each step shows its "
                "status here), its times and transfer counts")


def verify_record(ctx: Context, record: dict, *, origin: str = "sealed", on_event=None, stop=None) -> VerifyReport:
    """Re-run the recorded workflow text with the ops as they are now (unverified ones allowed: the
    question is reproduction) and compare, step by step, op hashes, input and output hashes, and the
    report. ``origin``: the record's seal status (``foreign``: made in another user folder)."""
    problems = record_problems(record)
    if problems:
        raise StudioError(f"not a workflow record: {problems[0]}", field=problems[0].split()[0], hint=HINT)
    w, run = record["workflow"], record["run"]
    rep = VerifyReport(w.get("name", "?"), [], [], [])
    rep.notes += _context_notes(ctx, record, origin)
    f = Path(w["file"])
    try:
        wf = parse_workflow(w["text"], file=w["file"], base=f.parent)
        plan = make_plan(ctx, wf, until=run.get("until"))
        res = run_plan(ctx, plan, allow_unverified=True, on_event=on_event, stop=stop)
    except StudioError as e:
        rep.problems.append(f"could not run it again: {e.format()}")
        return rep
    rep.problems += _source_problems(record, res)
    rep.steps += [_step_check(then, res) for then in record["steps"]]
    if "report" in record and _report_now(wf, res) != record["report"]:
        rep.problems.append("the report's figures differ from the record's")
    if res.status != run.get("status", "done"):
        rep.problems.append(f"the run ended {res.status}, the record says {run.get('status')}")
    return rep


def _context_notes(ctx: Context, record: dict, origin: str) -> list[str]:
    """What the reader should know before the comparison: a foreign seal, another GPU profile, a
    workflow file that changed or is gone since the run."""
    notes = [FOREIGN_NOTE] if origin == "foreign" else []
    here = ctx.device.profile.id
    if record["gpu_profile"].get("id") != here:
        notes.append(f"recorded on GPU profile {record['gpu_profile'].get('id')}, re-run on {here}: ops whose "
                     "tolerance is not exact may legitimately differ in their last bits")
    w = record["workflow"]
    f = Path(w["file"])
    try:
        now = hashlib.sha256(read_regular(f, MAX_RECORD_BYTES, what="workflow file")).hexdigest()
        if now != w["sha256"]:
            notes.append(f"{f} changed since the run; the recorded text is what runs again")
    except StudioError:
        notes.append(f"{f} is gone; the recorded text is what runs again")
    return notes


def _source_problems(record: dict, res) -> list[str]:
    out = []
    for n, then in record["sources"].items():
        info = res.sources.get(n)
        if info is None:
            out.append(f"source {n} did not run again")
        elif then.get("sha256") != info.get("sha256") or (then.get("value") or {}).get("sha256") != info["value"]["sha256"]:
            out.append(f"source {n} differs from the record"
                       + (f" (file {info.get('path')} changed)" if then.get("sha256") != info.get("sha256") else ""))
    return out


def _step_check(then: dict, res) -> StepCheck:
    """One recorded step against its re-run: the op's content and id, params, inputs, receipt, outputs."""
    name = then["name"]
    chk = StepCheck(name, str(then.get("op")))
    got = res.steps.get(name)
    if got is None:
        chk.problems.append("did not run again")
        return chk
    p = got.plan
    if p.pkg.hash != then["package_hash"]:
        chk.problems.append(f"op content changed: recorded {then['package_hash'][:16]}, now {p.pkg.hash[:16]}")
    if p.pkg.id != then.get("op"):
        chk.problems.append(f"the step now runs {p.pkg.id}")
    if dict(p.params) != then.get("params", {}):
        chk.problems.append("params differ from the record")
    for i, meta in (then.get("inputs") or {}).items():
        key = got.inputs.get(i)
        if key is None or res.digests[key]["sha256"] != meta.get("sha256"):
            chk.problems.append(f"input {i} differs from the record")
    chk.receipt = (str((then.get("receipt") or {}).get("status")), p.verification.status)
    for o, meta in then["outputs"].items():
        key = got.outputs.get(o)
        chk.outputs[o] = (str(meta.get("sha256")), res.digests[key]["sha256"] if key else None)
    return chk


def _report_now(wf, res):
    """The spike report of the re-run (None: the workflow has none now, or its values did not run)."""
    r = wf.report
    try:
        return spike_report(res.value(r.raw.text), res.value(r.cleaned.text), res.value(r.clean.text)) if r else None
    except (KeyError, StudioError):
        return None
