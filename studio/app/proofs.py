"""Controllers for the proof cells: conformance and gradcheck, each one worker request on the
``proof`` lane, with progress, cancel, and results handed to its panel."""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..engine.errors import StudioError


class ConformanceController(QObject):
    finished = Signal(dict)              # the report (with "receipt" when one was issued)

    def __init__(self, session, workers, panel, parent=None):
        super().__init__(parent)
        self.session, self.workers, self.panel = session, workers, panel
        self.job = None
        panel.runRequested.connect(self.run)
        panel.cancelRequested.connect(self.cancel)

    def run(self, seed: int = 0, large: bool = False):
        if self.job is not None and self.job.active:
            return self.job
        if not self.session.runnable:
            self.panel.show_error(StudioError("this package's code is not trusted here: conformance would run its "
                                              "Python reference", field="trust",
                                              hint="read reference.py, then use Trust in the toolbar"))
            return None
        self.panel.started()
        job = self.workers.submit("proof", "conform", prepare=self.session.target(), seed=int(seed), large=bool(large))
        self.job = job
        job.progress.connect(self.panel.on_progress)
        job.succeeded.connect(lambda rep: self._done(job, rep))
        job.failed.connect(self.panel.show_error)
        job.cancelled.connect(lambda: self.panel.stopped("cancelled", "warn"))
        return job

    def cancel(self) -> None:
        if self.job is not None:
            self.workers.cancel(self.job)

    def _done(self, job, rep: dict) -> None:
        receipt, path = _receipt_of(rep)
        if receipt and rep.get("verdict") == "pass":
            try:
                path = self.session.keep_receipt(receipt, job.prepared.get("target", ""))
            except (OSError, StudioError) as e:
                self.panel.show_error(StudioError(f"the receipt could not be written: {e}"))
                return
        self.panel.show_report(rep, receipt if rep.get("verdict") == "pass" else None, path)
        self.finished.emit(rep)


def _receipt_of(rep: dict) -> tuple[dict | None, str | None]:
    """The worker writes the receipt beside the package it proved and returns its path."""
    r = rep.get("receipt") if isinstance(rep, dict) else None
    if isinstance(r, dict):
        return r, None
    if isinstance(r, str) and r:
        try:
            return json.loads(Path(r).read_text("utf-8")), r
        except (OSError, ValueError):
            return None, r
    return None, None


class GradcheckController(QObject):
    finished = Signal(dict)

    def __init__(self, session, workers, panel, parent=None):
        super().__init__(parent)
        self.session, self.workers, self.panel = session, workers, panel
        self.job = None
        panel.runRequested.connect(self.run)
        panel.cancelRequested.connect(self.cancel)

    def run(self, params: dict | None = None):
        if self.job is not None and self.job.active:
            return self.job
        if not self.session.runnable:
            self.panel.show_error(StudioError("this package's code is not trusted here: gradcheck runs its Python "
                                              "reference", field="trust", hint="use Trust in the toolbar"))
            return None
        self.panel.started()
        kwargs = {"params": dict(params)} if params else {}
        job = self.workers.submit("proof", "gradcheck", prepare=self.session.target(), **kwargs)
        self.job = job
        job.progress.connect(self.panel.on_progress)
        job.succeeded.connect(lambda rep: self._done(job, rep))
        job.failed.connect(self.panel.show_error)
        job.cancelled.connect(lambda: self.panel.stopped("cancelled", "warn"))
        return job

    def cancel(self) -> None:
        if self.job is not None:
            self.workers.cancel(self.job)

    def _done(self, job, rep: dict) -> None:
        self.session.carry_receipts()
        self.panel.show_report(rep)
        self.finished.emit(rep)
