"""Finding one's way in the Studio, through the real widgets: double-clicking a problem brings its
line on screen in the notebook (not only into its editor); the problems table reads without the
compiler's caret art and names a form's field; the Welcome page opens the story's first draft;
the catalog filter opens the groups holding a match (Broken on purpose is collapsed) and puts them
back when cleared; "Open workflow…" starts in the user's folder, never the process's."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog

from studio.app.notebook.problems import Problem, from_error
from studio.app.shell.welcome import FIRST_DRAFT
from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.errors import StudioError

NAGA = """Shader parsing error: expected ';', found 'x'
  ┌─ wgsl:3:5
  │
3 │     x = 1
  │     ^^^^ expected ';'
"""


def make_window(qtbot) -> MainWindow:
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
    qtbot.addWidget(win)
    win.resize(1024, 700)
    win.show()
    qtbot.waitExposed(win)
    return win


def line_on_screen(notebook, editor) -> bool:
    vp = notebook.scroll.viewport()
    y = editor.viewport().mapTo(vp, editor.cursorRect().center()).y()
    return 0 <= y <= vp.height()


@pytest.mark.slow
def test_a_double_clicked_problem_shows_its_line_and_the_table_reads_plainly(qtbot, pkg_copy):
    win = make_window(qtbot)
    try:
        view = win.open_path(pkg_copy(name="wayfinding"))
        nb = view.notebook
        editor = nb.cells["kernel"].editor
        last = editor.document().blockCount()
        nb.scroll.verticalScrollBar().setValue(0)
        editor.goto(1)
        qtbot.wait(20)
        nb.scroll.verticalScrollBar().setValue(0)
        cursor = editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        editor.setTextCursor(cursor)
        assert not line_on_screen(nb, editor)          # the control: the kernel's last line is below the view
        problem = Problem("expected ';'", "forward.wgsl", last, 1, source="compile")
        win.problems.set_problems([problem])
        row = win.problems.row_of(problem)
        rect = win.problems.visualItemRect(row)
        editor.goto(1)
        nb.scroll.verticalScrollBar().setValue(0)
        qtbot.wait(20)
        # a double-click as a mouse makes it: press and release, then the double-click press and release
        qtbot.mouseClick(win.problems.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        qtbot.mouseDClick(win.problems.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        qtbot.waitUntil(lambda: editor.textCursor().blockNumber() == last - 1 and line_on_screen(nb, editor),
                        timeout=3000)

        # the problems table: no caret art; a form's field named first
        art = from_error(StudioError(NAGA, file="forward.wgsl", line=3, col=5), [])
        field = Problem("a declared VJP through kinks needs its subgradient convention", "op.toml", 6, 60,
                        "backward.subgradient", severity="warning")
        win.problems.set_problems([art, field])
        texts = [[win.problems.topLevelItem(i).text(c) for c in range(3)] for i in range(2)]
        assert "^" not in texts[0][2] and "│" not in texts[0][2], texts
        assert texts[0][2] == "Shader parsing error: expected ';', found 'x' — expected ';'"
        assert "^^^^" in NAGA                                  # (the control: what the compiler wrote)
        assert texts[1][1] == "field backward.subgradient (op.toml:6:60)"
    finally:
        win.shutdown()


@pytest.mark.slow
def test_welcome_opens_the_first_draft_and_the_catalog_filter_opens_matching_groups(qtbot):
    win = make_window(qtbot)
    try:
        assert win.tabs.currentWidget() is win.welcome
        qtbot.mouseClick(win.welcome.first_draft, Qt.MouseButton.LeftButton)
        view = win.current()
        assert view is not None and Path(view.doc.path).name == FIRST_DRAFT.name      # (the user's copy of it)
        assert "first_draft" in str(view.doc.field("id"))

        cat = win.catalog
        qtbot.waitUntil(lambda: cat._count("broken") > 0, timeout=30_000)
        broken = cat.groups["broken"]
        assert not broken.isExpanded()                          # Broken on purpose starts collapsed
        cat.filter.setFocus()
        qtbot.keyClicks(cat.filter, "first_draft")
        shown = [cat.tree.itemWidget(it, 0).data["id"] for it in cat.card_items() if not it.isHidden()]
        assert shown and all("first_draft" in s for s in shown), shown
        assert broken.isExpanded() and not broken.isHidden() and cat.groups["example"].isExpanded()
        assert cat.groups["builtin"].isHidden()                 # no match there: out of the way
        cat.filter.clear()
        assert not broken.isExpanded() and not cat.groups["builtin"].isHidden()
    finally:
        win.shutdown()


def test_open_workflow_starts_in_the_users_folder_not_the_processs(qtbot, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                                 # a process started somewhere else
    win = make_window(qtbot)
    seen = []

    def answer():
        dlg = next((w for w in QApplication.topLevelWidgets() if isinstance(w, QFileDialog) and w.isVisible()), None)
        if dlg is None:
            QTimer.singleShot(20, answer)
            return
        seen.append(Path(dlg.directory().absolutePath()))
        dlg.reject()
    try:
        QTimer.singleShot(0, answer)
        monkeypatch.setattr(QFileDialog, "getOpenFileName", _qt_own_dialog)
        win.menus["file.open_workflow"].trigger()
        assert seen and seen[0] != Path(os.getcwd()) and seen[0] == Path.home(), seen
        ours = Path(os.environ["SCELLIS_HOME"]) / "workflows"
        ours.mkdir(parents=True)
        assert win.state.workflow_start_dir() == ours
    finally:
        win.shutdown()


def _qt_own_dialog(parent, caption, directory, filters):
    """QFileDialog.getOpenFileName as Qt's own widget (a platform's native dialog is no widget a test
    can read): the same caption, folder and filter."""
    dlg = QFileDialog(parent, caption, directory, filters)
    dlg.setOption(QFileDialog.Option.DontUseNativeDialog)
    dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
    ok = dlg.exec()
    files = dlg.selectedFiles()
    dlg.deleteLater()
    return (files[0] if ok and files else ""), filters




def test_the_gradcheck_report_is_read_whole_at_1024(qtbot):
    """The report pane beside the gradcheck plot at a 1024 px window: its long lines wrap, so no
    part of a line is hidden sideways (the pane used to cut them off at its right edge)."""
    from studio.app.panels.gradcheck import GradcheckPanel
    p = GradcheckPanel(9)
    qtbot.addWidget(p)
    p.resize(1000, 700)
    p.show()
    long = "  probe 17 at x = [0.125, -3.5, 2.0], dx: analytic 0.333333333 numeric 0.333333331 " * 3
    p.show_report({"verdict": "pass", "lines": ["gradcheck user/demo/windowed_median@1", long.rstrip()],
                   "probes": [{"analytic": 1.0, "numeric": 1.0}], "negative_controls": []})
    qtbot.wait(50)
    assert p.text.horizontalScrollBar().maximum() == 0
    assert p.text.document().size().height() > 2          # the long line took more than one row
