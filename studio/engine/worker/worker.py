"""The device worker: a child process owns the wgpu adapter and device, the way a notebook
kernel owns its interpreter (docs/reliability.md, DESIGN.md "The device worker, sketched").

The parent (the CLI, the Studio) sends requests and gets results or StudioErrors back, with
every field (file, line, col, field, hint) intact. A request that runs past its time budget
is stopped: the parent SIGKILLs the child, raises WorkerTimeout naming the op and the seconds,
and starts a fresh child at once, so the next call works. Arrays of SHM_MIN_BYTES or more
travel through shared memory (multiprocessing.shared_memory), smaller values are pickled;
compiled pipelines stay cached in the child (Device.pipeline, by kernel hash).

Request kinds are handlers registered by name: ``register("gradcheck", fn)`` with
``fn(*, progress, **kwargs)`` defined at module level (the child imports it by name).
"""
from __future__ import annotations

import concurrent.futures
import importlib
import itertools
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import StudioError

SHM_MIN_BYTES = 1 << 16          # arrays this large or larger cross through shared memory
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


# ------------------------------------------------------------------ request handlers
Handler = Callable[..., object]
HANDLERS: dict[str, Handler | str] = {}
KIND_BUDGETS: dict[str, float] = {}


def register(kind: str, fn: Handler | str, *, budget_s: float | None = None) -> None:
    """Add a request kind. ``fn`` is a module-level function (or ``"module:function"``) called
    in the child as ``fn(progress=..., **kwargs)``; ``progress(done, total)`` reaches the
    caller and also counts as a sign of life for the budget. ``budget_s`` is the kind's
    default budget when a call gives none (else the client's)."""
    HANDLERS[kind] = fn
    if budget_s is not None:
        KIND_BUDGETS[kind] = budget_s


def _spec(fn: Handler | str) -> str:
    return fn if isinstance(fn, str) else f"{fn.__module__}:{fn.__qualname__}"


def _load_handler(spec: str) -> Handler:
    mod, _, name = spec.partition(":")
    obj = importlib.import_module(mod)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


_catalogs: dict[tuple, object] = {}
_announce: Callable[[str, str, str], None] | None = None


def resolve_package(target: str, ops_path: list[str] | tuple[str, ...] | None = None):
    """In the child: an op id or a package path → a freshly loaded OpPackage (so edits on disk
    are seen). Tells the parent which op is running, so a timeout can name it."""
    from pathlib import Path

    from ..contract.catalog import Catalog
    from ..contract.package import MANIFEST, load_package
    p = Path(target)
    if (p / MANIFEST).is_file() or p.name == MANIFEST:
        pkg = load_package(p)
    else:
        key = tuple(ops_path or ())
        cat = _catalogs.get(key)
        if cat is None:
            cat = _catalogs[key] = Catalog.default([Path(x) for x in key])
        pkg = load_package(cat.resolve(target).root)
    if _announce is not None:
        _announce(pkg.id, pkg.hash, pkg.kernel_path)
    return pkg


def _h_run(*, progress, target: str, inputs: dict | None = None, params: dict | None = None,
           budget_bytes: int | None = None, ops_path=None, require_receipt: bool = False):
    from ..device.execution import run_op
    pkg = resolve_package(target, ops_path)
    if require_receipt:   # a result is shown only from an op proven on this GPU profile
        from ..device.device import get_device
        from ..services.proving import require_proof
        require_proof(pkg, get_device(), progress=progress)
    return run_op(pkg, inputs or {}, params or {}, budget_bytes=budget_bytes)


def _h_conform(*, progress, target: str, seed: int = 0, large: bool = False, case: int | None = None,
               receipt: bool = True, ops_path=None):
    from ..proof.conformance import conform, report_lines
    from ..proof.receipts import make_receipt, write_receipt
    pkg = resolve_package(target, ops_path)
    rep = conform(pkg, seed=seed, large=large, only_case=case, progress=progress)
    out = rep.to_json()
    if rep.ok and case is None and receipt:   # a receipt is what a pass earns
        out["receipt"] = str(write_receipt(pkg, make_receipt(pkg, rep)))
    out["lines"] = report_lines(rep)
    return out


def _h_check(*, progress, target: str, ops_path=None):
    from ..proof.checker import check_package
    return check_package(resolve_package(target, ops_path)).to_json()


def _h_gradcheck(*, progress, target: str, params: dict | None = None, h: float | None = None, seed: int = 0,
                 tolerance: float | None = None, receipt: bool = True, ops_path=None):
    from ..proof.gradcheck import DEFAULT_H, gradcheck, write_receipt
    pkg = resolve_package(target, ops_path)
    rep = gradcheck(pkg, params, h=h or DEFAULT_H, seed=seed, tolerance=tolerance)
    out = rep.to_json()
    if receipt:
        out["receipt"] = str(write_receipt(pkg, rep))
    return out


def _h_profile(*, progress):
    from ..device.device import get_device
    return get_device().profile.to_json()


def _h_ping(*, progress, sleep_s: float = 0.0):
    from ..device import device
    if sleep_s:
        time.sleep(sleep_s)
    dev = device._DEVICE
    return {"pid": os.getpid(), "pipelines": len(dev._pipelines) if dev is not None else 0}


register("run", _h_run)
register("conform", _h_conform, budget_s=60.0)
register("check", _h_check, budget_s=30.0)
register("gradcheck", _h_gradcheck, budget_s=60.0)
register("profile", _h_profile)
register("ping", _h_ping)


# ------------------------------------------------------------------ shared-memory transport
@dataclass(frozen=True)
class _Shared:
    name: str
    dtype: str
    shape: tuple


def _pack(obj, segments: list):
    """Replace large arrays (anywhere in dicts, lists, tuples) by shared-memory segments."""
    from multiprocessing import shared_memory
    if isinstance(obj, np.ndarray) and obj.nbytes >= SHM_MIN_BYTES and obj.dtype.kind in "biufc":
        seg = shared_memory.SharedMemory(create=True, size=obj.nbytes)
        segments.append(seg)
        np.ndarray(obj.shape, obj.dtype, buffer=seg.buf)[...] = obj
        return _Shared(seg.name, obj.dtype.str, tuple(obj.shape))
    if isinstance(obj, dict):
        return {k: _pack(v, segments) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v, segments) for v in obj)
    return obj


def _unpack(obj, *, unlink: bool):
    """Copy shared-memory arrays out; ``unlink`` when this side is the last reader."""
    from multiprocessing import shared_memory
    if isinstance(obj, _Shared):
        seg = shared_memory.SharedMemory(name=obj.name)
        try:
            return np.ndarray(obj.shape, np.dtype(obj.dtype), buffer=seg.buf).copy()
        finally:
            seg.close()
            if unlink:
                seg.unlink()
    if isinstance(obj, dict):
        return {k: _unpack(v, unlink=unlink) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(v, unlink=unlink) for v in obj)
    return obj


def _discard(obj) -> None:
    """Unlink the segments of a reply nobody will read (a stale or failed request)."""
    from multiprocessing import shared_memory
    if isinstance(obj, _Shared):
        try:
            seg = shared_memory.SharedMemory(name=obj.name)
            seg.close()
            seg.unlink()
        except FileNotFoundError:
            pass
    elif isinstance(obj, dict):
        for v in obj.values():
            _discard(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _discard(v)


def _error_dict(e: StudioError) -> dict:
    return {"message": e.message, "file": e.file, "line": e.line, "col": e.col, "field": e.field, "hint": e.hint,
            "related": [_error_dict(r) for r in e.related]}


def _error_from_dict(d: dict) -> StudioError:
    return StudioError(d["message"], file=d.get("file"), line=d.get("line"), col=d.get("col"), field=d.get("field"),
                       hint=d.get("hint"), related=[_error_from_dict(r) for r in d.get("related", [])])


# ------------------------------------------------------------------ the child
def _child_main(conn, handlers: dict[str, str]) -> None:  # pragma: no cover - runs in the child
    global _announce
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the parent's to handle
    HANDLERS.update(handlers)
    try:
        from ..trust import sandbox
        sandbox.prestart()                             # a reference host boots while the device does
        from ..device.device import get_device
        get_device()
    except Exception:
        pass                                           # a request that needs the device will report it
    conn.send(("ready", os.getpid()))
    rid = None
    _announce = lambda op, h, file: conn.send(("op", rid, op, h, file))  # noqa: E731

    def progress(done, total):
        conn.send(("progress", rid, int(done), int(total)))

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "shutdown":
            return
        _, rid, kind, packed = msg
        segments: list = []
        try:
            kwargs = _unpack(packed, unlink=False)     # the parent owns (and unlinks) its segments
            spec = HANDLERS.get(kind)
            if spec is None:
                raise StudioError(f"the device worker has no request '{kind}'", field="request",
                                  hint="known: " + ", ".join(sorted(HANDLERS)))
            fn = _load_handler(spec) if isinstance(spec, str) else spec
            result = fn(progress=progress, **kwargs)
            reply = ("ok", rid, _pack(result, segments))
        except StudioError as e:
            reply = ("error", rid, _error_dict(e))
        except Exception as e:  # a bug, not user input: still a StudioError for the user
            traceback.print_exc(file=sys.stderr)
            reply = ("error", rid, _error_dict(StudioError(
                f"internal error in the device worker ({kind}): {type(e).__name__}: {e}",
                hint="this is a bug in Scellis Studio; the traceback is on stderr")))
        try:
            conn.send(reply)
        except Exception as e:  # e.g. an unpicklable result
            for s in segments:
                s.unlink()
            conn.send(("error", rid, _error_dict(StudioError(
                f"the device worker could not send the result of '{kind}': {type(e).__name__}: {e}"))))
        finally:
            for s in segments:
                s.close()                              # the parent copies, then unlinks


# ------------------------------------------------------------------ the parent
class WorkerClient:
    """The parent side. One request runs at a time; ``call`` blocks, ``submit`` returns a
    Future (callbacks and progress run on the client's own thread, not the GUI's)."""

    def __init__(self, *, budget_s: float = DEFAULT_BUDGET_S, start_timeout_s: float = START_TIMEOUT_S):
        self.budget_s = float(budget_s)
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
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
        specs = {k: _spec(v) for k, v in HANDLERS.items()}
        proc = self._ctx.Process(target=_child_main, args=(child, specs), name="scellis-device-worker", daemon=True)
        proc.start()
        child.close()                  # so the child's death shows here as EOF
        self._proc, self._conn, self._ready = proc, parent, False

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
        if conn is not None:
            conn.close()
        self._proc = self._conn = None
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

    def call(self, request: str, /, *, budget_s: float | None = None, progress=None, **kwargs):
        budget = float(budget_s if budget_s is not None else max(self.budget_s, KIND_BUDGETS.get(request, 0.0)))
        with self._call_lock:
            self._ensure()
            rid = next(self._ids)
            segments: list = []
            op, op_file = str(kwargs.get("target") or request), None
            settled = False            # the child is idle again (replied) or was replaced
            try:
                packed = _pack(kwargs, segments)
                with self._state:
                    self._inflight, self._cancelled = (rid, request), False
                t0 = time.monotonic()
                try:
                    self._conn.send(("call", rid, request, packed))
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
                        if not self._conn.poll(left):
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
                                          f"(exit code {code}); it was restarted",
                                          hint="a driver crash or an out-of-memory kill; the next request "
                                               "runs in a fresh worker") from None
                    tag = msg[0]
                    if msg[1] != rid:
                        if tag == "ok":
                            _discard(msg[2])
                        continue
                    if tag == "progress":
                        deadline = time.monotonic() + budget        # a sign of life
                        if progress is not None:
                            progress(msg[2], msg[3])
                    elif tag == "op":
                        op, op_file = msg[2], msg[4]
                    elif tag == "ok":
                        settled = True
                        return _unpack(msg[2], unlink=True)
                    elif tag == "error":
                        settled = True
                        raise _error_from_dict(msg[2])
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
