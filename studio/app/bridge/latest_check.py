"""A check of what the user is typing, run off the GUI thread: the dialogs' validators (the Publish
dialog's license and public bar, the New op dialog's fields) go through ``LatestCheck``.

A change restarts a short timer (the debounce: a burst of keys is checked once); when it fires,
``check(snapshot)`` runs in a thread of its own and ``apply(result)`` follows on the GUI thread —
for the newest snapshot only: a result for text the user has typed past is dropped. So a check
that takes a second (the public bar hashes and verifies receipts) never freezes the typing."""
from __future__ import annotations

import concurrent.futures as cf
import logging

from PySide6.QtCore import QObject, QTimer, Signal, Slot

log = logging.getLogger(__name__)

DELAY_MS = 150


class LatestCheck(QObject):
    """``changed(snapshot)`` after each edit; ``apply(result)`` (GUI thread) with ``check(snapshot)``'s
    result for the latest snapshot; ``fail(error)`` when the check raised (default: logged)."""
    _ready = Signal(int, object, object)        # generation, result, error

    def __init__(self, check, apply, *, fail=None, delay_ms: int = DELAY_MS, parent=None):
        super().__init__(parent)
        self.check, self.apply, self.fail = check, apply, fail
        self.generation = 0                     # of the latest snapshot
        self.applied = -1                       # the generation whose result is on screen
        self.snapshot = None
        self.pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="studio-check")
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(delay_ms)
        self.timer.timeout.connect(self._start)
        self._ready.connect(self._deliver)
        self.closed = False

    @property
    def pending(self) -> bool:
        """True until the latest snapshot's result is applied."""
        return self.applied != self.generation

    def changed(self, snapshot) -> None:
        self.generation += 1
        self.snapshot = snapshot
        self.timer.start()

    def now(self, snapshot) -> None:
        """Check at once (no debounce): a dialog's first verdict, a choice from a list."""
        self.generation += 1
        self.snapshot = snapshot
        self.timer.stop()
        self._start()

    def _start(self) -> None:
        if self.closed:
            return
        gen, snap = self.generation, self.snapshot
        fut = self.pool.submit(self.check, snap)

        def done(f: cf.Future) -> None:
            if f.cancelled():
                return
            exc = f.exception()
            try:
                self._ready.emit(gen, None if exc else f.result(), exc)
            except RuntimeError:                # the dialog (and this object) went first
                pass
        fut.add_done_callback(done)

    @Slot(int, object, object)
    def _deliver(self, gen: int, result, error) -> None:
        if self.closed or gen != self.generation:           # typed past: a newer check is coming
            return
        self.applied = gen
        if error is not None:
            if self.fail is not None:
                self.fail(error)
            else:
                log.error("check failed: %s", error)
            return
        self.apply(result)

    def close(self) -> None:
        self.closed = True
        self.timer.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
