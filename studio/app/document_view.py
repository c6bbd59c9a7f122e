"""One open document: its model, session, notebook of cells and the controllers behind them."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from .checking import CheckController
from .notebook import Notebook
from .panels.conformance import ConformancePanel
from .panels.gradcheck import GradcheckPanel
from .panels.run import RunPanel
from .proofs import ConformanceController, GradcheckController
from .running import RunController, param_specs
from .session import DocumentSession


class DocumentView(QWidget):
    problemsChanged = Signal(object, list)      # view, problems
    catalogChanged = Signal()                   # a receipt was issued or the package saved

    def __init__(self, doc, workers, background, store=None, *, ctx, authored: bool | None = None, parent=None):
        """``ctx``: the window's Context (studio/engine/context.py), whose trust store judges the code."""
        super().__init__(parent)
        self.doc = doc
        self.session = DocumentSession(doc, background, store, ctx=ctx, authored=authored)
        self.conformance_panel = ConformancePanel(0)
        self.gradcheck_panel = GradcheckPanel(0)
        self.run_panel = RunPanel(0)
        self.notebook = Notebook(doc, [self.conformance_panel, self.gradcheck_panel, self.run_panel], background)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.notebook)
        self.checker = CheckController(self.session, workers, self)
        self.conformance = ConformanceController(self.session, workers, self.conformance_panel, self)
        self.gradcheck = GradcheckController(self.session, workers, self.gradcheck_panel, self)
        self.runner = RunController(self.session, workers, background, self.run_panel, self)
        self.problems: list = []
        self.checker.problemsChanged.connect(self._problems)
        self.checker.stateChanged.connect(self._check_state)
        self.conformance.finished.connect(lambda _r: self.catalogChanged.emit())
        doc.changed.connect(self._signature_params)
        self._signature_params()
        self.checker._emit()
        self.checker.timer.start()          # a first check soon after opening: problems show without an edit

    def _signature_params(self, key: str = "field:signature", _origin=None) -> None:
        if key == "field:signature":
            self.gradcheck_panel.set_params(param_specs(str(self.doc.field("signature") or "")))

    def _problems(self, problems: list) -> None:
        self.problems = problems
        self.notebook.set_problems(problems)
        self.problemsChanged.emit(self, problems)

    def _check_state(self, state: str) -> None:
        kernel = self.notebook.cell("kernel")
        if state == "checking":
            kernel.set_status("checking…", "busy")
        elif state == "ok":
            kernel.set_status("compiles ✔", "ok")

    def save(self, folder=None):
        path = self.session.save(folder)
        self.catalogChanged.emit()
        return path

    def close(self) -> bool:
        for job in (self.conformance.job, self.gradcheck.job, self.runner.job, self.checker.job):
            if job is not None and job.active:
                self.checker.workers.cancel(job)
        self.session.close(keep_autosave=False)
        return super().close()
