"""Processes are walked with psutil: a worker's threads and children lowered in
priority, a worker child's own children killed, an autosave's owner recognised (a recycled pid is
not), a host's CPU clock, a lock's holder named. The /proc reads psutil cannot do (/proc/locks,
the Seccomp line, thread names) each sit behind one named function, and nothing else reads /proc.
Real processes, real /proc."""
import ast
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psutil
import pytest

from studio.app.shell.autosave import _alive, _start_time
from studio.app.bridge.worker_bridge import background_priority
from studio.engine.device.device import thread_names
from studio.engine.learner.limits import available_memory
from studio.engine.trust.kernel import seccomp_reported
from studio.engine.trust.pool import host_cpu_seconds
from studio.engine.trust.store import _holders, flock_holders

STUDIO = Path(__file__).resolve().parents[2] / "studio"

# a process with a second thread and a child process (sleep), which prints "ready"
FAMILY = textwrap.dedent("""
    import subprocess, threading, time
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
    child = subprocess.Popen(["sleep", "120"])
    print("ready", flush=True)
    time.sleep(120)
""")


def _start(code: str, *args) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() in ("ready", "held")
    return p


def _end(p: subprocess.Popen) -> None:
    for c in psutil.Process(p.pid).children(recursive=True):
        c.kill()
    p.kill()
    p.wait()


def _nices(pid: int) -> list[int]:
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return [os.getpriority(os.PRIO_PROCESS, t.id) for p in procs for t in p.threads()]


def test_a_workers_threads_and_children_get_the_background_priority():
    p = _start(FAMILY)
    try:
        before = _nices(p.pid)
        assert len(before) >= 3 and set(before) == {0}            # main thread, its second thread, the child
        assert background_priority(p.pid, nice=10) == len(before)
        assert set(_nices(p.pid)) == {10}
        assert background_priority(p.pid, nice=10) == 0          # the control: nothing left to lower
    finally:
        _end(p)
    assert background_priority(p.pid) == 0 and background_priority(None) == 0     # gone: nothing to walk


@pytest.mark.slow                     # a fresh Python that imports the worker
def test_a_worker_child_kills_its_own_children_and_only_them():
    code = textwrap.dedent("""
        import subprocess, threading
        from studio.engine.worker.child import _kill_children
        kids = [subprocess.Popen(["sleep", "60"])]
        t = threading.Thread(target=lambda: kids.append(subprocess.Popen(["sleep", "60"])))   # from another thread
        t.start(); t.join()
        assert all(k.poll() is None for k in kids)
        _kill_children()
        print([k.wait(timeout=20) for k in kids])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=STUDIO.parent)
    assert out.returncode == 0 and out.stdout.strip() == "[-9, -9]", out.stdout + out.stderr


def test_an_autosaves_owner_is_alive_only_with_its_own_start_time():
    me = os.getpid()
    assert _alive(me, _start_time(me))
    assert not _alive(me, "1.00")                     # the pid was recycled: another process holds it now
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert _start_time(dead.pid) is None and not _alive(dead.pid, None)


@pytest.mark.slow
def test_a_hosts_cpu_clock_counts_what_it_spun():
    code = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "print(time.process_time(), flush=True)\ntime.sleep(120)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        own = float(p.stdout.readline())
        assert host_cpu_seconds(p.pid) >= own - 0.02          # one clock tick of slack
    finally:
        p.kill()
        p.wait()
    assert host_cpu_seconds(p.pid) is None


def test_a_locks_holder_is_named_and_a_free_lock_has_none(tmp_path):
    hold = ("import fcntl, sys, time\nf = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('held', flush=True); time.sleep(120)\n")
    path = tmp_path / "x.lock"
    path.touch()
    p = _start(hold, str(path))
    with open(path) as f:
        try:
            assert flock_holders(f.fileno()) == [p.pid]
            assert _holders(f.fileno()) == f"process {p.pid} ({psutil.Process(p.pid).name()})"
        finally:
            p.kill()
            p.wait()
        assert flock_holders(f.fileno()) == [] and _holders(f.fileno()) == "another process"


def test_what_psutil_cannot_read_is_read_behind_one_function_each():
    stop = threading.Event()
    before = len(thread_names())
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert len(thread_names()) == before + 1 == psutil.Process().num_threads()
    finally:
        stop.set()
        t.join()
    assert seccomp_reported() == ("Seccomp:" in Path("/proc/self/status").read_text())
    assert 0 < available_memory() <= psutil.virtual_memory().total


# ------------------------------------------------------------------ nothing else reads /proc
# (module, function) where /proc may be read; host.py is the confined program (standard library only)
ALLOWED = {("engine/trust/store.py", "flock_holders"), ("engine/trust/kernel.py", "seccomp_reported"),
           ("engine/device/device.py", "thread_names")}


def proc_reads(path: Path, rel: str) -> set[tuple[str, str]]:
    """(module, enclosing function) of every string that names a path under /proc."""
    found = set()
    text = path.read_text()
    if "/proc" not in text:
        return found
    tree = ast.parse(text, str(path))
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] + [tree]:
        for node in ast.walk(fn):
            parts = [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []
            if isinstance(node, ast.JoinedStr):
                parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            if any(s.startswith("/proc") for s in parts if isinstance(s, str)) and not _docstring(fn, node):
                found.add((rel, getattr(fn, "name", "<module>")))
    return found


def _docstring(fn, node) -> bool:
    return bool(fn.body) and isinstance(fn.body[0], ast.Expr) and fn.body[0].value is node


def _innermost(found: set) -> set:
    """A string inside a function is also inside the module: keep the function only."""
    funcs = {m for m, f in found if f != "<module>"}
    return {(m, f) for m, f in found if f != "<module>" or m not in funcs}


def test_nothing_else_reads_proc():
    found = set()
    for py in sorted(STUDIO.rglob("*.py")):
        rel = str(py.relative_to(STUDIO))
        if rel not in ("engine/trust/host.py", "engine/trust/namespaces.py"):     # the confined host's own
            found |= proc_reads(py, rel)
    assert _innermost(found) == ALLOWED


def test_the_proc_check_can_fail(tmp_path):
    bad = tmp_path / "walker.py"
    bad.write_text('import os\ndef kids(pid):\n    """Reads /proc."""\n'
                   '    return open(f"/proc/{pid}/task/{pid}/children").read().split()\n')
    assert _innermost(proc_reads(bad, "walker.py")) == {("walker.py", "kids")}
