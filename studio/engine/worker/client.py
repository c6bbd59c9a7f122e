"""The device worker's parent side: a child process owns the wgpu adapter and device, the way a
notebook kernel owns its interpreter (docs/reliability.md).

The parent (the CLI, the Studio) sends requests and gets results or StudioErrors back, with
every field (file, line, col, field, hint) intact. A request that runs past its time budget
is stopped: the parent SIGKILLs the child, raises WorkerTimeout naming the op and the seconds,
and starts a fresh child at once, so the next call works. Compiled pipelines stay cached in the
child. The budget travels with each request, and the child enforces it too, a second after the
parent would; the child also dies with its parent (child.py's ``Lifeline``), so no kernel
outlives the command or the Studio that started it, however the parent ends. Request kinds are
the engine's request table (studio/engine/services/requests.py), plus any entries a client is
given (tests); this module imports neither the table nor the device at its top: the parent stays
light (a client reads the table's budgets when it is made)."""
from __future__ import annotations

import concurrent.futures
import itertools
import multiprocessing as mp
import os
import threading
import time

from ..errors import StudioError
from .child import Lifeline, child_main
from .transport import discard, pack, unpack

DEFAULT_BUDGET_S = 5.0
START_TIMEOUT_S = 120.0          # the child's start (imports, device) is not part of a budget


class WorkerTimeout(StudioError):
    """A request ran past its time budget. The client has already killed the child and started
    a fresh one; ``op``, ``seconds`` and ``budget_s`` say what, how long, and the limit."""

    def __init__(self, op: str, seconds: float, budget_s: float, request: str = "run", file: str | None = None):
        super().__init__(
            f"{op} ran past its time budget: stopped after {seconds:.1f} s (budget {budget_s:g} s); "
            f"the device worker was restarted",
            file=file or None, field="budget",
            hint="a kernel that never finishes (a loop whose exit condition never holds?) is stopped this way; "
                 "if the work is just long, raise the budget (scellis run --timeout SECONDS)")
        self.op, self.seconds, self.budget_s, self.request = op, seconds, budget_s, request

    def __reduce__(self):
        return (WorkerTimeout, (self.op, self.seconds, self.budget_s, self.request, self.file))


class WorkerCancelled(StudioError):
    """The request was cancelled (WorkerClient.cancel): its child was killed and replaced."""

    def __init__(self, op: str, seconds: float):
        super().__init__(f"{op} was cancelled after {seconds:.1f} s; the device worker was restarted",
                         field="cancel")
        self.op, self.seconds = op, seconds

    def __reduce__(self):
        return (WorkerCancelled, (self.op, self.seconds))


class WorkerClient:
    """The parent side. One request runs at a time; ``call`` blocks, ``submit`` returns a
    Future (callbacks and progress run on the client's own thread, not the GUI's)."""

    def __init__(self, *, budget_s: float = DEFAULT_BUDGET_S, start_timeout_s: float = START_TIMEOUT_S,
                 entries: dict | None = None, budgets: dict[str, float] | None = None,
                 death_signal: bool = True):
        """``entries``: request kinds beyond the table's (``{kind: requests.Entry}``, its handler at
        module level so that it pickles: tests); ``budgets``: a kind's default budget when a call
        gives none (the table's ``BUDGETS``, then these; else the client's); ``death_signal=False``
        leaves the child's death with its parent to its watchdog alone (as on macOS and Windows): for tests."""
        from ..services.requests import BUDGETS
        self.entries = dict(entries or {})
        self.kind_budgets = {**BUDGETS, **(budgets or {})}
        self.budget_s = float(budget_s)
        self.start_timeout_s = start_timeout_s
        self.death_signal = death_signal
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self._alive = None             # the write end of the child's lifeline pipe: never written
        # Children are started from this one thread, which lives as long as the client: Linux's
        # parent-death signal fires when the *thread* that started a child ends.
        self._spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="scellis-spawn")
        self._ready = False
        self._call_lock = threading.Lock()
        self._state = threading.Lock()
        self._inflight: tuple | None = None
        self._cancelled = False
        self._closed = False
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._ids = itertools.count(1)
        self.restarts = 0
        self.last_kill: dict | None = None    # {"op", "seconds", "kill_s", "reason"} of the latest kill

    # ---- lifecycle
    def _start(self) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        alive_r, alive_w = self._ctx.Pipe(duplex=False)
        life = Lifeline(os.getpid(), alive_r, self.start_timeout_s, self.death_signal)
        proc = self._ctx.Process(target=child_main, args=(child, self.entries, life), name="scellis-device-worker",
                                 daemon=True)
        self._spawner.submit(proc.start).result()
        child.close()                  # so the child's death shows here as EOF
        alive_r.close()                # and this process's death shows there as EOF
        self._proc, self._conn, self._alive, self._ready = proc, parent, alive_w, False

    def _ensure(self) -> None:
        if self._closed:
            raise StudioError("the device worker was closed", hint="create a new WorkerClient")
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self._reap()
            self._start()
        if self._ready:
            return
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self._conn.poll(left):
                self._kill()
                raise StudioError(f"the device worker did not start within {self.start_timeout_s:g} s",
                                  hint="check that wgpu finds an adapter: scellis profile")
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                code = self._reap()
                raise StudioError(f"the device worker exited while starting (exit code {code})",
                                  hint="run `scellis profile` to see the device error") from None
            if msg[0] == "ready":
                self._ready = True
                return

    def _kill(self) -> float:
        """SIGKILL the child; seconds until it was gone."""
        t0 = time.monotonic()
        proc = self._proc
        if proc is not None and proc.is_alive():
            proc.kill()
        self._reap()
        return time.monotonic() - t0

    def _reap(self):
        proc, conn = self._proc, self._conn
        code = None
        if proc is not None:
            proc.join(timeout=10)
            code = proc.exitcode
            try:
                proc.close()
            except ValueError:
                pass
        for c in (conn, self._alive):
            if c is not None:
                c.close()
        self._proc = self._conn = self._alive = None
        self._ready = False
        return code

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        if not self._closed:
            self._start()              # eagerly: the fresh child boots while the user reads the error

    def close(self) -> None:
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        with self._state:
            busy = self._inflight is not None
        if busy:
            self.cancel()
        with self._call_lock:
            if self._proc is not None and self._proc.is_alive() and self._conn is not None:
                try:
                    self._conn.send(("shutdown",))
                    self._proc.join(timeout=2)
                except (OSError, BrokenPipeError):
                    pass
            self._kill()
        self._spawner.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ---- requests
    def submit(self, request: str, /, *, budget_s: float | None = None, progress=None,
               **kwargs) -> concurrent.futures.Future:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="scellis-worker")
        return self._executor.submit(self.call, request, budget_s=budget_s, progress=progress, **kwargs)

    def cancel(self) -> None:
        """Kill the in-flight request's child and start a fresh one; the request raises
        WorkerCancelled. Does nothing when no request is running."""
        with self._state:
            if self._inflight is None:
                return
            self._cancelled = True
            proc = self._proc
        if proc is not None:
            try:
                proc.kill()
            except (ValueError, OSError):
                pass

    def call(self, request: str, /, *, budget_s: float | None = None, progress=None, on_note=None, **kwargs):
        """Run one request (a ``requests.Kind``, or its name) with its keyword arguments; its report,
        or the StudioError it raised, with every field intact."""
        request = str(request)
        budget = float(budget_s if budget_s is not None else max(self.budget_s, self.kind_budgets.get(request, 0.0)))
        with self._call_lock:
            self._ensure()
            rid = next(self._ids)
            segments: list = []
            op, op_file = str(kwargs.get("target") or request), None
            settled = False            # the child is idle again (replied) or was replaced
            try:
                try:
                    packed = pack(kwargs, segments)
                except StudioError:
                    settled = True         # nothing was sent: the child is idle, no restart needed
                    raise
                with self._state:
                    self._inflight, self._cancelled = (rid, request), False
                t0 = time.monotonic()
                try:
                    self._conn.send(("call", rid, request, packed, budget))
                except (OSError, BrokenPipeError):
                    settled = True
                    self._restart()
                    raise StudioError(f"the device worker was gone before '{request}' could start; "
                                      f"it was restarted — try again") from None
                deadline = t0 + budget
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        seconds = time.monotonic() - t0
                        settled = True
                        kill_s = self._kill()
                        self.last_kill = {"op": op, "seconds": seconds, "kill_s": kill_s, "reason": "budget"}
                        self._restart()
                        raise WorkerTimeout(op, seconds, budget, request, op_file)
                    try:
                        if not self._conn.poll(min(left, 3600.0)):
                            continue
                        msg = self._conn.recv()
                    except (EOFError, OSError):
                        seconds = time.monotonic() - t0
                        settled = True
                        with self._state:
                            cancelled = self._cancelled
                        code = self._reap()
                        self.last_kill = {"op": op, "seconds": seconds, "kill_s": 0.0,
                                          "reason": "cancel" if cancelled else f"exit {code}"}
                        self._restart()
                        if cancelled:
                            raise WorkerCancelled(op, seconds) from None
                        raise StudioError(f"the device worker died while running {op} ({request}) "
                                          f"(exit code {code}); it was restarted", file=op_file or None,
                                          hint="a crash of the WGSL compiler or the driver on this kernel, or an "
                                               "out-of-memory kill; simplify the kernel (deeply nested "
                                               "expressions crash naga). The next request runs in a fresh "
                                               "worker") from None
                    tag = msg[0]
                    if msg[1] != rid:
                        if tag == "ok":
                            discard(msg[2])
                        continue
                    if tag == "progress":
                        deadline = time.monotonic() + budget        # a sign of life
                        if progress is not None:
                            progress(*msg[2:])             # (done, total) or (done, total, value)
                    elif tag == "note":
                        deadline = time.monotonic() + budget        # a sign of life too
                        if on_note is not None:
                            on_note(msg[2])                # e.g. {"kind": "first_failure", "text": ...}
                    elif tag == "op":
                        op, op_file = msg[2], msg[4]
                    elif tag == "ok":
                        settled = True
                        return unpack(msg[2], unlink=True)
                    elif tag == "expired":       # the child's own watchdog: it exits now
                        settled = True
                        self.last_kill = {"op": op, "seconds": msg[2], "kill_s": 0.0, "reason": "child budget"}
                        self._restart()
                        raise WorkerTimeout(op, msg[2], budget, request, op_file)
                    elif tag == "error":
                        settled = True
                        raise StudioError.from_dict(msg[2])
            finally:
                if not settled:        # e.g. Ctrl-C or a progress callback that raised: the child is
                    self._restart()    # still busy with this request, so it is replaced
                with self._state:
                    self._inflight = None
                for s in segments:
                    try:
                        s.close()
                        s.unlink()
                    except FileNotFoundError:
                        pass
