"""Live checks for every cell, through the real widgets and the real device worker:
the reference parsed as the user types (line:col in the cell and the Problems panel) and, when
trusted, imported in the sandbox (import errors at their line); a contract/kernel disagreement
marked on both the descriptor line and the WGSL line; proof results shown as stale the moment
the content changes — and fresh again when an undo brings the proven content back."""
from __future__ import annotations

import shutil

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from studio.app.bridge.background import Background
from studio.app.notebook.document_view import DocumentView
from studio.app.notebook.documents import create_from_template, open_package
from studio.app.notebook.problems import ProblemsPanel
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.context import Context
from studio.engine.resources import TEMPLATES


@pytest.fixture
def workers():
    w = DeviceWorkers()
    yield w
    w.close()


def make_view(qtbot, workers, folder, *, authored=True):
    doc = open_package(folder)
    view = DocumentView(doc, workers, Background(), ctx=Context.open(), authored=authored)
    qtbot.addWidget(view)
    panel = ProblemsPanel()                      # the window's Problems panel, fed as the window feeds it
    qtbot.addWidget(panel)
    view.problemsChanged.connect(lambda _v, ps: panel.set_problems(ps))
    panel.set_problems(view.problems)
    view.show()
    return view, panel


def type_replace(editor, old: str, new: str) -> None:
    text = editor.toPlainText()
    at = text.index(old)
    c = editor.textCursor()
    c.setPosition(at)
    c.setPosition(at + len(old), QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(c)
    editor.insertPlainText(new)


def settled(qtbot, view, timeout=90_000):
    """Wait for the debounced check and the reference import that follows it."""
    c = view.checker
    checks, imports = c.checks_done, c.imports_done
    qtbot.waitUntil(lambda: not c.timer.isActive() and c.checks_done > checks and
                    (c.imports_done > imports or not view.session.runnable), timeout=timeout)


def at(problems, file):
    return [p for p in problems if p.file == file]


def test_reference_syntax_error_at_its_line_and_column_as_you_type(qtbot, workers, tmp_path):
    view, panel = make_view(qtbot, workers, create_from_template("stencil", tmp_path, "cd", "me"))
    view.checker.timer.setInterval(10**7)                  # no worker needed: the parse is local
    ref = view.notebook.cell("reference")
    assert at(view.problems, "reference.py") == []
    type_replace(ref.editor, "return x[2:] - x[:-2]", "return x[2:] - x[:-2")
    line = next(i for i, t in enumerate(view.doc.text("reference.py").splitlines(), 1) if "x[:-2" in t)
    probs = at(view.problems, "reference.py")
    assert len(probs) == 1 and probs[0].line == line and probs[0].col is not None
    assert "syntax" in probs[0].message
    assert ref.editor.markers and ref.editor.markers[0].line == line        # marked in the cell
    assert ref.chip.kind == "error"
    row = panel.row_of(probs[0])                                              # listed in Problems
    assert row is not None and row.text(1) == f"reference.py:{line}:{probs[0].col}"
    ref.editor.moveCursor(QTextCursor.MoveOperation.Start)
    view.notebook.jump(probs[0])
    assert ref.editor.cursor_line_col() == (line, probs[0].col)
    type_replace(ref.editor, "x[:-2", "x[:-2]")                               # fixed: gone at once
    assert at(view.problems, "reference.py") == [] and ref.editor.markers == []


def test_reference_import_error_is_found_in_the_sandbox_at_its_line(qtbot, workers, tmp_path):
    view, panel = make_view(qtbot, workers, create_from_template("stencil", tmp_path, "cd", "me"))
    settled(qtbot, view)
    assert view.problems == [], view.problems
    ref = view.notebook.cell("reference")
    type_replace(ref.editor, "import numpy as np\n", "import numpy as np\nSCALE = np.float64(undefined_name)\n")
    settled(qtbot, view)
    probs = at(view.problems, "reference.py")
    assert probs and probs[0].line == 3 and "NameError" in probs[0].message, view.problems
    assert probs[0].source == "import"
    assert ref.editor.markers and ref.editor.markers[0].line == 3
    assert panel.row_of(probs[0]) is not None and "snapshots" not in panel.row_of(probs[0]).text(1)
    # a function the contract names but the reference lacks
    view.undo_stack.undo()
    type_replace(ref.editor, "def vjp(x, dy):", "def vjp_x(x, dy):")
    settled(qtbot, view)
    probs = at(view.problems, "reference.py")
    assert any("no function 'vjp'" in p.message and p.field == "backward.text" for p in probs), view.problems
    view.undo_stack.undo()
    settled(qtbot, view)
    assert view.problems == [], view.problems


def test_untrusted_reference_is_parsed_but_never_imported(qtbot, workers, tmp_path):
    sent = shutil.copytree(TEMPLATES / "stencil" / "op", tmp_path / "sent")
    view, _ = make_view(qtbot, workers, sent, authored=None)
    assert not view.session.runnable
    ref = view.notebook.cell("reference")
    type_replace(ref.editor, "def forward(x):", "def forward(x)")
    assert at(view.problems, "reference.py")                 # the local parse still speaks
    view.checker.check_now()
    assert not any(j.request in ("reference", "check") for j in workers.jobs)   # nothing went to run


@pytest.mark.slow
def test_a_kernel_and_descriptor_disagreement_is_marked_on_both_lines(qtbot, workers, tmp_path):
    view, panel = make_view(qtbot, workers, create_from_template("stencil", tmp_path, "cd", "me"))
    settled(qtbot, view)
    kernel, bindings = view.notebook.cell("kernel"), view.notebook.cell("bindings")
    assert kernel.chip.text() in ("ok", "compiles ✔")
    type_replace(kernel.editor, "var<storage, read> x", "var<storage, read_write> x")
    settled(qtbot, view)
    wgsl_line = next(i for i, t in enumerate(view.doc.text("forward.wgsl").splitlines(), 1) if "read_write> x" in t)
    desc_line = next(i for i, t in enumerate(view.doc.field("bindings.text").splitlines(), 1) if "@binding(0) x" in t)
    on_kernel = at(view.problems, "forward.wgsl")
    assert on_kernel and on_kernel[0].line == wgsl_line, view.problems
    assert [m.line for m in kernel.editor.markers] == [wgsl_line]               # the WGSL line ...
    assert kernel.chip.kind == "error"                                            # ... and no "ok"
    assert desc_line in [m.line for m in bindings.editor.markers]                # the descriptor line
    assert panel.row_of(on_kernel[0]) is not None
    # the undo that fixes it takes both marks away
    view.undo_stack.undo()
    settled(qtbot, view)
    assert view.problems == [] and kernel.editor.markers == [] and bindings.editor.markers == []


@pytest.mark.slow
def test_proof_results_go_stale_the_moment_the_content_changes(qtbot, workers, tmp_path):
    view, _ = make_view(qtbot, workers, create_from_template("stencil", tmp_path, "cd", "me"))
    panel = view.conformance_panel
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled() and panel.chip.text() in ("PASS", "FAIL", "error"),
                    timeout=120_000)
    assert panel.chip.text() == "PASS", panel.summary.text()
    assert panel.receipt_chip.text() == "receipt ✔" and not view.freshness.stale("conformance")
    assert view.freshness.proven_hash("conformance") == view.doc.content_hash()
    # one keystroke: the result is about other content now
    kernel = view.notebook.cell("kernel").editor
    type_replace(kernel, "x[i + 2u] - x[i]", "x[i + 1u] - x[i]")
    qtbot.waitUntil(lambda: view.freshness.stale("conformance"), timeout=2000)
    assert "stale" in panel.chip.text() and "stale" in panel.receipt_chip.text()
    assert panel.receipt_chip.kind == "warn"
    # the undo brings the proven content back: fresh again
    view.undo_stack.undo()
    qtbot.waitUntil(lambda: not view.freshness.stale("conformance"), timeout=2000)
    assert panel.chip.text() == "PASS" and panel.receipt_chip.text() == "receipt ✔"


def _close_during_check(qtbot, workers, folder):
    """A view whose check is in flight is deleted; then the worker's reply arrives."""
    from PySide6.QtWidgets import QApplication
    doc = open_package(folder)
    view = DocumentView(doc, workers, Background(), ctx=Context.open(), authored=True)
    view.checker.timer.stop()
    view.checker.check_now()
    job = view.checker.job
    view.deleteLater()
    QApplication.processEvents()
    QApplication.sendPostedEvents(None, 0)            # the deferred delete runs: the checker is gone
    with qtbot.waitSignals([job.succeeded], timeout=90_000, raising=False):
        pass
    qtbot.wait(50)


@pytest.mark.slow
def test_a_check_that_lands_after_its_document_closed_is_dropped(qtbot, workers, pkg_copy, monkeypatch):
    folder = pkg_copy(name="closing")
    _close_during_check(qtbot, workers, folder)       # no exception in the event loop: pytest-qt would fail it
    from studio.app.bridge.checking import CheckController    # control: without the guard, the reply hits a deleted object
    monkeypatch.setattr(CheckController, "_gone", lambda self: False)
    with qtbot.captureExceptions() as caught:
        _close_during_check(qtbot, workers, folder)
    assert any("deleted" in str(e[1]) for e in caught), caught
    caught.clear()         # (their tracebacks reach pytest-qt's event loop and this frame: a cycle)
