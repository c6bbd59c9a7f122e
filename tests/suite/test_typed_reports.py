"""Typed reports cross the worker's process boundary (studio/engine/services/requests.py;
docs/architecture.md, "Requests: one table"): each report is a msgspec Struct that ``checked``
enforces (a handler returning a dict is a bug, refused), its arrays travel through shared memory
inside the Struct (studio/engine/worker/transport.py), it arrives through the real worker as its
Struct, and its one presenter is what the CLI prints: `scellis run` tells the receipt standing and
the tuned values its report carries, judging nothing itself; `--require-receipt` refuses a failed
receipt; `scellis receipts` looks the op up once, in the worker."""
from __future__ import annotations

import contextlib
import json

import msgspec
import numpy as np
import pytest
from conftest import BUILTINS, EXAMPLES, MEDIAN, copy_package

from studio.engine.errors import StudioError
from studio.engine.services import actions, demo, requests, trial, tuning
from studio.engine.services.requests import TABLE, Entry, Kind, Request, serve
from studio.engine.worker import transport

MINE = {Kind.RUN: actions.RunReport, Kind.CHECK: actions.CheckedReport, Kind.RECEIPTS: actions.ReceiptsReport,
        Kind.CONFORM: actions.ConformReport, Kind.GRADCHECK: actions.GradcheckResult,
        Kind.DEMO: demo.DemoReport, Kind.TRY_RUN: trial.TryReport, Kind.TRY_REFERENCE: trial.TryReport,
        Kind.OP_OUTPUT: trial.TryReport, Kind.TUNE: tuning.TuneReport}


# ------------------------------------------------------------------ the table and the transport
def test_each_kind_declares_its_struct_and_a_handler_returning_a_dict_is_refused():
    for kind, report in MINE.items():
        assert TABLE[kind].report is report and issubclass(report, msgspec.Struct), kind
        entry = Entry(kind, requests.NoArgs, lambda ctx: {"a": "dict"}, report)       # the failing control
        with pytest.raises(TypeError, match=f"returned a dict, not a {report.__name__}"):
            serve(Request(None, print, print), kind, {}, {kind: entry})


def test_a_struct_crosses_the_transport_with_its_arrays_in_shared_memory():
    big = np.arange(transport.SHM_MIN_BYTES, dtype=np.float32)
    rep = trial.TryReport(outputs={"y": big, "tiny": big[:3]}, proof=trial.RunProof(proven=False, why="none"))
    segments: list = []
    packed = transport.pack(rep, segments)
    assert isinstance(packed, trial.TryReport) and len(segments) == 1
    assert isinstance(packed.outputs["y"], transport.Shared) and isinstance(packed.outputs["tiny"], np.ndarray)
    assert rep.outputs["y"] is big                                  # the sender's report is left as it was
    got = transport.unpack(packed, unlink=True)
    assert isinstance(got, trial.TryReport) and got.proof == rep.proof
    np.testing.assert_array_equal(got.outputs["y"], big)
    small = actions.RunReport(op="x", outputs={"y": big[:3]}, receipt="valid")
    assert transport.pack(small, segments := []) == small and segments == []       # nothing large: all pickled
    segments = []
    transport.discard(transport.pack(demo.DemoReport(x=big, y=big, w=1, seconds=(0.0, 0.0), proofs=[], ops=[],
                                                     profile={}), segments))
    with pytest.raises(FileNotFoundError):                          # discard unlinked both of a Struct's segments
        from multiprocessing import shared_memory
        shared_memory.SharedMemory(name=segments[0].name)


# ------------------------------------------------------------------ through the real worker
@pytest.mark.slow
def test_the_reports_cross_a_real_worker_as_their_structs(tmp_path):
    from studio.engine.worker.client import WorkerClient
    root = copy_package(MEDIAN, tmp_path / "m")                     # authored here: trusted, no receipt
    x = np.random.default_rng(1).standard_normal(40).astype(np.float32)
    want = np.median(np.lib.stride_tricks.sliding_window_view(x, 5), axis=-1).astype(np.float32)
    with WorkerClient(budget_s=120.0) as c:
        run = c.call(Kind.RUN, target=str(root), inputs={"x": x}, params={"w": 5})
        assert isinstance(run, actions.RunReport) and np.array_equal(run.outputs["y"], want)
        assert run.op == "user/demo/windowed_median@1" and run.receipt == "none" and run.relied is None
        assert run.notes()[0].startswith("warning: user/demo/windowed_median@1 has no valid conformance receipt "
                                         "on this GPU profile (none)")
        tried = c.call(Kind.TRY_RUN, target=str(root), inputs={"x": x}, params={"w": 5})
        assert isinstance(tried, trial.TryReport) and np.array_equal(tried.outputs["y"], want)
        assert tried.proof == trial.RunProof(proven=False, why="no conformance receipt for this content on "
                                                                "this GPU profile")
        ref = c.call(Kind.TRY_REFERENCE, target=str(root), inputs={"x": x}, params={"w": 5})
        assert isinstance(ref, trial.TryReport) and np.array_equal(ref.outputs["y"], want)
        assert not ref.proof.proven and ref.proof.title().startswith("not proven: the reference")
        checked = c.call(Kind.CHECK, target=str(root))
        assert isinstance(checked, actions.CheckedReport) and checked.ok and checked.lines()[-1] == "verdict: pass"
        conformed = c.call(Kind.CONFORM, target=str(root), case=0, receipt=False)
        assert isinstance(conformed, actions.ConformReport) and conformed.ok and conformed.passed == 1
        assert conformed.receipt is None and conformed.text() == conformed.lines
        assert list(conformed.to_json())[:3] == ["op", "package_hash", "tolerance"] and "lines" not in conformed.to_json()
        assert conformed.mutation_lines == [] and "mutation_lines" not in conformed.to_json()   # no mutants for one case
        grad = c.call(Kind.GRADCHECK, target="core/signal/clip@1", receipt=False)
        assert isinstance(grad, actions.GradcheckResult) and grad.verdict == "pass" and grad.exit_code == 0
        assert grad.text() == grad.lines and grad.to_json()["probes"] and "receipt" not in grad.to_json()
        found = c.call(Kind.RECEIPTS, target=str(root))
        assert isinstance(found, actions.ReceiptsReport) and found.status == "none" and not found.ok
        assert found.lines() == ["user/demo/windowed_median@1: no receipts (run `scellis conform "
                                 "user/demo/windowed_median@1`)"]


@pytest.mark.slow
def test_another_ops_output_crosses_as_a_try_report(ctx, proof_store):
    """``op_output``: the spiky signal (proven first: its receipt from the run's shared proofs), then
    the op on it, unproven — the report says so."""
    from proof_store import proven

    from studio.engine.contract.package import load_package
    from studio.engine.worker.client import WorkerClient
    assert proven(proof_store, ctx, load_package(BUILTINS / "spiky_signal"))["verdict"] == "pass"
    with WorkerClient(budget_s=300.0) as c:
        out = c.call(Kind.OP_OUTPUT, target="core/signal/clip@1", n=1000, seed=3)
    assert isinstance(out, trial.TryReport) and out.outputs["y"].shape == (1000,)
    assert out.proof.proven is False


# ------------------------------------------------------------------ what the CLI prints is the report's
class _Worker:
    """A worker that answers PROFILE and RUN with the reports it is given."""

    def __init__(self, run):
        self.run, self.calls = run, []

    def call(self, kind, **kw):
        self.calls.append(kind)
        if kind == Kind.PROFILE:
            return actions.ProfileReport(id="test-profile", backend="Vulkan", trusted_backend=True, adapter={},
                                         wgpu_version="0", limits={}, reference_host={})
        return self.run


def test_scellis_run_prints_the_reports_receipt_standing_and_tuning_and_judges_nothing(monkeypatch, capsys,
                                                                                      tmp_path):
    """The package has no receipt at all; the report says "forged" and names a tuned value: what
    `scellis run` prints is the report's, never its own judgement of the receipts or the tuning record."""
    from studio.cli import main, ops
    np.save(tmp_path / "x.npy", np.arange(9, dtype=np.float32))
    rep = actions.RunReport(op="user/demo/windowed_median@1", outputs={"y": np.zeros(7, np.float32)},
                            receipt="forged", tuning={"values": {"RUN": 4}, "source": "declared", "why": "for a test"})
    fake = _Worker(rep)
    monkeypatch.setattr(ops, "worker", lambda budget: contextlib.nullcontext(fake))
    monkeypatch.setattr(ops, "save_array", lambda *a: pytest.fail("no --out was given"))
    code = main(["run", str(MEDIAN), "--param", "w=3", "--input", str(tmp_path / "x.npy")])
    out, err = capsys.readouterr()
    assert code == 0 and fake.calls == [Kind.PROFILE, Kind.RUN]
    assert err.splitlines() == rep.notes() == [
        "warning: user/demo/windowed_median@1 has no valid conformance receipt on this GPU profile (forged); "
        "running anyway — `scellis conform user/demo/windowed_median@1` proves it",
        "tuning user/demo/windowed_median@1: RUN=4 (declared default: for a test)"]
    assert out.splitlines() == rep.output_lines() and out.startswith("y: shape (7,) float32")
    relied = actions.RunReport(op="o", outputs={}, receipt="valid", relied="proof o: relied on r.json")
    assert relied.notes() == ["proof o: relied on r.json"]         # with --require-receipt: the receipt relied on


@pytest.mark.slow
def test_require_receipt_refuses_a_failed_receipt_and_without_it_the_report_warns(ctx, tmp_path, capsys):
    """A failing full run records a failed receipt; `scellis run --require-receipt` then exits 1
    (the worker's refusal), and a plain run warns "(failed)" — the worker's judgement, in the report."""
    from studio.cli import main
    from studio.engine.contract.package import load_package
    small = [("w <= n)", "w <= n, n <= 600)")]
    root = copy_package(EXAMPLES / "windowed_median_first_draft", tmp_path / "d", {"op.toml": small})
    assert actions.conform(ctx, load_package(root), mutants=0).verdict == "fail"
    np.save(tmp_path / "x.npy", np.arange(9, dtype=np.float32))
    run = ["run", str(root), "--param", "w=3", "--input", str(tmp_path / "x.npy")]
    assert main([*run, "--require-receipt"]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and "records a failing conformance run" in err, err
    assert main(run) == 0
    err = capsys.readouterr().err
    assert "has no valid conformance receipt on this GPU profile (failed); running anyway" in err, err


def test_scellis_receipts_looks_the_op_up_once_in_the_worker(monkeypatch, capsys):
    """The CLI resolves nothing: the catalog is never asked in this process (the worker's child is
    another process, its lookups its own)."""
    from studio.cli import main
    from studio.engine.contract.catalog import Catalog
    monkeypatch.setattr(Catalog, "resolve", lambda self, t: pytest.fail(f"the CLI looked {t} up itself"))
    assert main(["receipts", "user/demo/windowed_median@1"]) == 1
    assert capsys.readouterr().out == ("user/demo/windowed_median@1: no receipts (run `scellis conform "
                                       "user/demo/windowed_median@1`)\n")
    with pytest.raises(SystemExit):
        main(["receipts"])


# ------------------------------------------------------------------ --json stays what it was
def test_tune_json_is_the_old_dict_in_its_order_and_reads_back_as_the_report():
    cand = {"values": {"RUN": 2}, "proven": True, "cases": 12, "failure": None, "seconds": [0.001, 0.002]}
    old = {"op": "o", "hash": "h" * 64, "params": {}, "sizes": [1024], "default": {"RUN": 2}, "winner": {"RUN": 2},
           "candidates": [cand], "profile": "p", "class": "*", "repeats": 2}
    rep = msgspec.convert(old, tuning.TuneReport)
    assert json.dumps(rep.to_json(), indent=2) == json.dumps(old, indent=2)            # no "record": none written
    rep.record = "/r.json"
    assert json.dumps(rep.to_json(), indent=2) == json.dumps(old | {"record": "/r.json"}, indent=2)
    assert rep.lines()[-2:] == ["winner: RUN=2: 3.00 ms (declared RUN=2: 3.00 ms; tuned/declared 1.00)",
                                "record: /r.json"]


def test_check_json_is_the_checkers_dict():
    err = StudioError("bad", file="op.toml", line=3, field="x").to_dict()
    old = {"op": "o", "hash": "h" * 64, "ok": False, "passed": ["a"], "errors": [err], "warnings": []}
    rep = msgspec.convert(old, actions.CheckedReport)
    assert json.dumps(rep.to_json(), indent=2) == json.dumps(old, indent=2)
    assert rep.lines()[0] == f"check  o  ({'h' * 16})" and rep.lines()[-1] == "verdict: FAIL (1 error(s))"


def test_json_takes_the_engines_numpy_floats():
    """A median time or a rounded second is a numpy float: ``json.dumps`` writes it, as it did."""
    cand = tuning.TuneCandidate(values={"RUN": 2}, proven=True, cases=3, seconds=[np.float64(0.001)])
    rep = tuning.TuneReport(op="o", hash="h" * 64, params={}, sizes=[8], default={"RUN": 2}, winner={"RUN": 2},
                            candidates=[cand], profile="p", klass="w=7", repeats=1)
    assert json.loads(json.dumps(rep.to_json()))["candidates"][0]["seconds"] == [0.001]
    assert json.loads(json.dumps(rep.to_json()))["class"] == "w=7" and "record" not in rep.to_json()
