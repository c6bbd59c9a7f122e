"""Editing end to end, walked through the real window and the real device worker: a user
creates a new op of each template kind from File ▸ New, and for one of them breaks it in three
ways, sees every error where it is (cell, line, Problems panel), fixes each with Ctrl+Z, and
proves it — conformance through the worker, a receipt in the package — without touching
op.toml by hand."""
from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication

from studio.app.notebook.new_op import NewOpDialog
from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.proof.receipts import receipt_dir
from studio.engine.contract.package import load_package

CTRL = Qt.KeyboardModifier.ControlModifier


@pytest.fixture
def window(qtbot):
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    win.show()
    yield win
    for v in list(win.views):           # discard before closing: a failed step must not leave a prompt
        win.close_view(v, discard=True)
    win.shutdown()
    win.deleteLater()


def new_op(qtbot, win, folder, template, name, author="ana", license="MIT", visibility="public"):
    """File ▸ New op from template, every field filled in the dialog, OK pressed."""
    def fill():
        dlg = next((w for w in QApplication.topLevelWidgets() if isinstance(w, NewOpDialog) and w.isVisible()), None)
        if dlg is None:
            QTimer.singleShot(20, fill)
            return
        dlg.choose_template(template)
        dlg.name.setText(name)
        dlg.author.setText(author)
        dlg.license.setText(license)
        dlg.visibility.setCurrentText(visibility)
        dlg.folder.setText(str(folder))
        qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Ok), Qt.MouseButton.LeftButton)
    QTimer.singleShot(0, fill)
    win.menus["file.new"].trigger()
    view = win.current()
    assert view is not None and view.doc.field("id") == f"user/{author}/{name}@1"
    return view


def type_replace(editor, old: str, new: str) -> None:
    text = editor.toPlainText()
    at = text.index(old)
    c = editor.textCursor()
    c.setPosition(at)
    c.setPosition(at + len(old), QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(c)
    editor.insertPlainText(new)


def settled(qtbot, view, timeout=120_000):
    c = view.checker
    checks, imports = c.checks_done, c.imports_done
    if not c.timer.isActive():
        c.check_now()
    qtbot.waitUntil(lambda: not c.timer.isActive() and c.checks_done > checks and c.imports_done > imports,
                    timeout=timeout)


def prove(qtbot, view, timeout=180_000) -> str:
    panel = view.conformance_panel
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled() and panel.chip.text() in ("PASS", "FAIL", "error"),
                    timeout=timeout)
    return panel.chip.text()


def ctrl_z(qtbot, widget) -> None:
    widget.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.keyClick(widget, Qt.Key.Key_Z, CTRL)


@pytest.mark.slow
def test_break_see_fix_and_prove_a_new_stencil_op_without_touching_op_toml(qtbot, window, tmp_path):
    win = window
    view = new_op(qtbot, win, tmp_path, "stencil", "edges")
    nb, doc, problems = view.notebook, view.doc, win.problems
    op = nb.cell("op")
    assert (op.authors.text(), op.license.text(), op.visibility.currentText()) == ("ana", "MIT", "public")
    assert nb.cell("signature").text.text().startswith("edges(x: f32[n]")
    settled(qtbot, view)
    assert view.problems == [], view.problems
    manifest_before = doc.manifest_text

    # 1. a Python syntax error in the reference: flagged as typed, in the cell and in Problems
    ref = nb.cell("reference").editor
    type_replace(ref, "def forward(x):", "def forward(x)")
    p = next(p for p in view.problems if p.file == "reference.py")
    assert ref.markers and ref.markers[0].line == p.line and p.col is not None
    row = problems.row_of(p)
    assert row is not None
    ref.moveCursor(QTextCursor.MoveOperation.End)
    problems.itemClicked.emit(row, 0)                                  # one click: there
    assert ref.cursor_line_col() == (p.line, p.col)
    ctrl_z(qtbot, ref)                                                 # fixed by the undo
    assert "def forward(x):" in doc.text("reference.py")
    assert not any(q.file == "reference.py" for q in view.problems) and ref.markers == []

    # 2. the kernel disagrees with the bindings descriptor: both lines marked, the Kernel cell not "ok"
    kernel = nb.cell("kernel")
    type_replace(kernel.editor, "var<storage, read> x", "var<storage, read_write> x")
    settled(qtbot, view)
    on_wgsl = [q for q in view.problems if q.file == "forward.wgsl"]
    assert on_wgsl and kernel.editor.markers and kernel.chip.kind == "error", view.problems
    bindings = nb.cell("bindings")
    x_line = next(i for i, t in enumerate(doc.field("bindings.text").splitlines(), 1) if "@binding(0) x" in t)
    assert x_line in [m.line for m in bindings.editor.markers]
    wgsl_line = next(i for i, t in enumerate(doc.text("forward.wgsl").splitlines(), 1) if "read_write> x" in t)
    assert [q.line for q in on_wgsl] == [wgsl_line]
    assert problems.row_of(on_wgsl[0]) is not None
    ctrl_z(qtbot, kernel.editor)
    settled(qtbot, view)
    assert view.problems == [] and kernel.editor.markers == [] and bindings.editor.markers == [], view.problems

    # 3. a kernel that compiles but is wrong: conformance through the worker says where
    type_replace(kernel.editor, "if (i >= p.n - 2u) { return; }", "if (i >= p.n - 3u) { return; }")
    assert prove(qtbot, view) == "FAIL", view.conformance_panel.summary.text()
    report = view.conformance_panel.report
    assert report["failed"] > 0 and view.conformance_panel.mismatch_box.isVisible()
    assert "never written" in view.conformance_panel.mm_got.text()
    ctrl_z(qtbot, kernel.editor)                                       # the fix
    assert "if (i >= p.n - 2u) { return; }" in doc.text("forward.wgsl")
    qtbot.waitUntil(lambda: view.freshness.stale("conformance"), timeout=2000)   # the FAIL is about other content
    assert "stale" in view.conformance_panel.chip.text()

    # 4. prove it: conformance PASS, the receipt in the package; op.toml was never typed in
    assert not doc.dirty                                                # the undo restored the saved content
    assert prove(qtbot, view) == "PASS", view.conformance_panel.summary.text()
    assert view.conformance_panel.receipt_chip.text() == "receipt ✔"
    receipts = list(receipt_dir(load_package(tmp_path / "edges")).glob("*.json"))
    assert len(receipts) == 1
    receipt = json.loads(receipts[0].read_text())
    assert receipt["verdict"] == "pass" and receipt["op"] == "user/ana/edges@1"
    assert receipt["hashes"]["package"] == doc.content_hash()
    assert doc.manifest_text == manifest_before


@pytest.mark.slow
def test_a_new_op_of_every_template_kind_checks_clean_and_proves(qtbot, window, tmp_path):
    for kind in ("elementwise", "selection", "reduction", "stencil"):
        view = new_op(qtbot, window, tmp_path, kind, f"my_{kind}", visibility="private", license="")
        assert view.doc.field("authors") == ["ana"] and view.doc.field("visibility") == "private"
        assert "median" not in str(view.doc.field("summary")).lower()
        settled(qtbot, view)
        assert view.problems == [], (kind, view.problems)
        assert prove(qtbot, view) == "PASS", (kind, view.conformance_panel.summary.text())
