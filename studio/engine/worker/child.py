"""The device worker's child: it holds the process's contexts (one device and one pool of
confined reference hosts, shared by a context per catalog, i.e. per ``ops_path``), runs one
request at a time and reports progress, the op it is running, and the result or a StudioError.
Its imports of the engine happen here, in the child, never in the parent.

It never outlives its parent, and enforces its own time budget (``Lifeline``, ``_Watchdog``):
the kernel asks Linux to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``), and a watchdog
thread ends it when the parent's end of a pipe closes, when its parent process changes (it was
re-parented: the parent died), or when a request runs past the budget the parent sent with it
without a sign of life — a parent that hangs, or stops reading, cannot keep a runaway kernel going."""
from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass

from ..errors import StudioError, from_os_error
from .transport import pack, unpack

GRACE_S = 1.0             # the child's own deadline trails the parent's: the parent normally stops it
WATCH_S = 0.05            # how often the watchdog looks
EXIT_ORPHANED, EXIT_EXPIRED = 70, 71
_PR_SET_PDEATHSIG = 1


@dataclass
class Lifeline:
    """What ties a child to the parent that started it (sent with the child's arguments)."""
    parent_pid: int                      # os.getpid() of the process that started the child
    alive: object = None                 # the read end of a pipe whose write end only the parent holds
    start_s: float | None = None         # the parent's start timeout: the child's own, during start-up
    death_signal: bool = True            # PR_SET_PDEATHSIG (Linux); False only to test the watchdog alone


def _die_with_parent() -> bool:
    """Ask Linux to SIGKILL this process when the thread that started it ends. The parent
    starts children from a thread that lives as long as its client (client.py)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _kill_children() -> None:
    """SIGKILL this process's own children (the reference hosts) before it exits: they also die
    with it by their parent-death signal, but one still starting may not have set it yet."""
    import psutil
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        try:
            os.kill(child.pid, signal.SIGKILL)
        except OSError:
            pass


class _Sender:
    """The child's one way to send: the main thread (progress, results) and the watchdog (its
    last message) take turns."""

    def __init__(self, conn):
        self.conn, self.lock = conn, threading.Lock()

    def __call__(self, msg, *, timeout: float = -1) -> bool:
        if not self.lock.acquire(timeout=timeout):
            return False
        try:
            self.conn.send(msg)
            return True
        finally:
            self.lock.release()


class _Watchdog:
    """The child's own ends: its parent's death, and a request past its budget."""

    def __init__(self, life: Lifeline, send: _Sender):
        self.life, self.send = life, send
        self._lock = threading.Lock()
        self._armed: tuple | None = None     # (rid, budget_s, started, deadline)

    def arm(self, rid, budget_s: float | None) -> None:
        """A request (or, with rid None, the start-up) began: it may run ``budget_s`` seconds
        between two signs of life (plus GRACE_S). No budget: no deadline."""
        now = time.monotonic()
        ok = budget_s is not None and math.isfinite(budget_s) and budget_s > 0
        with self._lock:
            self._armed = (rid, budget_s, now, now + budget_s + GRACE_S) if ok else None

    def touch(self) -> None:
        """A sign of life (progress): the budget starts again, as in the parent."""
        with self._lock:
            if self._armed is not None:
                rid, budget_s, started, _ = self._armed
                self._armed = (rid, budget_s, started, time.monotonic() + budget_s + GRACE_S)

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def start(self) -> None:
        threading.Thread(target=self._run, name="scellis-worker-watchdog", daemon=True).start()

    def _run(self) -> None:  # pragma: no cover - runs in the child
        life = self.life
        while True:
            if life.alive is not None:
                try:
                    if life.alive.poll(WATCH_S):
                        life.alive.recv()            # the parent never writes: this raises EOFError
                except (EOFError, OSError):
                    self._exit(EXIT_ORPHANED)
            else:
                time.sleep(WATCH_S)
            if os.getppid() != life.parent_pid:      # re-parented: the parent is gone
                self._exit(EXIT_ORPHANED)
            with self._lock:
                armed = self._armed
            if armed is not None and time.monotonic() > armed[3]:
                rid, budget_s, started, _ = armed
                self.send(("expired", rid, time.monotonic() - started, budget_s), timeout=0.5)
                self._exit(EXIT_EXPIRED)

    @staticmethod
    def _exit(code: int) -> None:  # pragma: no cover - runs in the child
        _kill_children()
        os._exit(code)


class _Contexts:
    """A context per ops_path, all sharing the child's one device and host pool."""

    def __init__(self):
        from ..context import Context
        from ..device.device import Device
        from ..trust.pool import HostPool
        self._open, self.hosts, self.device = Context.open, HostPool(), None
        self._by_path: dict[tuple, object] = {}
        self.hosts.prestart()                       # a reference host boots while the device does
        try:
            self.device = Device()
        except Exception:  # noqa: BLE001 - a request that needs the device will report it
            self.device = None
        try:
            if self.device is not None:
                self.device.prepare_isolation()     # compile the workgroup-clearing kernel now
        except StudioError:
            pass                                    # the first kernel's own clear will report it

    def get(self, ops_path) -> object:
        key = tuple(ops_path or ())
        ctx = self._by_path.get(key)
        if ctx is None:
            ctx = self._by_path[key] = self._open(key, device=self.device, hosts=self.hosts)
        return ctx


def child_main(conn, extra: dict | None = None, life: Lifeline | None = None) -> None:  # pragma: no cover
    """The child's life: requests are ``("call", rid, kind, packed, budget_s)`` or ``("shutdown",)``,
    run by the request table (studio/engine/services/requests.py; ``extra``: a client's own entries)."""
    if life is not None and life.death_signal:
        _die_with_parent()
    if life is not None and os.getppid() != life.parent_pid:
        os._exit(EXIT_ORPHANED)                      # the parent died before the signal was asked for
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the parent's to handle
    send = _Sender(conn)
    watchdog = _Watchdog(life or Lifeline(os.getppid()), send)
    if life is not None:
        watchdog.arm(None, life.start_s)
        watchdog.start()
    contexts = _Contexts()
    from ..services.requests import TABLE, Request, arguments, checked, entry_of
    table = {**TABLE, **(extra or {})}
    watchdog.disarm()
    send(("ready", os.getpid()))
    rid = None

    def progress(done, total, value: float | None = None):
        """(done, total), and optionally one number the step produced (a training loss)."""
        watchdog.touch()
        send(("progress", rid, int(done), int(total)) + ((float(value),) if value is not None else ()))

    def announce(pkg):
        send(("op", rid, pkg.id, pkg.hash, pkg.kernel_path))

    def note(event: dict):
        """An event for the front end now (conformance's first failure), before the result."""
        watchdog.touch()
        send(("note", rid, dict(event)))

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "shutdown":
            return
        _, rid, kind, packed = msg[:4]
        watchdog.arm(rid, msg[4] if len(msg) > 4 else None)
        segments: list = []
        try:
            kwargs = unpack(packed, unlink=False)     # the parent owns (and unlinks) its segments
            ctx = contexts.get(kwargs.pop("ops_path", None))
            entry = entry_of(kind, table)                # the request table's runner (requests.serve)
            head, kw = arguments(entry, Request(ctx, progress, announce, note), kwargs)
            result = checked(entry, entry.handler(*head, **kw))
            reply = ("ok", rid, pack(result, segments))
        except StudioError as e:
            reply = ("error", rid, e.to_dict())
        except OSError as e:    # the filesystem said no (a full disk, a read-only folder): the user's to fix
            reply = ("error", rid, from_os_error(e).to_dict())
        except Exception as e:  # noqa: BLE001 (a bug, not user input: still a StudioError for the user)
            traceback.print_exc(file=sys.stderr)
            reply = ("error", rid, StudioError(
                f"internal error in the device worker ({kind}): {type(e).__name__}: {e}",
                hint="this is a bug in Scellis Studio; the traceback is on stderr").to_dict())
        try:
            send(reply)              # still armed: a parent that stops reading cannot hold the child
        except Exception as e:  # noqa: BLE001 (e.g. an unpicklable result: said as an error reply)
            for s in segments:
                s.unlink()
            send(("error", rid, StudioError(
                f"the device worker could not send the result of '{kind}': {type(e).__name__}: {e}").to_dict()))
        finally:
            watchdog.disarm()
            for s in segments:
                s.close()                              # the parent copies, then unlinks
