"""Feedback where the user looks, through the real window and worker:
F5 on the story's first draft (opened from the Welcome page's catalog, as the user's copy) scrolls
the notebook to the Conformance cell, frames it while it runs, and its FAIL turns "stale" after a
kernel edit (it stayed FAIL before: only the cell's own button was tracked); "go to" puts the cell's
header at the top; the go-to box follows scrolling and Shift+Enter."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from studio.app.notebook.freshness import STALE_NOTE
from studio.engine.resources import EXAMPLES

from test_app_shell import dispose, give_focus, make_window, wait_checked

FIRST_DRAFT = EXAMPLES / "windowed_median_first_draft"


def header_top(view, key) -> int:
    nb = view.notebook
    return nb.cell(key).y() - nb.scroll.verticalScrollBar().value()


@pytest.mark.slow
def test_f5_scrolls_to_conformance_frames_it_and_its_result_goes_stale(qtbot):
    win = make_window(qtbot, restore_session=False)
    try:
        view = win.open_path(FIRST_DRAFT)
        wait_checked(qtbot, view)
        nb = view.notebook
        nb.show_cell("op")
        qtbot.wait(20)
        assert not nb.header_in_view("conformance")
        panel = view.conformance_panel
        win.menus["run.conformance"].trigger()                                   # Run ▸ Conformance (F5), from the menu
        assert panel.property("running") is True
        qtbot.waitUntil(lambda: nb.header_in_view("conformance"), timeout=2000)
        assert 0 <= header_top(view, "conformance") <= 20           # its header at the top
        assert nb.jump_box.currentData() == "conformance"           # the go-to box follows
        qtbot.waitUntil(lambda: panel.run_button.isEnabled() and panel.chip.text() in ("PASS", "FAIL", "error"),
                        timeout=180_000)
        assert panel.chip.text() == "FAIL", panel.summary.text()   # the first draft fails on purpose
        qtbot.waitUntil(lambda: not panel.property("running"), timeout=2000)
        assert view.freshness.proven_hash("conformance") == view.doc.content_hash()
        # a kernel edit: the FAIL is about other content now
        editor = view.notebook.cell("kernel").editor
        give_focus(qtbot, win, editor)
        editor.moveCursor(editor.textCursor().MoveOperation.End)
        editor.insertPlainText("\n// trying a fix\n")
        qtbot.waitUntil(lambda: view.freshness.stale("conformance"), timeout=3000)
        assert STALE_NOTE in panel.chip.text() and panel.chip.kind == "warn"
        view.undo_stack.undo()
        qtbot.waitUntil(lambda: not view.freshness.stale("conformance"), timeout=3000)
        assert panel.chip.text() == "FAIL"
    finally:
        dispose(win)


@pytest.mark.slow
def test_go_to_puts_the_header_at_the_top_and_the_box_follows(qtbot):
    win = make_window(qtbot, restore_session=False)
    try:
        win.resize(1024, 700)
        view = win.open_path(FIRST_DRAFT)
        nb = view.notebook
        wait_checked(qtbot, view)                                    # (its messages settle the cells' heights)
        qtbot.wait(50)
        for key in ("tolerance", "kernel", "op"):
            i = nb.jump_box.findData(key)
            nb.jump_box.setCurrentIndex(i)
            nb.jump_box.activated.emit(i)                            # chosen in the go-to box
            qtbot.wait(30)
            assert 0 <= header_top(view, key) <= 20, (key, header_top(view, key))
        # scrolling moves the box along
        bar = nb.scroll.verticalScrollBar()
        bar.setValue(nb.cell("backward").y() + 5)
        QApplication.processEvents()
        assert nb.jump_box.currentData() == "backward"
        # Shift+Enter in the Tolerance cell: on to the next cell, and the box says so
        nb.show_cell("tolerance")
        qtbot.wait(20)
        target = nb.cell("tolerance").findChildren(type(nb.jump_box))[0]
        give_focus(qtbot, win, target)
        qtbot.keyClick(target, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
        qtbot.wait(30)
        assert nb.jump_box.currentData() == "backward" and 0 <= header_top(view, "backward") <= 20
    finally:
        dispose(win)
