"""Workers that die with their parent.

The fault: the time budget was the parent's alone, so after SIGKILL or SIGTERM of the CLI
(`timeout 10 scellis run ...`) the device worker kept running a never-ending kernel at full
CPU, for ever. Now the child dies with its parent (Linux's parent-death signal, and a watchdog
thread that sees the parent's end of a pipe close or its parent process change) and enforces
the budget itself. Real processes throughout: the CLI, its worker, the worker's reference hosts,
found through /proc (no psutil here)."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from studio.engine.services.actions import RunReport
from studio.engine.services.requests import Entry, Kind, RunArgs, serve
from studio.engine.worker.child import EXIT_EXPIRED, GRACE_S, Lifeline, child_main
from studio.engine.worker.client import WorkerClient, WorkerTimeout
from studio.engine.worker.transport import pack

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds processes through /proc")

DATA = Path(__file__).resolve().parents[1] / "data" / "reliability"
SPIN = DATA / "spin"
RUNAWAY_K = 4_000_000_000
STUCK = {"x": np.array([0, 1, 2, 3], np.uint32)}     # x[0] != 7: the loop's exit never holds
LIMIT_S = 2.0                                        # the bar: no worker outlives its parent by more
CLK = os.sysconf("SC_CLK_TCK")
HOST_MARK = "__scellis_sandbox_host__"               # in every reference host's command line


# ------------------------------------------------------------------ processes, through /proc
def _stat(pid: int):
    """(state, ppid, start time, CPU seconds) of a process, or None when there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[19]), (int(rest[11]) + int(rest[12])) / CLK


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(root: int) -> dict[int, int]:
    """{pid: start time} of every process below ``root``."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                children.setdefault(st[1], []).append(int(name))
    found, todo = {}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            st = _stat(c)
            if st is not None and c not in found:
                found[c] = st[2]
                todo.append(c)
    return found


def _alive(pid: int, start: int) -> bool:
    st = _stat(pid)
    return st is not None and st[2] == start and st[0] not in "ZX"      # a zombie has ended


def _wait_gone(procs: dict[int, int], limit: float) -> tuple[float, dict[int, int]]:
    """Seconds until every process in ``procs`` ended (polling every 10 ms, up to ``limit``),
    and those still alive then."""
    t0 = time.monotonic()
    while True:
        left = {p: s for p, s in procs.items() if _alive(p, s)}
        elapsed = time.monotonic() - t0
        if not left or elapsed > limit:
            return elapsed, left
        time.sleep(0.01)


def _kill_left(procs: dict[int, int]) -> None:
    for pid, start in procs.items():
        if _alive(pid, start):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _busy_threads(pid: int) -> int:
    """How many of a process's threads other than its main one are running or runnable: the
    driver's executor threads while a kernel runs (the main thread then waits in the driver)."""
    n = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                data = f.read()
        except OSError:
            continue
        n += int(tid) != pid and data[data.rindex(")") + 2] == "R"
    return n


def _spinning(parent: int, worker: int | None = None, timeout: float = 120) -> tuple[int, dict[int, int]]:
    """Wait until ``parent``'s device worker runs the kernel (executor threads busy in ten
    samples in a row, after its reference host started); its pid and every process of the family."""
    deadline = time.monotonic() + timeout
    busy = 0
    while time.monotonic() < deadline:
        family = _descendants(parent)
        if worker is None:
            worker = next((p for p in family if "spawn_main" in _cmdline(p)
                           and "resource_tracker" not in _cmdline(p)), None)
        ready = worker in family and _hosts(family) and _busy_threads(worker) > 0
        busy = busy + 1 if ready else 0
        if busy >= 10:
            return worker, family
        time.sleep(0.05)
    raise AssertionError(f"the worker of {parent} never started spinning: {_descendants(parent)}")


def _hosts(family: dict[int, int]) -> list[int]:
    return [p for p in family if HOST_MARK in _cmdline(p)]


# ------------------------------------------------------------------ the parent dies
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_worker_and_its_reference_hosts_die_with_the_cli(tmp_path, sig):
    np.save(tmp_path / "x.npy", STUCK["x"])
    cli = subprocess.Popen([sys.executable, "-m", "studio.cli", "run", str(SPIN), "--input", str(tmp_path / "x.npy"),
                            "--param", f"k={RUNAWAY_K}", "--timeout", "600"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    family: dict[int, int] = {}
    try:
        worker, family = _spinning(cli.pid)
        hosts = _hosts(family)
        assert hosts, "the worker has no reference host to check"
        os.kill(cli.pid, sig)
        elapsed, left = _wait_gone(family, LIMIT_S)
        assert cli.wait(10) == -sig
        assert not left, {p: _cmdline(p) for p in left}
        print(f"\n{signal.Signals(sig).name} to the CLI: worker {worker}, {len(hosts)} reference host(s) and "
              f"{len(family) - len(hosts) - 1} other(s) gone after {elapsed * 1e3:.0f} ms")
    finally:
        _kill_left(family)
        if cli.poll() is None:
            cli.kill()
            cli.wait()


_PARENT = '''
import sys
import numpy as np
from studio.engine.worker.client import WorkerClient

if __name__ == "__main__":
    client = WorkerClient(budget_s=600, death_signal=False)     # the watchdog alone, as on macOS
    print(client.call("ping").pid, flush=True)
    client.call("run", target=sys.argv[1], inputs={"x": np.array([0, 1, 2, 3], np.uint32)},
                params={"k": 4000000000})
'''


@pytest.mark.slow
def test_without_the_death_signal_the_watchdog_alone_ends_the_worker(tmp_path):
    """Where there is no PR_SET_PDEATHSIG (macOS, Windows) the child's watchdog sees its
    parent's end of the lifeline pipe close, and its parent process change."""
    (tmp_path / "parent.py").write_text(_PARENT)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(SPIN)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[2])
    family: dict[int, int] = {}
    try:
        worker = int(parent.stdout.readline())
        worker, family = _spinning(parent.pid, worker)
        hosts = _hosts(family)
        assert hosts, "the worker has no reference host to check"
        os.kill(parent.pid, signal.SIGKILL)
        elapsed, left = _wait_gone(family, LIMIT_S)
        parent.wait(10)
        assert not left, {p: _cmdline(p) for p in left}
        print(f"\nSIGKILL to the parent, no death signal: worker and {len(hosts)} host(s) gone "
              f"after {elapsed * 1e3:.0f} ms")
    finally:
        _kill_left(family)
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()


# ------------------------------------------------------------------ the parent stops reading
def progress_then_run(req, **kwargs):
    """A request that shows one sign of life, then runs the kernel (it never ends)."""
    req.progress(0, 1)
    return serve(req, Kind.RUN, kwargs)


PROGRESS_THEN_RUN = Entry("progress_then_run", RunArgs, progress_then_run, RunReport, takes="req")


@pytest.mark.slow
def test_a_parent_that_stops_reading_cannot_keep_a_runaway_kernel_going():
    """The parent's deadline is bypassed: its progress callback hangs, so it reads nothing and
    checks no clock. The child still ends the request at its budget (plus GRACE_S)."""
    entered, release = threading.Event(), threading.Event()

    def hung(done, total):
        entered.set()
        release.wait(60)

    with WorkerClient(entries={"progress_then_run": PROGRESS_THEN_RUN}) as client:
        pid = client.call("ping").pid
        start = _stat(pid)[2]
        fut = client.submit("progress_then_run", budget_s=2.0, progress=hung, target=str(SPIN), inputs=STUCK,
                            params={"k": RUNAWAY_K})
        assert entered.wait(60)
        elapsed, left = _wait_gone({pid: start}, 2.0 + GRACE_S + LIMIT_S)
        alive_at_budget = elapsed >= 2.0
        release.set()
        with pytest.raises(WorkerTimeout) as info:
            fut.result(timeout=30)
        assert not left, "the child outlived its own budget"
        assert alive_at_budget and elapsed < 2.0 + GRACE_S + 1.0, elapsed
        assert info.value.budget_s == 2.0 and "spin" in info.value.op
        assert client.call("ping").pid not in (None, pid)          # the next call gets a fresh child
        print(f"\nparent not reading: the child ended its own request {elapsed:.2f} s after its last sign "
              f"of life (budget 2.0 s + grace {GRACE_S:g} s)")


def test_the_childs_watchdog_sends_a_last_message_and_exits():
    """The child's side of the budget, with the test as a parent that never enforces one."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=True)
    alive_r, alive_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=child_main, args=(child, {}, Lifeline(os.getpid(), alive_r, 120.0)),
                       daemon=True)
    proc.start()
    child.close()
    alive_r.close()
    try:
        assert parent.poll(120) and parent.recv()[0] == "ready"
        t0 = time.monotonic()
        parent.send(("call", 7, "ping", pack({"sleep_s": 600.0}, []), 1.0))
        proc.join(1.0 + GRACE_S + LIMIT_S)
        elapsed = time.monotonic() - t0
        assert proc.exitcode == EXIT_EXPIRED
        tag, rid, seconds, budget = parent.recv()
        assert (tag, rid, budget) == ("expired", 7, 1.0) and 1.0 + GRACE_S <= seconds < elapsed + 0.1
        assert 1.0 + GRACE_S <= elapsed < 1.0 + GRACE_S + 1.0
        print(f"\nchild's own budget: 1.0 s (+{GRACE_S:g} s grace), exited after {elapsed:.2f} s")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        for c in (parent, alive_w):
            c.close()
