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
from dataclasses import dataclass

from ..errors import StudioError
from .child import Lifeline, child_main
from .transport import discard, pack, unpack


@dataclass
class _Call:
    """One request in flight: its id, kind and budget, the op the child says it works on, the
    deadline (renewed by every sign of life) and whether the child is idle again or was replaced
    (``settled``: otherwise the call's end replaces it)."""
    rid: int
    request: str
    budget: float
    op: str
    op_file: str | None = None
    t0: float = 0.0
    deadline: float = 0.0
    settled: bool = False

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.deadline = self.t0 + self.budget

    def renew(self) -> None:
        self.deadline = time.monotonic() + self.budget

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
            call = _Call(next(self._ids), request, budget, str(kwargs.get("target") or request))
            segments: list = []
            try:
                try:
                    packed = pack(kwargs, segments)
                except StudioError:
                    call.settled = True        # nothing was sent: the child is idle, no restart needed
                    raise
                with self._state:
                    self._inflight, self._cancelled = (call.rid, call.request), False
                call.start()
                try:                           # the request goes out here: the child's side begins
                    self._conn.send(("call", call.rid, call.request, packed, call.budget))
                except (OSError, BrokenPipeError):
                    call.settled = True
                    self._restart()
                    raise StudioError(f"the device worker was gone before '{call.request}' could start; "
                                      f"it was restarted — try again") from None
                return self._await(call, progress, on_note)
            finally:
                if not call.settled:   # e.g. Ctrl-C or a progress callback that raised: the child is
                    self._restart()    # still busy with this request, so it is replaced
                with self._state:
                    self._inflight = None
                for seg in segments:
                    try:
                        seg.close()
                        seg.unlink()
                    except FileNotFoundError:
                        pass

    def _await(self, call: _Call, progress, on_note):
        """The child's messages for this call until its report: progress and notes (each a sign of
        life that renews the budget), the op it works on, then ok, error or its own watchdog."""
        while True:
            msg = self._next_message(call)
            if msg is None:
                continue
            tag = msg[0]
            if msg[1] != call.rid:
                if tag == "ok":
                    discard(msg[2])
                continue
            if tag == "progress":
                call.renew()
                if progress is not None:
                    progress(*msg[2:])             # (done, total) or (done, total, value)
            elif tag == "note":
                call.renew()
                if on_note is not None:
                    on_note(msg[2])                # e.g. {"kind": "first_failure", "text": ...}
            elif tag == "op":
                call.op, call.op_file = msg[2], msg[4]
            elif tag == "ok":
                call.settled = True
                return unpack(msg[2], unlink=True)
            elif tag == "expired":                 # the child's own watchdog: it exits now
                call.settled = True
                self.last_kill = {"op": call.op, "seconds": msg[2], "kill_s": 0.0, "reason": "child budget"}
                self._restart()
                raise WorkerTimeout(call.op, msg[2], call.budget, call.request, call.op_file)
            elif tag == "error":
                call.settled = True
                raise StudioError.from_dict(msg[2])

    def _next_message(self, call: _Call):
        """The child's next message, None after a quiet poll; past the budget the child is killed and
        replaced (WorkerTimeout), and a child that went away is reaped and replaced."""
        left = call.deadline - time.monotonic()
        if left <= 0:
            seconds = time.monotonic() - call.t0
            call.settled = True
            kill_s = self._kill()
            self.last_kill = {"op": call.op, "seconds": seconds, "kill_s": kill_s, "reason": "budget"}
            self._restart()
            raise WorkerTimeout(call.op, seconds, call.budget, call.request, call.op_file)
        try:
            if not self._conn.poll(min(left, 3600.0)):
                return None
            return self._conn.recv()
        except (EOFError, OSError):
            raise self._gone(call) from None

    def _gone(self, call: _Call) -> StudioError:
        """The child went away mid-call: cancelled by the user, or died (a driver or compiler crash,
        an out-of-memory kill). It is reaped and replaced; the error says which."""
        seconds = time.monotonic() - call.t0
        call.settled = True
        with self._state:
            cancelled = self._cancelled
        code = self._reap()
        self.last_kill = {"op": call.op, "seconds": seconds, "kill_s": 0.0,
                          "reason": "cancel" if cancelled else f"exit {code}"}
        self._restart()
        if cancelled:
            return WorkerCancelled(call.op, seconds)
        return StudioError(f"the device worker died while running {call.op} ({call.request}) "
                           f"(exit code {code}); it was restarted", file=call.op_file or None,
                           hint="a crash of the WGSL compiler or the driver on this kernel, or an "
                                "out-of-memory kill; simplify the kernel (deeply nested "
                                "expressions crash naga). The next request runs in a fresh worker")
