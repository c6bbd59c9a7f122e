"""The typed reports of the catalog, sharding, proof-report, publishing and workflow requests
(studio/engine/services/requests.py, docs/architecture.md "Requests: one table"): each is a msgspec
Struct declared next to its handler, a handler that returns the old dict is refused, the reports
cross a real worker (and the transport, arrays and all) as their Structs, and their presenters give
the CLI's text and JSON."""
from __future__ import annotations

import inspect
import pickle
import re
from pathlib import Path

import msgspec
import numpy as np
import pytest

from studio.engine.services import catalog_scan, proof_report, publishing, sharding
from studio.engine.services import workflows as wf
from studio.engine.services.requests import TABLE, Entry, Kind, Request, serve

ROOT = Path(__file__).resolve().parents[2]
CLIP = ROOT / "resources" / "ops" / "core" / "clip"
MINE = {Kind.CATALOG: catalog_scan.CatalogReport, Kind.SHARD_REPORT: sharding.ShardingReport,
        Kind.REPORT: proof_report.ProofReport, Kind.REPORT_CHECK: proof_report.ReportCheck,
        Kind.PUBLISH: publishing.PublishReport, Kind.CARD: publishing.CardReport,
        Kind.VERIFY_HERE: publishing.VerifyHereReport, Kind.WORKFLOW_RUN: wf.WorkflowRunReport,
        Kind.WORKFLOW_VERIFY: wf.VerifyResult, Kind.TRAIN: wf.TrainReport}


def _req(ctx=None) -> Request:
    return Request(ctx=ctx, progress=lambda *a: None, announce=lambda pkg: None)


def test_each_kind_declares_its_report_as_a_keyword_struct():
    for kind, report in MINE.items():
        assert TABLE[kind].report is report, kind
        assert issubclass(report, msgspec.Struct), kind
        assert {p.kind for p in inspect.signature(report).parameters.values()} == {inspect.Parameter.KEYWORD_ONLY}, kind


@pytest.mark.parametrize("kind, old", [
    (Kind.CATALOG, [{"id": "core/signal/clip@1"}, {"problem": "x"}]),
    (Kind.REPORT_CHECK, {"ok": True, "lines": []}),
    (Kind.WORKFLOW_VERIFY, {"workflow": "w", "ok": True, "lines": []}),
])
def test_a_handler_that_returns_the_old_dict_is_refused(kind, old):
    """The failing control: the entry as it was (its handler's dict or list) is a bug, never an answer."""
    e = TABLE[kind]
    table = {kind: Entry(kind, e.args, lambda *a, **kw: old, e.report, e.budget_s, "ctx")}
    args = {"roots": [], "profile_id": None} if kind == Kind.CATALOG else \
        {"path": "x"} if kind == Kind.REPORT_CHECK else {"record": "x"}
    with pytest.raises(TypeError, match=f"returned a {type(old).__name__}, not a {e.report.__name__}"):
        serve(_req(), kind, args, table)


def test_the_workflow_handlers_type_what_the_use_cases_return(monkeypatch):
    """workflow_verify through the table's own entry: the use case's dict becomes the report."""
    rep = {"workflow": "w", "ok": False, "notes": ["n"], "problems": ["p"], "steps": [], "lines": ["NOT reproduced"]}
    monkeypatch.setattr(wf, "verify", lambda ctx, record, **kw: rep)
    got = serve(_req(), Kind.WORKFLOW_VERIFY, {"record": "r.json"})
    assert isinstance(got, wf.VerifyResult) and not got.ok and got.lines == ["NOT reproduced"]
    assert msgspec.to_builtins(got) == rep                    # `workflow verify --json` prints what it did


def test_catalog_and_card_cross_a_real_worker_as_their_structs():
    from studio.engine.worker.client import WorkerClient
    with WorkerClient(budget_s=120.0) as c:
        cat = c.call(Kind.CATALOG, roots=[], profile_id=None)
        assert isinstance(cat, catalog_scan.CatalogReport) and cat.cards
        assert all(isinstance(x, catalog_scan.OpCard) for x in cat.cards)
        clip = next(x for x in cat.cards if x.id == "core/signal/clip@1")
        assert clip.group == "builtin" and clip.receipt is None and not clip.broken
        assert cat.summary(None) == f"{len(cat.cards)} ops" and "GPU profile p" in cat.summary("p")
        card = c.call(Kind.CARD, target=str(CLIP))
    assert isinstance(card, publishing.CardReport)
    assert card.facts["id"] == "core/signal/clip@1" and "text" not in card.facts and "html" not in card.facts
    assert card.show() == card.text and card.show(as_html=True) == card.html and "core/signal/clip@1" in card.text
    assert card.trust_line().startswith("trust: ")


def test_a_run_report_with_arrays_crosses_the_transport_as_itself():
    """The run's plots and outputs are arrays inside the Struct: the large ones travel through
    shared memory and come back as arrays, the report as a WorkflowRunReport."""
    from studio.engine.worker import transport
    y = np.arange(40_000, dtype=np.float32)
    r = wf.WorkflowRunReport(workflow="w", status="done", record_path="/r.json", record={"steps": []}, proofs=[],
                             wall_seconds={"total": 1.0, "proving": 0.0, "steps": 0.5},
                             plots=[{"file": "/p.png", "series": [{"label": "y", "x0": 0, "y": y}]}], written=[],
                             report=None, report_lines=[], lines=["workflow  w"], arrays={"signal.y": y})
    segments: list = []
    packed = transport.pack(r, segments)
    assert segments and isinstance(packed.arrays["signal.y"], transport.Shared)
    try:
        back = transport.unpack(pickle.loads(pickle.dumps(packed)), unlink=False)
    finally:
        for seg in segments:
            seg.close()
            seg.unlink()
    assert isinstance(back, wf.WorkflowRunReport)
    assert np.array_equal(back.arrays["signal.y"], y) and np.array_equal(back.plots[0]["series"][0]["y"], y)
    assert back.text_lines() == ["workflow  w"] and back.in_all() is None
    assert back.files() == ["/p.png", "/r.json"]
    assert back.to_json("/out") == {"workflow": "w", "status": "done", "record_path": "/r.json", "report": None,
                                    "written": [], "lines": ["workflow  w"], "plots": ["/p.png"], "out_dir": "/out"}


def test_the_presenters_give_the_clis_text_and_json():
    check = proof_report.ReportCheck(ok=False, lines=["FAIL  page: edited"])
    assert check.text_lines() == ["FAIL  page: edited", "verdict: FAIL"]
    assert proof_report.ProofReport(op="a/b/c@1", html="").wrote("x.html") == "wrote x.html (proof report of a/b/c@1)"
    card = publishing.CardReport(facts={"trust": {"level": "verified", "why": "here"}}, text="t", html="h")
    here = publishing.VerifyHereReport(op="a/b/c@1", lines=["  conformance here: 3/3"], card=card)
    assert here.text_lines() == ["  conformance here: 3/3", "  trust: verified (here)"]
    learner = sharding.ShardingReport(kind="learner", ok=True, warnings=[], lines=["x"], file="l.toml", name="l",
                                      measured={"replicas": 3, "nodes": {}})
    assert learner.to_json() == {"replicas": 3, "nodes": {}, "kind": "learner", "file": "l.toml", "name": "l",
                                 "ok": True, "warnings": []}
    flow = sharding.ShardingReport(kind="workflow", ok=True, warnings=[], lines=["x"], unverified=["conv"],
                                   measured={"file": "w.toml", "replicas": 2, "ok": True, "warnings": [], "nodes": []})
    assert list(flow.to_json()) == ["file", "replicas", "ok", "warnings", "nodes", "kind", "unverified"]
    assert flow.verdict().startswith("unverified: 1 op(s)")


def test_the_train_report_prints_as_the_cli_did():
    r = wf.TrainReport(workflow="w", status="done", losses=[4.0, 2.0, 1.0], final_loss=1.0, fall=4.0,
                       params={"bias": np.array([0.5], np.float32)}, ladder=["bias: declared vjp"], memory=[],
                       comparison=None, checkpoint="/c.json", record_path="/r.json", seconds=0.25,
                       lines=["gradcheck x: PASS"], optimizer="adam")
    text = r.text_lines()
    assert text[:3] == ["gradcheck x: PASS", "ladder", "  bias: declared vjp"]
    assert "final      loss 1: fell 4.0x from 4 in 3 steps (0.2 s)" in text and "params     bias = [0.5]" in text
    assert text[-2:] == ["checkpoint /c.json", "record     /r.json"]
    js = r.to_json()
    assert list(js)[-1] == "params" and js["params"] == {"bias": [0.5]} and "params" not in list(js)[:-1]


def test_the_studio_names_these_requests_by_their_kind():
    """``workers.submit(lane, Kind.X, ...)`` and ``client.call(Kind.X, ...)``: never a string."""
    app = ROOT / "studio" / "app"
    files = ["publish/ring_panel.py", "publish/dialogs.py", "shell/window.py", "tools/workflow_view.py",
             "tools/shard_view.py"]
    named = re.compile(r"""(submit\(\s*["']\w+["']\s*,\s*|\.call\(\s*)["']\w+["']""")
    found = [f"{f}:{n}" for f in files for n, line in enumerate((app / f).read_text().splitlines(), 1)
             if named.search(line)]
    assert found == []
