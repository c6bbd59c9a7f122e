"""Off-the-GUI-thread helpers for work that needs no device: file writes (autosave, snapshots),
hashing, the catalog scan, receipt verification, the SPDX list. Device work goes to the engine's
worker process instead (worker_bridge.py).

Results come back on the GUI thread through a queued signal: the callback always runs in the
thread that owns this object, never in the pool.
"""
from __future__ import annotations

import concurrent.futures as cf
import logging

from PySide6.QtCore import QObject, Signal, Slot

log = logging.getLogger(__name__)


class Background(QObject):
    _deliver = Signal(object, object, object)     # callback, result, error

    def __init__(self, workers: int = 2, parent=None):
        super().__init__(parent)
        self.pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="studio-bg")
        self.serial = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="studio-save")  # ordered writes
        self._deliver.connect(self._on_deliver)
        self.pending: set[cf.Future] = set()
        self.closed = False

    def run(self, fn, on_done=None, on_error=None, *, ordered: bool = False) -> cf.Future:
        """Run ``fn()`` in a pool thread; then ``on_done(result)`` or ``on_error(exc)`` on the GUI thread.
        ``ordered`` jobs run one at a time in submission order (writes of the same file)."""
        if self.closed:                      # the window is going away: nothing new starts
            fut: cf.Future = cf.Future()
            fut.cancel()
            return fut
        fut = (self.serial if ordered else self.pool).submit(fn)
        self.pending.add(fut)

        def done(f: cf.Future):
            self.pending.discard(f)
            exc = f.exception()
            self._deliver.emit(on_error if exc is not None else on_done, None if exc else f.result(), exc)

        fut.add_done_callback(done)
        return fut

    @Slot(object, object, object)
    def _on_deliver(self, callback, result, error) -> None:
        if error is not None and callback is None:
            log.error("background job failed: %s", error)
            return
        if callback is not None:
            callback(error if error is not None else result)

    def wait(self, timeout: float = 10.0) -> None:
        """Block until queued jobs finish (shutdown and tests)."""
        cf.wait(list(self.pending), timeout=timeout)

    def close(self) -> None:
        self.closed = True
        self.serial.shutdown(wait=True)
        self.pool.shutdown(wait=False, cancel_futures=True)
