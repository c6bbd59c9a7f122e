"""One open document: its model, session, notebook of cells and the controllers behind them —
and its one undo stack (``undo_stack``, a QUndoStack over every form, table and editor), and the
freshness of the proofs it shows (``freshness``)."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from ..bridge.checking import CheckController
from .freshness import PanelMark, ProofFreshness
from .notebook import Notebook
from ..panels.conformance import ConformancePanel
from ..panels.gradcheck import GradcheckPanel
from ..panels.run import RunPanel
from ..bridge.proofs import ConformanceController, GradcheckController
from ..bridge.running import RunController, param_specs
from ..bridge.session import DocumentSession
from .undo import DocumentUndo, UndoKeys


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
        self.conformance.finished.connect(self.runner.proof_known)     # the Run cell's line follows the receipt
        # one undo history for the whole document; Ctrl+Z / Ctrl+Shift+Z in any control use it
        self.undo = DocumentUndo(doc, self)
        self.undo_stack = self.undo.stack
        self.undo_keys = UndoKeys(self.undo_stack, self)
        self.undo_keys.install(self)
        from ..cells.tables import RowTable
        for table in self.findChildren(RowTable):
            table.widgetMade.connect(self.undo_keys.watch)
        # results shown as stale the moment the content changes; a proof's error is a problem too
        self.freshness = ProofFreshness(doc, self, background=background, vouch=self._vouch)
        self._marks = {"conformance": PanelMark([self.conformance_panel.chip,
                                                 getattr(self.conformance_panel, "receipt_chip", None)]),
                       "gradcheck": PanelMark([self.gradcheck_panel.chip])}
        self._pending: dict[str, str] = {}
        self.freshness.staleChanged.connect(lambda kind, stale: self._marks[kind].set_stale(stale))
        for kind, ctl in (("conformance", self.conformance), ("gradcheck", self.gradcheck)):
            # (the controller's start, not the panel's button: F5/F6 and Ctrl+Enter count too)
            ctl.started.connect(lambda _job, k=kind, c=ctl: self._proof_started(k, c))
            ctl.finished.connect(lambda _r, k=kind: self._proof_done(k))
        for key, ctl in (("conformance", self.conformance), ("gradcheck", self.gradcheck), ("run", self.runner)):
            ctl.started.connect(lambda job, k=key: self._running(k, job))
        doc.changed.connect(self._signature_params)
        self._signature_params()
        self.checker._emit()
        self.checker.timer.start()          # a first check soon after opening: problems show without an edit

    def _gradcheck_stage(self) -> None:
        """The Conformance cell's gradcheck stage: the Gradcheck cell's verdict when it is about this
        content, "running" while it runs, else how to get one."""
        panel, job = self.gradcheck_panel, self.gradcheck.job
        if not self.conformance_panel.stages:
            return                                       # no conformance run shown yet
        if job is not None and job.active:
            stage = ("running", "busy")
        elif self.freshness.proven_hash("gradcheck") == self.doc.content_hash() and panel.chip.text():
            stage = (panel.chip.text(), panel.chip.kind)
        else:
            stage = ("not run on this content (F6)", "idle")
        self.conformance_panel.set_stages({"gradcheck": stage})

    def _proof_started(self, kind: str, ctl) -> None:
        job = ctl.job
        if job is None or not job.active:
            return
        self._gradcheck_stage()
        self._marks[kind].saved = None                   # a new result is coming
        self._pending[kind] = self.doc.content_hash()     # the content the job was given (taken now)
        roots = [p for p in (self.doc.path,) if p]
        job.failed.connect(lambda err, j=job: self.checker.set_proof_problems(kind, err, roots, j))

    def _vouch(self, root):
        """The receipts on disk for saved content (publishing earns them for its new op.toml), judged
        for the GPU profile the shown conformance result ran on."""
        from .freshness import vouched
        rep = self.conformance_panel.report or {}
        prof = rep.get("gpu_profile")
        seal, profile = self.session.ctx.seal, prof.get("id") if isinstance(prof, dict) else prof
        return lambda: vouched(root, seal, profile)

    def _running(self, key: str, job) -> None:
        """Where the user looks: the running cell is brought into view (its header at the top,
        unless it is in view already) and framed in the busy colour until its job ends."""
        self.notebook.reveal_cell(key)
        cell = self.notebook.cell(key)
        cell.set_running(True)
        if job is not None:
            job.finished.connect(lambda c=cell: c.set_running(False))

    def _proof_done(self, kind: str) -> None:
        h = self._pending.pop(kind, None)
        if h is None:
            return
        panel = self.conformance_panel if kind == "conformance" else self.gradcheck_panel
        self.freshness.proven(kind, h, passed=(getattr(panel, "report", None) or {}).get("verdict") == "pass")
        self._marks[kind].remember()
        self._marks[kind].set_stale(self.freshness.stale(kind))
        self._gradcheck_stage()

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
