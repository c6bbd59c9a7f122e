"""The bridge from the engine's device worker (studio/engine/worker/client.py) to Qt signals.

All device work — check, compile, conformance, gradcheck, run — is a request to a
``WorkerClient``: a child process that owns the wgpu device, killed and restarted on a budget
overrun or a cancel. The GUI thread never waits on it. Each *lane* is one client with one
thread feeding it requests in order, so a long conformance run never queues behind the run
panel, and cancelling one lane leaves the others alone:

- ``edit``  : the debounced re-check/recompile after each edit
- ``run``   : the run panel
- ``proof`` : conformance and gradcheck

A ``DeviceJob`` carries a request's fate back to the GUI thread as signals: ``progress(done,
total)``, then exactly one of ``succeeded(result)``, ``failed(StudioError)``, ``cancelled()``,
and always ``finished()`` last.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
import time

from PySide6.QtCore import QObject, Signal, Slot

from ...engine.errors import StudioError

LANES = {"edit": 20.0, "run": 120.0, "proof": 300.0}     # default time budget per request, seconds
WORKER_NICE = 10     # device work is background work: the GUI thread gets the CPU first


def background_priority(pid: int | None, nice: int = WORKER_NICE) -> int:
    """Lower the CPU priority of a worker process — every thread (lavapipe rasterizes on its own
    threads) and its child processes (the reference's sandbox host). Linux only; elsewhere a no-op.
    Returns how many threads were changed."""
    if not pid:
        return 0
    import os

    import psutil
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    changed = 0
    for proc in procs:
        try:
            tids = [t.id for t in proc.threads()]
        except psutil.Error:
            continue
        for tid in tids:
            try:
                if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                    os.setpriority(os.PRIO_PROCESS, tid, nice)
                    changed += 1
            except OSError:
                pass
    return changed


def _studio_client(*, budget_s: float):
    """A lane's worker client: every kind of the request table (studio/engine/services/requests.py)."""
    from ...engine.worker.client import WorkerClient
    return WorkerClient(budget_s=budget_s)


class DeviceJob(QObject):
    progress = Signal(int, int)
    value = Signal(int, float)       # a number a step produced with its progress (a training loss)
    note = Signal(object)            # an event before the result (conformance's first failure), a dict
    succeeded = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    finished = Signal()
    _done = Signal(str, object)               # internal: (outcome, payload), queued to the GUI thread

    def __init__(self, lane: str, request: str, supersede: str | None = None):
        super().__init__()
        self.lane, self.request, self.supersede = lane, request, supersede
        self.state = "queued"                  # queued | running | succeeded | failed | cancelled
        self.started = self.ended = None
        self.future: cf.Future | None = None
        self.cancel_requested = False
        self.result = self.error = None
        self.prepared: dict = {}
        self._done.connect(self._finish)

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running")

    @property
    def seconds(self) -> float:
        return (self.ended or time.perf_counter()) - (self.started or time.perf_counter())

    @Slot(str, object)
    def _finish(self, outcome: str, payload) -> None:
        if not self.active:
            return
        self.ended = time.perf_counter()
        if self.cancel_requested and outcome != "succeeded":
            outcome = "cancelled"
        self.state = outcome
        if outcome == "succeeded":
            self.result = payload
            self.succeeded.emit(payload)
        elif outcome == "failed":
            self.error = payload
            self.failed.emit(payload)
        else:
            self.cancelled.emit()
        self.finished.emit()


class DeviceWorkers(QObject):
    """The Studio's worker clients, one per lane, created on first use (off the GUI thread)."""
    busyChanged = Signal(bool)

    def __init__(self, client_factory=None, budgets: dict[str, float] | None = None, parent=None):
        super().__init__(parent)
        self._factory = client_factory
        self.budgets = {**LANES, **(budgets or {})}
        self._clients: dict[str, object] = {}
        self._lock = threading.Lock()
        self._threads = {lane: cf.ThreadPoolExecutor(1, thread_name_prefix=f"worker-{lane}") for lane in self.budgets}
        self.jobs: list[DeviceJob] = []
        self.closed = False

    # ------------------------------------------------------------------ clients
    def client(self, lane: str):
        """The lane's client, started on first use. Only the lane's own thread calls this."""
        with self._lock:
            c = self._clients.get(lane)
        if c is None:
            factory = self._factory
            if factory is None:
                factory = _studio_client
            c = factory(budget_s=self.budgets[lane])
            with self._lock:
                self._clients[lane] = c
            from ...engine.services.requests import Kind
            try:
                c.call(Kind.PING)                 # start it now, so it can be put in the background
            except StudioError:
                pass                           # the real request will report what is wrong
        background_priority(getattr(c, "pid", None))
        return c

    # ------------------------------------------------------------------ requests
    def submit(self, lane: str, request: str, *, prepare=None, supersede: str | None = None,
               budget_s: float | None = None, **kwargs) -> DeviceJob:
        """Queue ``request`` on ``lane``. ``prepare()`` (optional) runs first in the lane's thread and
        returns extra keyword arguments (e.g. writes a snapshot and returns its path as target)."""
        job = DeviceJob(lane, request, supersede)
        if self.closed:                        # the window is closing: nothing new starts
            job.cancel_requested = True
            job._done.emit("cancelled", None)
            return job
        if supersede:
            for old in self.jobs:
                if old.supersede == supersede and old.state == "queued" and old.future is not None:
                    if old.future.cancel():
                        old._done.emit("cancelled", None)
        self.jobs.append(job)
        job.finished.connect(lambda: self._forget(job))

        def progress(done, total=None, *rest):
            try:
                job.progress.emit(int(done), int(total if total is not None else 0))
                if rest:
                    job.value.emit(int(done), float(rest[0]))
            except (TypeError, ValueError):
                pass

        def work():
            if job.cancel_requested:
                return "cancelled", None
            job.started = time.perf_counter()
            job.state = "running"
            try:
                extra = prepare() if prepare is not None else {}
                job.prepared = dict(extra or {})
                args = {**kwargs, **(extra or {})}
                client = self.client(lane)
                try:
                    result = client.call(request, budget_s=budget_s or self.budgets[lane], progress=progress,
                                         on_note=job.note.emit, **args)
                finally:
                    background_priority(getattr(client, "pid", None))   # threads started during the call
                return "succeeded", result
            except StudioError as e:
                return "failed", e
            except Exception as e:  # noqa: BLE001 - a broken pipe after a cancel, a worker crash
                return "failed", StudioError(f"{request}: the device worker stopped ({type(e).__name__}: {e})",
                                             hint="it was restarted; run the step again")

        job.future = self._threads[lane].submit(work)
        job.future.add_done_callback(lambda f: None if f.cancelled() else job._done.emit(*f.result()))
        self.busyChanged.emit(True)
        return job

    def cancel(self, job: DeviceJob) -> None:
        """Stop one job: dequeue it, or kill the lane's in-flight work (the worker restarts)."""
        if not job.active:
            return
        job.cancel_requested = True
        if job.future is not None and job.future.cancel():
            job._done.emit("cancelled", None)
            return
        if job.state == "running":
            c = self._clients.get(job.lane)
            if c is not None:
                threading.Thread(target=c.cancel, name=f"cancel-{job.lane}", daemon=True).start()

    def _forget(self, job: DeviceJob) -> None:
        if job in self.jobs:
            self.jobs.remove(job)
        if not any(j.active for j in self.jobs):
            self.busyChanged.emit(False)

    @property
    def busy(self) -> bool:
        return any(j.active for j in self.jobs)

    def close(self) -> None:
        self.closed = True
        for job in list(self.jobs):
            job.cancel_requested = True
        for c in list(self._clients.values()):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing a dead worker is fine
                pass
        for t in self._threads.values():
            t.shutdown(wait=False, cancel_futures=True)
        self._clients.clear()
