"""The document's undo: one QUndoStack per document (``DocumentView.undo_stack``)
over every cell and form — fields, dropdowns, tables, code editors, the op.toml text — with
Ctrl+Z / Ctrl+Shift+Z working through it from any control; typing is undone a burst at a time;
an error mark goes with the undo that fixed (or made) it."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor, QUndoStack

from studio.app.bridge.background import Background
from studio.app.notebook.document_view import DocumentView
from studio.app.notebook.documents import create_from_template, open_package
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.context import Context

CTRL, SHIFT = Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.ShiftModifier


def open_view(qtbot, tmp_path, template="windowed_median", name="wm"):
    doc = open_package(create_from_template(template, tmp_path, name, "me"))
    view = DocumentView(doc, DeviceWorkers(), Background(), ctx=Context.open(), authored=True)
    qtbot.addWidget(view)
    view.checker.timer.setInterval(10**7)                   # no device worker in these tests
    view.show()
    qtbot.waitExposed(view)
    return view


def type_replace(editor, old: str, new: str) -> None:
    text = editor.toPlainText()
    at = text.index(old)
    c = editor.textCursor()
    c.setPosition(at)
    c.setPosition(at + len(old), QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(c)
    editor.insertPlainText(new)


def focus(qtbot, view, w) -> None:
    view.activateWindow()
    w.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.waitUntil(w.hasFocus, timeout=3000)


def test_one_stack_undoes_edits_from_every_cell_in_order(qtbot, tmp_path):
    view = open_view(qtbot, tmp_path)
    doc, nb = view.doc, view.notebook
    assert isinstance(view.undo_stack, QUndoStack) and view.undo_stack.count() == 0
    states = [doc.files()]
    op = nb.cell("op")
    focus(qtbot, view, op.summary)
    op.summary.selectAll()
    qtbot.keyClicks(op.summary, "a running thing")              # one burst of typing: one step
    states.append(doc.files())
    nb.cell("tolerance").kind.setCurrentText("ulp")            # a dropdown
    states.append(doc.files())
    nb.cell("bindings").table.set_cell(0, 2, "xs")             # a table cell
    states.append(doc.files())
    type_replace(nb.cell("kernel").editor, "win[p.w / 2u]", "win[0u]")   # the kernel's text
    states.append(doc.files())
    nb.cell("manifest").editor.setPlainText(doc.manifest_text.replace("workgroup_size = 64", "workgroup_size = 32"))
    states.append(doc.files())
    assert view.undo_stack.count() == 5 and len({str(s) for s in states}) == 6
    for want in reversed(states[:-1]):
        view.undo_stack.undo()
        assert doc.files() == want
    # every view shows the restored content
    assert op.summary.text() == doc.field("summary") != "a running thing"
    assert nb.cell("tolerance").kind.currentText() == "exact"
    assert nb.cell("bindings").table.rows()[0][2] == "x"
    assert "win[p.w / 2u]" in nb.cell("kernel").editor.toPlainText()
    assert nb.cell("kernel").workgroup.value() == 64
    assert not doc.dirty                                        # back to the saved content
    for want in states[1:]:
        view.undo_stack.redo()
        assert doc.files() == want
    assert nb.cell("kernel").workgroup.value() == 32 and doc.dirty


def test_ctrl_z_and_ctrl_shift_z_work_through_the_documents_stack(qtbot, tmp_path):
    view = open_view(qtbot, tmp_path)
    doc, nb = view.doc, view.notebook
    saved = doc.files()
    sig = nb.cell("signature").text
    focus(qtbot, view, sig)
    sig.end(False)
    qtbot.keyClicks(sig, " x")
    after_sig = doc.files()
    kernel = nb.cell("kernel").editor
    focus(qtbot, view, kernel)
    kernel.moveCursor(QTextCursor.MoveOperation.End)
    qtbot.keyClicks(kernel, "// mine")
    assert view.undo_stack.count() == 2 and doc.text("forward.wgsl").endswith("// mine")
    # Ctrl+Z in the kernel editor undoes its typing, then — still there — the signature's edit
    qtbot.keyClick(kernel, Qt.Key.Key_Z, CTRL)
    assert doc.files() == after_sig and not kernel.toPlainText().endswith("// mine")
    qtbot.keyClick(kernel, Qt.Key.Key_Z, CTRL)
    assert doc.files() == saved and sig.text() == doc.field("signature") and not doc.dirty
    # Ctrl+Shift+Z redoes, from any control of the document
    focus(qtbot, view, sig)
    qtbot.keyClick(sig, Qt.Key.Key_Z, CTRL | SHIFT)
    assert doc.files() == after_sig and sig.text().endswith(" x")
    qtbot.keyClick(sig, Qt.Key.Key_Y, CTRL)
    assert doc.text("forward.wgsl").endswith("// mine")
    # the widgets' own undo is not a second history
    assert not kernel.isUndoRedoEnabled()


def test_typing_pauses_split_undo_steps(qtbot, tmp_path, monkeypatch):
    from studio.app.notebook import undo
    view = open_view(qtbot, tmp_path)
    summary = view.notebook.cell("op").summary
    focus(qtbot, view, summary)
    summary.end(False)
    qtbot.keyClicks(summary, " one")
    assert view.undo_stack.count() == 1
    monkeypatch.setattr(undo, "MERGE_S", -1.0)              # as if the user paused
    qtbot.keyClicks(summary, " two")
    assert view.undo_stack.count() == 1 + len(" two")
    monkeypatch.setattr(undo, "MERGE_S", 1.0)
    view.undo_stack.undo()
    assert view.doc.field("summary").endswith(" one tw")


def test_an_error_mark_goes_with_the_undo_that_fixed_it(qtbot, tmp_path):
    view = open_view(qtbot, tmp_path)
    cell = view.notebook.cell("bindings")
    good = view.doc.field("bindings.text")
    type_replace(cell.editor, "f32[n - w + 1]", "f32[n - w + ]")        # breaks the descriptor
    assert cell.editor.markers and cell.chip.kind == "error"
    view.undo_stack.undo()                                           # the undo fixes it ...
    assert view.doc.field("bindings.text") == good
    assert cell.editor.markers == [] and cell.chip.kind == "ok"      # ... and the mark is gone
    view.undo_stack.redo()                                           # the redo brings both back
    assert cell.editor.markers and cell.chip.kind == "error"
    # the reference's syntax error, marked as the user types, follows the undo as well
    ref = view.notebook.cell("reference")
    type_replace(ref.editor, "def forward(x, *, w):", "def forward(x, *, w)")
    assert any(p.file == "reference.py" for p in view.problems) and ref.editor.markers
    view.undo_stack.undo()
    assert not any(p.file == "reference.py" for p in view.problems) and ref.editor.markers == []
