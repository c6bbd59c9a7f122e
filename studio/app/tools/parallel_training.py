"""Data-parallel training from the workflow tab (docs/workflows.md, "Data-parallel training"): the
same ``data_parallel.train`` the CLI calls, off the GUI thread (the learner panel's way: the driver
here, the owners on Dask, a context of the run's own), its steps and epochs carried to the GUI thread
by signals. The tab plots each epoch's training loss and held-out accuracy as they come."""
from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from ...engine.errors import StudioError
from ...engine.services import data_parallel


class ParallelRun(QObject):
    """One run: ``start(path, out_dir, prove, allow)``; ``stop()`` ends it after the step under way."""
    step = Signal(object)            # a StepRecord
    epoch = Signal(object)           # an EpochRecord
    note = Signal(object)            # proving an op, the owners started
    done = Signal(object)            # the service's result (record, record_path, result)
    failed = Signal(object)          # a StudioError

    def __init__(self, parent=None):
        super().__init__(parent)
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()
        self.steps: int | None = None            # None: the file's epochs; a count: stop after that many steps

    @property
    def active(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, path, out_dir, *, prove: bool, allow_unverified: bool, owners: int | None = None) -> None:
        self.stopping.clear()

        def tell(signal, value) -> None:
            try:
                signal.emit(value)
            except RuntimeError:                       # the tab was closed meanwhile: no one left to tell
                self.stopping.set()

        def work():
            try:
                r = data_parallel.train(path, owners=owners, steps=self.steps, out_dir=out_dir, prove=prove,
                                        allow_unverified=allow_unverified, on_step=lambda rec: tell(self.step, rec),
                                        on_epoch=lambda ep: tell(self.epoch, ep),
                                        on_note=lambda note: tell(self.note, note), stop=self.stopping)
            except StudioError as e:
                tell(self.failed, e)
                return
            except Exception as e:                     # noqa: BLE001 (a crash on the run's thread: said, not raised)
                tell(self.failed, StudioError(f"training stopped: {type(e).__name__}: {e}"))
                return
            tell(self.done, r)

        self.thread = threading.Thread(target=work, name="data-parallel training", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
