"""The device worker's child: it holds the process's contexts (one device and one pool of
confined reference hosts, shared by a context per catalog, i.e. per ``ops_path``), runs one
request at a time and reports progress, the op it is running, and the result or a StudioError.
Its imports of the engine happen here, in the child, never in the parent."""
from __future__ import annotations

import importlib
import os
import signal
import sys
import traceback
from dataclasses import dataclass
from typing import Callable

from ..errors import StudioError
from .transport import pack, unpack


@dataclass
class Request:
    """What a handler is given besides its keyword arguments."""
    ctx: object                          # studio.engine.context.Context
    progress: Callable[[int, int], None]
    announce: Callable[[object], None]   # the package being worked on, so a timeout can name it


def _load(spec: str):
    mod, _, name = spec.partition(":")
    obj = importlib.import_module(mod)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


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

    def get(self, ops_path) -> object:
        key = tuple(ops_path or ())
        ctx = self._by_path.get(key)
        if ctx is None:
            ctx = self._by_path[key] = self._open(key, device=self.device, hosts=self.hosts)
        return ctx


def child_main(conn, handlers: dict[str, str]) -> None:  # pragma: no cover - runs in the child
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the parent's to handle
    contexts = _Contexts()
    conn.send(("ready", os.getpid()))
    rid = None

    def progress(done, total):
        conn.send(("progress", rid, int(done), int(total)))

    def announce(pkg):
        conn.send(("op", rid, pkg.id, pkg.hash, pkg.kernel_path))

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
            kwargs = unpack(packed, unlink=False)     # the parent owns (and unlinks) its segments
            spec = handlers.get(kind)
            if spec is None:
                raise StudioError(f"the device worker has no request '{kind}'", field="request",
                                  hint="known: " + ", ".join(sorted(handlers)))
            ctx = contexts.get(kwargs.pop("ops_path", None))
            result = _load(spec)(Request(ctx, progress, announce), **kwargs)
            reply = ("ok", rid, pack(result, segments))
        except StudioError as e:
            reply = ("error", rid, e.to_dict())
        except Exception as e:  # a bug, not user input: still a StudioError for the user
            traceback.print_exc(file=sys.stderr)
            reply = ("error", rid, StudioError(
                f"internal error in the device worker ({kind}): {type(e).__name__}: {e}",
                hint="this is a bug in Scellis Studio; the traceback is on stderr").to_dict())
        try:
            conn.send(reply)
        except Exception as e:  # e.g. an unpicklable result
            for s in segments:
                s.unlink()
            conn.send(("error", rid, StudioError(
                f"the device worker could not send the result of '{kind}': {type(e).__name__}: {e}").to_dict()))
        finally:
            for s in segments:
                s.close()                              # the parent copies, then unlinks
