"""The story's helpers for the Studio's tests (the first draft's guard and the fix, typing over a
span as a user would, File ▸ New op through its dialog), and long work cancelled from the GUI.
The story itself — new op from the template, the forms, a compile error one click away, the first
draft run before proof and failing conformance at n = w, the fix and its receipt, gradcheck,
publishing, the spike-removal workflow — is performed step by step, as docs/tutorial.md tells it,
by tests/studio/test_app_tutorial.py (which also checks the tutorial's text against the screen)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication

from studio.app.notebook.new_op import NewOpDialog
from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers

GOOD_GUARD = "if (i >= p.n - p.w + 1u) { return; }"
FIRST_DRAFT = "if (i >= p.n - p.w) { return; }"


@pytest.fixture
def window(qtbot):
    workers = DeviceWorkers()
    win = MainWindow(workers=workers, offer_recovery=False)
    qtbot.addWidget(win)
    win.show()
    yield win
    for v in list(win.views):
        win.close_view(v, discard=True)
    win.shutdown()


def type_replace(editor, old: str, new: str) -> None:
    """Select ``old`` in a code editor and type ``new`` over it, as a user would."""
    text = editor.toPlainText()
    at = text.index(old)
    c = editor.textCursor()
    c.setPosition(at)
    c.setPosition(at + len(old), QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(c)
    editor.insertPlainText(new)


def new_op_through_dialog(qtbot, win: MainWindow, folder, name="windowed_median", author="me"):
    """File ▸ New op from template: fill the dialog's fields and press OK."""
    def fill():
        dlg = next((w for w in QApplication.topLevelWidgets() if isinstance(w, NewOpDialog) and w.isVisible()), None)
        if dlg is None:
            QTimer.singleShot(20, fill)
            return
        dlg.name.setText(name)
        dlg.author.setText(author)
        dlg.folder.setText(str(folder))
        qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Ok), Qt.MouseButton.LeftButton)
    QTimer.singleShot(0, fill)
    win.menus["file.new"].trigger()
    view = win.current()
    assert view is not None and view.doc.field("id") == f"user/{author}/{name}@1"
    return view


def wait_checked(qtbot, view, timeout=60_000):
    start = view.checker.checks_done
    qtbot.waitUntil(lambda: view.checker.checks_done > start and not view.checker.timer.isActive(), timeout=timeout)


@pytest.mark.slow
def test_long_work_shows_progress_and_can_be_cancelled(qtbot, window, tmp_path):
    view = new_op_through_dialog(qtbot, window, tmp_path, name="median_cancel")
    panel = view.conformance_panel
    panel.large.setChecked(True)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert not panel.run_button.isEnabled() and panel.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: panel.progress.maximum() > 0 or not panel.cancel_button.isEnabled(), timeout=60_000)
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=30_000)
    if panel.chip.text() != "PASS":          # (on a very fast device it may finish first)
        assert panel.chip.text() == "cancelled"
    # the worker was restarted: the next run works
    panel.large.setChecked(False)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=90_000)
    assert panel.chip.text() == "PASS", panel.summary.text()
