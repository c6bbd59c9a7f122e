"""Debounced re-check on edit. A moment after the author stops typing, the document's content
goes to the worker's ``check`` (the checker plus a real compile of the kernel by wgpu's
validator); its findings, with their file, line and column, become the document's problems —
one more at each place a finding relates to (a descriptor/WGSL disagreement is marked on both
lines). When the code is trusted, the worker then imports the reference in its sandbox
(``reference``, studio/engine/services/reference_check.py): an error at import is a problem at its line.

At once, without waiting for the worker: the manifest's own parse error, and the reference
parsed by ``ast.parse`` as the user types (a syntax error at its line and column)."""
from __future__ import annotations

import ast
from pathlib import Path

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal

from ...engine.errors import StudioError
from ...engine.services.actions import CheckedReport
from ...engine.services.requests import Kind
from ..notebook.problems import Problem, all_from_json, from_error, with_related

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
        self.imported: list[Problem] = []      # the reference's import in the sandbox
        self.proof: list[Problem] = []         # a conformance/gradcheck run's error (until the next edit)
        self._parsed: tuple = (None, None)      # (file, text) last parsed, and its problem
        self.reference_job = None
        self.imports_done = 0
        self.passed: list[str] = []
        self.generation = 0
        self.job = None
        self.checks_done = 0
        self._local()

    def _edited(self, *_):
        self.proof = []
        self._local()
        self.timer.start()

    def _local(self) -> None:
        err = self.doc.toml_problem
        self.local = [from_error(err, [], source="parse")] if err is not None else []
        if err is not None and err.file is not None:
            self.local = [Problem(err.message, "op.toml", err.line, err.col, err.field, err.hint, "error", "parse")]
        key = (self.doc.reference_file, self.doc.text(self.doc.reference_file))
        if key != self._parsed[0]:                 # parse only when the reference changed
            self._parsed = (key, python_problem(key[1], key[0]))
        ref = self._parsed[1]
        if ref is not None:
            self.local.append(ref)
        self._emit()

    def problems(self) -> list[Problem]:
        seen, out = set(), []
        parsed = {p.file for p in self.local if p.source == "parse"}
        # a file that does not parse now: what the worker said of its older text is moot
        later = [p for p in self.remote + self.imported + self.proof if not (p.file in parsed and p.file != "op.toml")]
        for p in self.local + later:
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
        job = self.workers.submit("edit", Kind.CHECK, prepare=prepare, supersede=f"check:{self.doc.doc_id}")
        self.job = job
        job.succeeded.connect(lambda rep: self._done(gen, rep, roots + _target(job)))
        job.failed.connect(lambda err: self._failed(gen, err, roots + _target(job)))

    def _gone(self) -> bool:
        """The document was closed while a job ran: its reply lands on nothing."""
        return not shiboken6.isValid(self)

    def _done(self, gen: int, rep: CheckedReport, roots: list[Path]) -> None:
        if self._gone():
            return
        self.checks_done += 1
        if gen != self.generation:
            return                       # a newer edit is being checked
        errs, warns, self.passed = rep.errors, rep.warnings, list(rep.passed)
        self.remote = ([p for e in errs for p in all_from_json(e, roots, "check")] +
                       [p for w in warns for p in all_from_json(w, roots, "check", "warning")])
        self._emit()
        self.stateChanged.emit("ok" if not errs else "problems")
        self.import_reference(gen)

    def set_proof_problems(self, kind: str, err, roots: list[Path], job=None) -> None:
        """A proof that could not run (the reference raised, a timeout) is a problem too, at its
        file and line in the package — not in the snapshot the worker read."""
        e = err if isinstance(err, StudioError) else StudioError(str(err))
        self.proof = [Problem(f"{kind}: {p.message}", p.file, p.line, p.col, p.field, p.hint, p.severity, kind)
                      for p in with_related(e, roots + (_target(job) if job is not None else []), kind)]
        self._emit()

    def import_reference(self, gen: int) -> None:
        """Load the reference in the sandbox (trusted code only); its errors land at their line."""
        if not self.session.runnable or any(p.file == self.doc.reference_file and p.source == "parse"
                                            for p in self.local):
            self.imported = []
            self._emit()
            return
        roots = [p for p in (self.doc.path,) if p]
        job = self.workers.submit("edit", Kind.REFERENCE, prepare=self.session.target(),
                                  supersede=f"reference:{self.doc.doc_id}")
        self.reference_job = job
        job.succeeded.connect(lambda rep: self._imported(gen, rep, roots + _target(job)))
        job.failed.connect(lambda err: self._imported(gen, {"errors": [err.to_dict() if isinstance(
            err, StudioError) else StudioError(str(err)).to_dict()]}, roots + _target(job)))

    def _imported(self, gen: int, rep: dict, roots: list[Path]) -> None:
        if self._gone():
            return
        self.imports_done += 1
        if gen != self.generation:
            return
        errs = rep.get("errors", []) if isinstance(rep, dict) else list(getattr(rep, "errors", []))   # ReferenceReport
        self.imported = [p for e in errs for p in all_from_json(e, roots, "import")]
        self._emit()

    def _failed(self, gen: int, err, roots: list[Path]) -> None:
        if self._gone():
            return
        self.checks_done += 1
        if gen != self.generation:
            return
        e = err if isinstance(err, StudioError) else StudioError(str(err))
        self.remote = with_related(e, roots, "check")
        self.passed = []
        self._emit()
        self.stateChanged.emit("error")


def _target(job) -> list[Path]:
    t = job.prepared.get("target")
    return [Path(t)] if t else []


def python_problem(source: str, file: str) -> Problem | None:
    """The reference's syntax error as the user types (``ast.parse``: the interpreter's own parser,
    sub-millisecond for a reference), at its line and 1-based column; None when it parses."""
    try:
        ast.parse(source, filename=file)
    except SyntaxError as e:
        col = e.offset if e.offset and e.offset > 0 else None
        return Problem(f"Python syntax error: {e.msg}", file, e.lineno, col, None,
                       "fix the Python syntax (the reference is checked as you type)", "error", "parse")
    except ValueError as e:                      # e.g. a NUL byte in the source
        return Problem(f"Python cannot read the reference: {e}", file, None, None, None, None, "error", "parse")
    return None
