"""Debounced re-check on edit. A moment after the author stops typing, the document's content
goes to the worker's ``check`` (the checker plus a real compile of the kernel by wgpu's
validator); its findings, with their file, line and column, become the document's problems.
The manifest's own parse error shows at once, without waiting for the worker."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from ..engine.errors import StudioError
from .problems import Problem, from_error, from_json

DEBOUNCE_MS = 450


class CheckController(QObject):
    problemsChanged = Signal(list)      # list[Problem]
    stateChanged = Signal(str)          # checking | ok | problems | error

    def __init__(self, session, workers, parent=None):
        super().__init__(parent)
        self.session = session
        self.doc = session.doc
        self.workers = workers
        self.timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self.timer.timeout.connect(self.check_now)
        self.doc.changed.connect(self._edited)
        self.local: list[Problem] = []
        self.remote: list[Problem] = []
        self.passed: list[str] = []
        self.generation = 0
        self.job = None
        self.checks_done = 0
        self._local()

    def _edited(self, *_):
        self._local()
        self.timer.start()

    def _local(self) -> None:
        err = self.doc.toml_problem
        self.local = [from_error(err, [], source="parse")] if err is not None else []
        if err is not None and err.file is not None:
            self.local = [Problem(err.message, "op.toml", err.line, err.col, err.field, err.hint, "error", "parse")]
        self._emit()

    def problems(self) -> list[Problem]:
        seen, out = set(), []
        for p in self.local + self.remote:
            if p.key() not in seen:
                seen.add(p.key())
                out.append(p)
        return out

    def _emit(self) -> None:
        self.problemsChanged.emit(self.problems())

    def check_now(self) -> None:
        if not self.session.runnable:
            # the checker compiles, it does not run the reference; still, keep untrusted code entirely idle
            self.remote = [Problem("this package's code is not trusted here, so it is not checked or run",
                                   field="trust", hint="read the code; then use Trust in the toolbar",
                                   severity="warning", source="worker")]
            self._emit()
            self.stateChanged.emit("problems")
            return
        self.generation += 1
        gen = self.generation
        prepare = self.session.target()
        roots = [p for p in (self.doc.path,) if p]
        self.stateChanged.emit("checking")
        job = self.workers.submit("edit", "check", prepare=prepare, supersede=f"check:{self.doc.doc_id}")
        self.job = job
        job.succeeded.connect(lambda rep: self._done(gen, rep, roots + _target(job)))
        job.failed.connect(lambda err: self._failed(gen, err, roots + _target(job)))

    def _done(self, gen: int, rep: dict, roots: list[Path]) -> None:
        self.checks_done += 1
        if gen != self.generation:
            return                       # a newer edit is being checked
        errs = rep.get("errors", []) if isinstance(rep, dict) else []
        warns = rep.get("warnings", []) if isinstance(rep, dict) else []
        self.passed = list(rep.get("passed", [])) if isinstance(rep, dict) else []
        self.remote = ([from_json(e, roots, "check") for e in errs] +
                       [from_json(w, roots, "check", "warning") for w in warns])
        self._emit()
        self.stateChanged.emit("ok" if not errs else "problems")

    def _failed(self, gen: int, err, roots: list[Path]) -> None:
        self.checks_done += 1
        if gen != self.generation:
            return
        e = err if isinstance(err, StudioError) else StudioError(str(err))
        self.remote = [from_error(e, roots, "check")]
        self.passed = []
        self._emit()
        self.stateChanged.emit("error")


def _target(job) -> list[Path]:
    t = job.prepared.get("target")
    return [Path(t)] if t else []
