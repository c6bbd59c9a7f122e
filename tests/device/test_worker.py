"""The device worker: a real never-ending WGSL kernel on the
real adapter (lavapipe here) is killed at its time budget, the error names the op and the
seconds, the worker restarts by itself and the next run works; memory budgets refuse runs
with the numbers instead of crashing."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.services.requests import Args, Entry
from studio.engine.worker import transport
from studio.engine.worker.client import WorkerCancelled, WorkerClient, WorkerTimeout
from studio.engine.worker.transport import SHM_MIN_BYTES

DATA = Path(__file__).resolve().parents[1] / "data" / "reliability"
SPIN, FILL = DATA / "spin", DATA / "fill"
RUNAWAY_K = 4_000_000_000          # invocations: ~2 weeks of work on lavapipe, forever on a GPU
STUCK = {"x": np.array([0, 1, 2, 3], np.uint32)}     # x[0] != 7: the loop's exit never holds
FREE = {"x": np.array([7, 1, 2, 3], np.uint32)}      # x[0] == 7: the loop exits at once


def median_ref(x: np.ndarray, w: int) -> np.ndarray:
    return np.median(np.lib.stride_tricks.sliding_window_view(x, w), axis=-1).astype(np.float32)


@pytest.fixture(scope="module")
def client():
    c = WorkerClient(budget_s=3.0)
    yield c
    c.close()


def _shm_names() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(("psm_", "wnsm_"))}
    except FileNotFoundError:
        return set()


@pytest.mark.slow
def test_a_never_ending_kernel_is_killed_at_its_budget_and_the_next_run_works(client):
    # control 1: with the exit condition true, the same kernel finishes and writes nothing
    assert client.call("run", target=str(SPIN), inputs=FREE, params={"k": 64}).outputs["y"].tolist() == [0, 0, 0, 0]
    # control 2: with it false, the loop really runs (it is not compiled away): lavapipe's own
    # hang guard stops each invocation after 65,535 passes, leaving the LCG state in y; a GPU
    # without such a guard never returns, which the budget turns into a WorkerTimeout
    try:
        y = client.call("run", target=str(SPIN), inputs=STUCK, params={"k": 64}, budget_s=3.0).outputs["y"]
        assert np.all(y != 0)
    except WorkerTimeout:
        pass
    old_pid = client.pid
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        client.call("run", target=str(SPIN), inputs=STUCK, params={"k": RUNAWAY_K}, budget_s=2.0)
    elapsed = time.monotonic() - t0
    e = info.value
    assert e.op == "user/test/spin@1" and e.request == "run"
    assert 2.0 <= e.seconds < 2.5 and e.budget_s == 2.0
    assert "user/test/spin@1" in str(e) and "2.0 s" in str(e) and "restarted" in str(e)
    assert e.file == str(SPIN / "forward.wgsl") and e.field == "budget" and e.hint
    assert elapsed < 3.0, f"the kill took {elapsed - 2.0:.2f} s past the budget"
    assert client.last_kill["kill_s"] < 1.0
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)                      # the child that ran the kernel is gone
    # the next run works, in a fresh worker, without anyone restarting anything
    x = np.random.default_rng(3).standard_normal(5000).astype(np.float32)
    y = client.call("run", target="user/demo/windowed_median@1", inputs={"x": x}, params={"w": 7}).outputs["y"]
    np.testing.assert_array_equal(y, median_ref(x, 7))
    assert client.pid not in (None, old_pid)
    print(f"\nkill: budget 2.0 s, error after {elapsed:.3f} s, SIGKILL to reaped {client.last_kill['kill_s'] * 1e3:.1f} ms")


def test_studio_errors_cross_the_process_boundary_with_every_field(ctx, client, pkg_copy):
    pkg = load_package(FILL)
    with pytest.raises(StudioError) as here:
        run_op(ctx, pkg, {}, {"n": 0, "v": 1.0})
    with pytest.raises(StudioError) as there:
        client.call("run", target=str(FILL), params={"n": 0, "v": 1.0})
    a, b = here.value, there.value
    assert (a.message, a.file, a.line, a.col, a.field, a.hint) == (b.message, b.file, b.line, b.col, b.field, b.hint)
    assert b.field == "n"
    root = pkg_copy(op__toml=[("w: u32 odd", "w: u32 odd odd")])   # an error with a file:line:col
    with pytest.raises(StudioError) as here:
        load_package(root)
    with pytest.raises(StudioError) as there:
        client.call("check", target=str(root))
    a, b = here.value, there.value
    assert (a.message, a.file, a.line, a.col, a.field, a.hint) == (b.message, b.file, b.line, b.col, b.field, b.hint)
    assert b.file == str(root / "op.toml") and b.line and b.col


def test_large_arrays_travel_through_shared_memory_and_nothing_leaks(client):
    x = np.random.default_rng(0).standard_normal(300_000).astype(np.float32)
    assert x.nbytes >= SHM_MIN_BYTES
    segments: list = []
    packed = transport.pack({"inputs": {"x": x, "tiny": x[:4]}}, segments)
    assert isinstance(packed["inputs"]["x"], transport.Shared)   # large: shared memory
    assert isinstance(packed["inputs"]["tiny"], np.ndarray)        # small: pickled
    np.testing.assert_array_equal(transport.unpack(packed, unlink=True)["inputs"]["x"], x)
    before = _shm_names()
    y = client.call("run", target="user/demo/windowed_median@1", inputs={"x": x}, params={"w": 5}).outputs["y"]
    np.testing.assert_array_equal(y, median_ref(x, 5))
    assert _shm_names() == before


def test_pipelines_stay_cached_in_the_worker(client):
    client.call("run", target=str(FILL), params={"n": 10, "v": 2.5})
    n1 = client.call("ping").pipelines
    for _ in range(3):
        client.call("run", target=str(FILL), params={"n": 10, "v": 2.5})
    assert client.call("ping").pipelines == n1
    client.call("run", target=str(SPIN), inputs=FREE, params={"k": 64})       # another kernel: one more
    assert client.call("ping").pipelines == n1 + 1


@pytest.mark.slow
def test_cancel_kills_the_request_and_the_worker_comes_back(client):
    fut = client.submit("run", target=str(SPIN), inputs=STUCK, params={"k": RUNAWAY_K}, budget_s=120)
    time.sleep(1.0)
    assert not fut.done()
    t0 = time.monotonic()
    client.cancel()
    with pytest.raises(WorkerCancelled):
        fut.result(timeout=10)
    assert time.monotonic() - t0 < 2.0
    assert client.call("run", target=str(FILL), params={"n": 3, "v": 1.5}).outputs["y"].tolist() == [1.5] * 3


@pytest.mark.slow
def test_conformance_in_the_worker_forwards_progress_and_writes_the_receipt(client, pkg_copy):
    root = pkg_copy()
    seen = []
    out = client.call("conform", target=str(root), progress=lambda done, total: seen.append((done, total)))
    assert out.verdict == "pass" and Path(out.receipt).is_file()
    assert seen and seen[-1][0] == seen[-1][1] == out.passed
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_unknown_requests_and_registered_ones(client):
    with pytest.raises(StudioError, match="no request 'nope'"):
        client.call("nope")
    with WorkerClient(entries={"echo": ECHO}) as c:        # a client's own entries go to its child
        big = np.arange(50_000, dtype=np.float64)
        got = c.call("echo", a=big, b=[1, (2, "three")], c={"d": big[:3]})
        np.testing.assert_array_equal(got["a"], big)
        assert got["b"] == [1, (2, "three")]
    with pytest.raises(StudioError, match="no request 'echo'"):
        client.call("echo")                     # and to no other client's


class EchoArgs(Args):
    a: Any = None
    b: Any = None
    c: Any = None


def _echo(req, **kwargs):
    req.progress(1, 1)
    return kwargs


ECHO = Entry("echo", EchoArgs, _echo, dict, takes="req")


# ------------------------------------------------------------------ memory budgets
def test_a_run_over_the_users_budget_is_refused_with_the_numbers(ctx, client):
    pkg = load_package(FILL)
    with pytest.raises(StudioError) as info:
        run_op(ctx, pkg, {}, {"n": 1000, "v": 1.0}, budget_bytes=3999)
    msg = str(info.value)
    assert "4000 bytes" in msg and "3999 bytes" in msg and "budget" in msg
    assert run_op(ctx, pkg, {}, {"n": 1000, "v": 1.0}, budget_bytes=4000)["y"].shape == (1000,)
    with pytest.raises(StudioError, match="4000 bytes.*3999 bytes"):
        client.call("run", target=str(FILL), params={"n": 1000, "v": 1.0}, budget_bytes=3999)


def test_a_run_over_the_devices_limits_is_refused_before_allocating(ctx, device):
    pkg = load_package(FILL)
    cap = device.profile.limits["max-storage-buffer-binding-size"]
    big = device.profile.limits["max-buffer-size"]
    for n in (cap // 4 + 1, min(big // 4 + 1, 4_294_967_295)):
        t0 = time.perf_counter()
        with pytest.raises(StudioError) as info:
            run_op(ctx, pkg, {}, {"n": n, "v": 1.0})
        assert time.perf_counter() - t0 < 1.0           # refused, not attempted
        msg = str(info.value)
        assert str(4 * n) in msg and (str(cap) in msg or str(big) in msg), msg


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studio.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")})


@pytest.mark.slow
def test_cli_run_budget_is_refused_with_the_numbers():
    r = _cli("run", str(FILL), "--param", "n=1000", "--param", "v=1", "--budget", "100")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "4000 bytes" in r.stderr and "100 bytes" in r.stderr
    r = _cli("run", str(FILL), "--param", "n=4000000000", "--param", "v=1")
    assert r.returncode == 2 and "16000000000 bytes" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_cli_run_timeout_stops_a_runaway_kernel(tmp_path):
    np.save(tmp_path / "x.npy", STUCK["x"])
    t0 = time.monotonic()
    r = _cli("run", str(SPIN), "--input", str(tmp_path / "x.npy"), "--param", f"k={RUNAWAY_K}", "--timeout", "1.5")
    elapsed = time.monotonic() - t0
    assert r.returncode == 2, r.stderr
    assert "user/test/spin@1 ran past its time budget" in r.stderr and "1.5 s" in r.stderr
    assert "Traceback" not in r.stderr
    assert elapsed < 20
    np.save(tmp_path / "x7.npy", FREE["x"])
    r = _cli("run", str(SPIN), "--input", str(tmp_path / "x7.npy"), "--param", "k=64")
    assert r.returncode == 0 and "y: shape (4,)" in r.stdout


@pytest.mark.slow
def test_cli_conform_runs_in_the_worker_under_its_timeout():
    median = Path(__file__).resolve().parents[2] / "examples" / "windowed_median"
    r = _cli("conform", str(median), "--no-receipt", "--timeout", "0.2")
    assert r.returncode == 2 and "ran past its time budget" in r.stderr and "Traceback" not in r.stderr
    r = _cli("conform", str(median), "--no-receipt")
    assert r.returncode == 0 and "verdict   : PASS" in r.stdout
