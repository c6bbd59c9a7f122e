"""The device worker's requests, one table (docs/architecture.md, "Requests: one table").

Each request is declared once, in ``TABLE``: its kind (``Kind``), its typed arguments (a msgspec
Struct, checked in the worker before anything runs), the use case that handles it, the type of
its report (what crosses back to the CLI or the Studio) and its time budget where it has one. The
worker's child (studio/engine/worker/child.py) runs a request with ``serve``; the front ends name
a request by its ``Kind`` and give their worker clients ``BUDGETS``.

How ``serve`` calls a handler is said by the entry's ``takes``: ``"op"`` resolves the ``target``
argument freshly (edits on disk are seen), tells the parent which op it is (so a timeout can name
it) and calls ``handler(ctx, pkg, **args)``; ``"ctx"`` calls ``handler(ctx, **args)``; ``"req"``
gives the handler the whole ``Request``. ``wants`` names the Request's callbacks the handler gets as
keyword arguments (``progress``, ``note``)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Callable

import msgspec

from ..errors import StudioError
from . import actions, catalog_scan, demo, proof_report, publishing, reference_check, sharding, trial, trying, tuning
from . import workflows as wf


@dataclass
class Request:
    """What the worker gives a request besides its arguments."""
    ctx: object                          # studio.engine.context.Context
    progress: Callable[..., None]
    announce: Callable[[object], None]   # the package being worked on, so a timeout can name it
    note: Callable[[dict], None] | None = None   # a small JSON-able event the front end shows at once


class Kind(StrEnum):
    RUN = "run"
    CONFORM = "conform"
    CHECK = "check"
    GRADCHECK = "gradcheck"
    RECEIPTS = "receipts"
    PROFILE = "profile"
    DEMO = "demo"
    PING = "ping"
    CATALOG = "catalog"
    REFERENCE = "reference"
    TRY_RUN = "try_run"
    TRY_REFERENCE = "try_reference"
    OP_OUTPUT = "op_output"
    TUNE = "tune"
    SHARD_REPORT = "shard_report"
    REPORT = "report"
    REPORT_CHECK = "report_check"
    PUBLISH = "publish"
    CARD = "card"
    VERIFY_HERE = "verify_here"
    WORKFLOW_RUN = "workflow_run"
    WORKFLOW_VERIFY = "workflow_verify"
    TRAIN = "train"


class Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A request's arguments: a subclass per kind (the fields are the handler's keywords)."""


class Target(Args):
    target: str


class RunArgs(Target):
    inputs: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    budget_bytes: int | None = None
    require_receipt: bool = False


class ConformArgs(Target):
    seed: int = 0
    large: bool = False
    case: int | None = None
    receipt: bool = True
    seeds: int = actions.SEEDS


class GradcheckArgs(Target):
    params: dict[str, Any] | None = None
    h: float | None = None
    seed: int = 0
    tolerance: float | None = None
    receipt: bool = True


class NoArgs(Args):
    pass


class DemoArgs(Args):
    n: int = 1_000_000
    w: int = 7
    seed: int = 1


class PingArgs(Args):
    sleep_s: float = 0.0


class CatalogArgs(Args):
    roots: list[str] = msgspec.field(default_factory=list)
    profile_id: str | None = None


class TryArgs(Target):
    inputs: dict[str, Any] = msgspec.field(default_factory=dict)
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class TryRunArgs(TryArgs):
    budget_bytes: int | None = None


class OpOutputArgs(Target):
    n: int = 1_000_000
    seed: int = 1


class TuneArgs(Target):
    params: dict[str, Any] | None = None
    sizes: list[Any] | None = None
    repeats: int | None = None
    seed: int = 0
    only: dict[str, Any] | None = None
    record: bool = True


class ShardArgs(Args):
    path: str
    replicas: int
    allow_unverified: bool = False
    steps: int | None = None
    prove: bool = False


class PathArgs(Args):
    path: str


class PublishArgs(Target):
    visibility: str
    license: str | None = None


class WorkflowRunArgs(PathArgs):
    out_dir: str | None = None
    record: str | None = None
    plot: str | None = None
    allow_unverified: bool = False
    prove: bool = False
    until: str | None = None
    all_outputs: bool = False


class VerifyArgs(Args):
    record: str


class TrainArgs(PathArgs):
    steps: int | None = None
    optimizer: str | None = None
    learning_rate: float | None = None
    swaps: dict[str, str] | None = None
    prove: bool = False
    allow_unverified: bool = False
    receipts: str | None = None
    resume: str | None = None
    checkpoint: str | None = None
    record: str | None = None
    out_dir: str | None = None
    compare: dict[str, str] | None = None


class PingReport(msgspec.Struct):
    pid: int
    pipelines: int


def ping(ctx, *, sleep_s: float = 0.0) -> PingReport:
    if sleep_s:
        import time
        time.sleep(sleep_s)
    import os
    return PingReport(os.getpid(), ctx.device.pipeline_count if ctx.has_device else 0)


@dataclass(frozen=True)
class Entry:
    kind: str                      # a Kind (a test's own entries: any name)
    args: type                     # an Args subclass
    handler: Callable
    report: type                   # what the handler returns (checked before it is sent)
    budget_s: float | None = None  # the kind's default budget, where it has one
    takes: str = "ctx"             # "op" | "ctx" | "req" (module docstring)
    wants: tuple[str, ...] = ()    # the Request's callbacks passed by name: "progress", "note"


_P, _N = ("progress",), ("progress", "note")
TABLE: dict[str, Entry] = {e.kind: e for e in (
    Entry(Kind.RUN, RunArgs, actions.run_report, actions.RunReport, None, "op", _P),
    Entry(Kind.CONFORM, ConformArgs, actions.conform, actions.ConformReport, 60.0, "op", _N),
    Entry(Kind.CHECK, Target, actions.check, actions.CheckedReport, 30.0, "op"),
    Entry(Kind.GRADCHECK, GradcheckArgs, actions.gradcheck, actions.GradcheckResult, 60.0, "op"),
    Entry(Kind.RECEIPTS, Target, actions.verify_receipts, actions.ReceiptsReport, 30.0, "op"),
    Entry(Kind.PROFILE, NoArgs, actions.profile, actions.ProfileReport),
    Entry(Kind.DEMO, DemoArgs, demo.demo, demo.DemoReport, 120.0),
    Entry(Kind.PING, PingArgs, ping, PingReport),
    Entry(Kind.CATALOG, CatalogArgs, catalog_scan.catalog, catalog_scan.CatalogReport, 60.0),
    Entry(Kind.REFERENCE, Target, reference_check.load, reference_check.ReferenceReport, 30.0),
    Entry(Kind.TRY_RUN, TryRunArgs, trial.run_unproven, trial.TryReport, 120.0, "op", _P),
    Entry(Kind.TRY_REFERENCE, TryArgs, trial.run_reference, trial.TryReport, 120.0, "op"),
    Entry(Kind.OP_OUTPUT, OpOutputArgs, trying.op_output, trial.TryReport, 120.0, "op", _P),
    Entry(Kind.TUNE, TuneArgs, tuning.tune, tuning.TuneReport, None, "op", _P),
    Entry(Kind.SHARD_REPORT, ShardArgs, sharding.shard_report_json, sharding.ShardingReport, None, "ctx", _P),
    Entry(Kind.REPORT, Target, proof_report.report, proof_report.ProofReport, 600.0, "op", _P),
    Entry(Kind.REPORT_CHECK, PathArgs, proof_report.check_json, proof_report.ReportCheck, 300.0),
    Entry(Kind.PUBLISH, PublishArgs, publishing.publish, publishing.PublishReport, 300.0, "op", _P),
    Entry(Kind.CARD, Target, publishing.card_report, publishing.CardReport, 60.0, "op"),
    Entry(Kind.VERIFY_HERE, Target, publishing.verify_here, publishing.VerifyHereReport, 300.0, "op", _P),
    Entry(Kind.WORKFLOW_RUN, WorkflowRunArgs, wf.handle_run, wf.WorkflowRunReport, None, "req"),
    Entry(Kind.WORKFLOW_VERIFY, VerifyArgs, wf.handle_verify, wf.VerifyResult, None, "req"),
    Entry(Kind.TRAIN, TrainArgs, wf.handle_train, wf.TrainReport, None, "req"),
)}
BUDGETS = {k: e.budget_s for k, e in TABLE.items() if e.budget_s is not None}   # for the worker clients


def entry_of(kind: str, table: dict[str, Entry] = TABLE) -> Entry:
    entry = table.get(kind)
    if entry is None:
        raise StudioError(f"the device worker has no request '{kind}'", field="request",
                          hint="known: " + ", ".join(sorted(map(str, table))))
    return entry


def typed(entry: Entry, kwargs: dict):
    """The request's arguments as its Args, or a StudioError naming the request and the field."""
    try:
        return msgspec.convert(kwargs, entry.args)
    except msgspec.ValidationError as e:
        raise StudioError(f"request '{entry.kind}': {e}", field="request",
                          hint="the arguments are declared in studio/engine/services/requests.py") from None


def arguments(entry: Entry, req: Request, kwargs: dict) -> tuple[tuple, dict]:
    """The handler's positional and keyword arguments (the module docstring: ``takes``, ``wants``)."""
    kw = msgspec.structs.asdict(typed(entry, kwargs)) | {w: getattr(req, w) for w in entry.wants}
    if entry.takes == "req":
        return (req,), kw
    return ((req.ctx, _op(req, kw.pop("target"))) if entry.takes == "op" else (req.ctx,)), kw


def checked(entry: Entry, report):
    if not isinstance(report, entry.report):
        raise TypeError(f"request '{entry.kind}' returned a {type(report).__name__}, not a {entry.report.__name__}")
    return report


def serve(req: Request, kind: str, kwargs: dict, table: dict[str, Entry] = TABLE):
    """Run one request, as the worker's child does (its loop holds these lines itself, so that a
    request's handler is one call from the loop): look its kind up, type its arguments, call its
    handler, check its report."""
    entry = entry_of(kind, table)
    head, kw = arguments(entry, req, kwargs)
    return checked(entry, entry.handler(*head, **kw))


def _op(req: Request, target: str):
    pkg = actions.resolve(req.ctx, target)
    req.announce(pkg)
    return pkg
