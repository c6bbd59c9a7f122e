"""The device worker's one request table (studio/engine/services/requests.py; docs/architecture.md,
"Requests: one table"): every kind declared once with its typed arguments, its handler, its typed
report and its budget; no request named by a "module:function" string anywhere in studio/; an
unknown kind refused with a clear error; a real round trip through the worker's child; and how
many calls `scellis conform FOLDER` takes from studio.cli:main to the device's executor."""
from __future__ import annotations

import inspect
import json
import multiprocessing as mp
import re
import signal
import traceback
from pathlib import Path

import msgspec
import pytest

from studio.engine.errors import StudioError
from studio.engine.services import requests
from studio.engine.services.requests import BUDGETS, TABLE, Args, Kind, PingReport, Request, serve

ROOT = Path(__file__).resolve().parents[2]
STUDIO = ROOT / "studio"
MEDIAN = ROOT / "examples" / "windowed_median"
CALLS_TO_THE_EXECUTOR = 8


# ------------------------------------------------------------------ the table itself
def test_every_kind_is_declared_once_with_a_handler_typed_arguments_and_a_typed_report():
    assert set(TABLE) == set(Kind) and all(e.kind == k for k, e in TABLE.items())
    for kind, e in TABLE.items():
        assert issubclass(e.args, Args) and issubclass(e.args, msgspec.Struct), kind
        assert isinstance(e.report, type) and issubclass(e.report, msgspec.Struct), kind   # typed, never a dict
        assert e.takes in ("op", "ctx", "req") and set(e.wants) <= {"progress", "note"}, kind
        assert e.budget_s is None or e.budget_s > 0, kind
        # the handler takes what the table gives it: the head (ctx, pkg / ctx / req), the
        # arguments' fields (less the target an "op" request resolves) and the callbacks it wants
        fields = set(e.args.__struct_fields__) - ({"target"} if e.takes == "op" else set())
        head = {"op": 2, "ctx": 1, "req": 1}[e.takes]
        try:
            inspect.signature(e.handler).bind(*[None] * head, **dict.fromkeys(fields | set(e.wants)))
        except TypeError as err:
            pytest.fail(f"{kind}: {e.handler.__module__}.{e.handler.__qualname__} does not take its arguments: {err}")
    assert BUDGETS[Kind.CONFORM] == 60.0 and "ping" not in BUDGETS
    assert PingReport in {e.report for e in TABLE.values()}         # a Struct where it crosses the boundary
    assert not [k for k, e in TABLE.items() if e.report in (dict, list)]


def test_no_request_is_named_by_a_string_anywhere_in_studio():
    spec = re.compile(r"""["']studio(\.\w+)+:\w+""")                # "studio.engine.x:handler"
    # a kind given as a string: workers.submit(lane, "run", ...) or client.call("conform", ...)
    by_name = re.compile(r"""\.submit\(\s*["'][\w-]+["']\s*,\s*["']|\.call\(\s*["']""")
    assert by_name.search('self.workers.submit("run", "op_output", n=1)') and by_name.search('w.call("conform")')
    assert not by_name.search('self.workers.submit("run", Kind.OP_OUTPUT, n=1)')
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(STUDIO.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if spec.search(line) or by_name.search(line)]
    assert found == []
    child = (STUDIO / "engine" / "worker" / "child.py").read_text()
    assert "importlib" not in child and "import_module" not in child
    assert not (STUDIO / "engine" / "worker" / "handlers.py").exists()


def test_an_unknown_kind_and_unknown_arguments_are_refused_with_a_clear_error():
    req = Request(ctx=None, progress=lambda *a: None, announce=lambda pkg: None)
    with pytest.raises(StudioError, match="no request 'nope'") as info:
        serve(req, "nope", {})
    assert info.value.field == "request" and "conform" in info.value.hint and "ping" in info.value.hint
    with pytest.raises(StudioError, match="request 'ping'.*unknown field `bogus`"):
        serve(req, Kind.PING, {"bogus": 1})
    with pytest.raises(StudioError, match=r"request 'conform'.*\$\.seed"):
        serve(req, Kind.CONFORM, {"target": "x", "seed": "zero"})


def test_a_handler_that_returns_the_wrong_report_is_a_bug_not_an_answer():
    entry = requests.Entry("odd", requests.NoArgs, lambda ctx: {"not": "a ping"}, PingReport)
    with pytest.raises(TypeError, match="returned a dict, not a PingReport"):
        serve(Request(None, print, print), "odd", {}, {"odd": entry})


def test_a_real_round_trip_through_the_workers_child():
    from studio.engine.worker.client import WorkerClient
    with WorkerClient(budget_s=60.0) as c:
        got = c.call(Kind.PING)
        assert isinstance(got, PingReport) and got.pid == c.pid and got.pipelines >= 0
        with pytest.raises(StudioError, match="the device worker has no request 'nope'"):
            c.call("nope")
        with pytest.raises(StudioError, match="unknown field `sleep`"):
            c.call(Kind.PING, sleep=1)
        assert c.call("ping").pid == got.pid                      # refusals leave the child as it was


# ------------------------------------------------------------------ scellis conform: calls to the executor
class _Bridge:
    """The client's end of the worker pipe, with the child's loop run in this thread: a request
    sent runs ``child_main`` at once (then a shutdown ends it), and the client reads its replies
    from the pipe as usual. So one Python stack goes from studio.cli:main to dispatch_workgroups."""

    def __init__(self):
        self.here, self.there = mp.Pipe(duplex=True)

    def send(self, msg):
        from studio.engine.worker.child import child_main
        self.here.send(msg)
        self.here.send(("shutdown",))
        old = signal.getsignal(signal.SIGINT)
        try:
            child_main(self.there, {}, None)
        finally:
            signal.signal(signal.SIGINT, old)        # the child ignores Ctrl-C: this process does not

    def poll(self, timeout):
        return self.here.poll(timeout)

    def recv(self):
        return self.here.recv()

    def close(self):
        self.here.close()
        self.there.close()


@pytest.mark.slow
def test_scellis_conform_reaches_the_executor_in_at_most_eight_calls_and_looks_the_op_up_once(monkeypatch, capsys):
    """Measured, not asserted from reading: `scellis conform FOLDER` runs through studio.cli:main
    with the worker's child loop (child.child_main, the real one) run in this process, in the
    thread that sends the request (``_Bridge``). A wrapper around wgpu's
    ``GPUComputePassEncoder.dispatch_workgroups`` takes ``traceback.extract_stack()``; the calls
    are the studio frames on that stack, from ``main`` down: the parent's side (main ->
    cmd_conform -> WorkerClient.call) and the child's (child_main -> the table's handler -> ...).
    The one frame between the two sides is the test's bridge (in the product: a pipe message),
    counted as one call. "The executor" is the device package (studio/engine/device/), the first
    frame there: at most CALLS_TO_THE_EXECUTOR calls from main. The whole chain down to
    dispatch_workgroups is printed (its device-internal part is the device package's own).
    Lookups: every call of the worker's resolve (services/actions.py) and of Catalog.resolve."""
    import wgpu.backends.wgpu_native as native

    from studio.cli import main
    from studio.engine.contract.catalog import Catalog
    from studio.engine.services import actions
    from studio.engine.worker import child
    from studio.engine.worker.client import WorkerClient

    stacks: list[list[traceback.FrameSummary]] = []
    dispatch = native.GPUComputePassEncoder.dispatch_workgroups

    def traced(self, *args, **kwargs):
        stacks.append(traceback.extract_stack()[:-1])
        return dispatch(self, *args, **kwargs)
    monkeypatch.setattr(native.GPUComputePassEncoder, "dispatch_workgroups", traced)

    lookups: list[str] = []
    resolve, cat_resolve = actions.resolve, Catalog.resolve
    monkeypatch.setattr(actions, "resolve", lambda ctx, t: lookups.append(f"worker {t}") or resolve(ctx, t))
    monkeypatch.setattr(Catalog, "resolve", lambda self, t: lookups.append(f"catalog {t}") or cat_resolve(self, t))

    contexts = []

    class Contexts(child._Contexts):
        def __init__(self):
            super().__init__()
            contexts.append(self)
    monkeypatch.setattr(child, "_Contexts", Contexts)

    def ensure(self):
        if self._conn is None:
            self._conn, self._ready = _Bridge(), True
    monkeypatch.setattr(WorkerClient, "_ensure", ensure)
    try:
        code = main(["conform", str(MEDIAN), "--case", "0", "--no-receipt", "--json"])
    finally:
        for c in contexts:
            c.hosts.shutdown()
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["verdict"] == "pass", out

    def studio_frames(stack):
        frames = [f for f in stack if Path(f.filename).resolve().is_relative_to(STUDIO)]
        first = next(i for i, f in enumerate(frames) if f.name == "main" and f.filename.endswith("cli/__init__.py"))
        return frames[first:]
    conform_stacks = [studio_frames(s) for s in stacks if any(f.name == "conform" and f.filename.endswith(
        "services/actions.py") for f in s)]                          # not the device's own start-up kernel
    assert conform_stacks, "conformance never reached dispatch_workgroups"
    chain = min(conform_stacks, key=len)
    names = [f"{Path(f.filename).relative_to(STUDIO).as_posix()}:{f.name}" for f in chain]
    to_executor = next(i for i, n in enumerate(names) if n.startswith("engine/device/"))
    print("\nscellis conform, studio frames from main to dispatch_workgroups:\n  " + "\n  ".join(names))
    print(f"calls from main to the executor ({names[to_executor]}): {to_executor}; "
          f"to dispatch_workgroups: {len(names)}")
    parent = names.index("engine/worker/child.py:child_main")
    assert names[:parent] == ["cli/__init__.py:main", "cli/proofs.py:cmd_conform", "engine/worker/client.py:call"]
    assert names[parent + 1] == "engine/services/actions.py:conform"      # the table's handler, straight from the loop
    assert to_executor <= CALLS_TO_THE_EXECUTOR, names
    assert lookups == [f"worker {MEDIAN}"], lookups                      # looked up once, in the worker
