"""Controllers for the proof cells: conformance and gradcheck, each one worker request on the
``proof`` lane, with progress, cancel, and results handed to its panel. The worker writes the
receipts (the engine's rule: studio/engine/services/actions.py) and sends them with the report; a
controller shows them."""
from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from ...engine.errors import StudioError
from ...engine.services.requests import Kind


class ProofController(QObject):
    """One proof request on the ``proof`` lane: the trust guard, the job's signals, cancel."""
    finished = Signal(object)            # the report (actions.ConformReport, actions.GradcheckResult)
    started = Signal(object)             # the job, however it was asked for (button, Ctrl+Enter, F5/F6)
    request: Kind                        # the worker request this controller sends (each subclass's)
    label = ""                           # what the user calls it

    def __init__(self, session, workers, panel, parent=None):
        super().__init__(parent)
        self.session, self.workers, self.panel = session, workers, panel
        self.job = None
        panel.runRequested.connect(self.run)
        panel.cancelRequested.connect(self.cancel)

    def submit(self, **kwargs):
        """Start the request on the document's current content (at most one at a time)."""
        if self.job is not None and self.job.active:
            return self.job
        if not self.session.runnable:
            self.panel.show_error(StudioError(f"this package's code is not trusted here: {self.label} runs its "
                                              "Python reference", field="trust",
                                              hint="read reference.py, then use Trust in the toolbar"))
            return None
        self.panel.started()
        job = self.workers.submit("proof", self.request, prepare=self.session.target(), **kwargs)
        self.job = job
        job.progress.connect(self.panel.on_progress)
        job.note.connect(self.panel.on_note)
        job.succeeded.connect(lambda rep: self._done(job, rep))
        job.failed.connect(self.panel.show_error)
        job.cancelled.connect(lambda: self.panel.stopped("cancelled", "warn"))
        self.started.emit(job)
        return job

    def cancel(self) -> None:
        if self.job is not None:
            self.workers.cancel(self.job)

    def _done(self, job, rep: dict) -> None:
        raise NotImplementedError


class ConformanceController(ProofController):
    request, label = Kind.CONFORM, "conformance"

    def run(self, seed: int = 0, large: bool = False):
        return self.submit(seed=int(seed), large=bool(large))

    def _done(self, job, rep) -> None:
        """The worker wrote the receipt of a passing run into the user folder, keyed by the proven
        content's hash (the snapshot and the saved document share it, so nothing is carried), and
        sent it with the report (``receipt_doc``, checked as it was read there). The panel shows the
        report in its JSON form (``ConformReport.to_json``, as `scellis conform --json` prints it)."""
        issued = rep.receipt if rep.ok else None
        self.panel.show_report(rep.to_json(), rep.receipt_doc if issued else None, issued,
                               mutation_lines=rep.mutation_lines)
        self.finished.emit(rep)


class GradcheckController(ProofController):
    request, label = Kind.GRADCHECK, "gradcheck"

    def run(self, params: dict | None = None):
        return self.submit(**({"params": dict(params)} if params else {}))

    def _done(self, job, rep) -> None:
        """The panel shows the report in its JSON form (``GradcheckResult.to_json``, as `scellis
        gradcheck --json` prints it)."""
        self.panel.show_report(rep.to_json())
        self.finished.emit(rep)
