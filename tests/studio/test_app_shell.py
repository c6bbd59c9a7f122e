"""The Studio's shell through the real window, worker and widgets: Edit / View /
Help menus, a closed dock brought back, Ctrl+Enter and Shift+Enter, find in a code cell, undo per
document from the Edit menu, the Welcome page, Trust disabled with nothing to trust, the catalog's
Examples group and double-click on a card's title, the conformance progress bar before the corpus
size is known, "− remove" with nothing selected, tooltips on every control, and the window's state
restored on restart (in the test's own settings file, never the user's)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QWidget,
)

from studio.app.shell.welcome import STORY_OP
from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.resources import EXAMPLES, ROOT

WORKFLOW = ROOT / "workflows" / "spike_removal.toml"


def make_window(qtbot, **kw) -> MainWindow:
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, **kw)
    win.show()                             # (not qtbot.addWidget: dispose() closes it, documents first)
    qtbot.waitExposed(win)
    win.activateWindow()
    qtbot.waitActive(win)                  # keyboard focus needs the active window (offscreen too)
    return win


def dispose(win: MainWindow) -> None:
    for v in list(win.views):
        win.close_view(v, discard=True)
    win.shutdown()
    win.close()
    win.deleteLater()


@pytest.fixture
def window(qtbot):
    win = make_window(qtbot)
    yield win
    dispose(win)


def wait_checked(qtbot, view, timeout=90_000):
    start = view.checker.checks_done
    qtbot.waitUntil(lambda: view.checker.checks_done > start and not view.checker.timer.isActive(), timeout=timeout)


def give_focus(qtbot, win, widget) -> None:
    """Keyboard focus on ``widget`` (the window made active again first: opening a document can take
    the activation away from it offscreen)."""
    win.activateWindow()
    qtbot.waitActive(win)
    widget.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is widget, timeout=5000)


def menu_texts(menu) -> list[str]:
    return [a.text().replace("&", "") for a in menu.actions() if not a.isSeparator()]


# ----------------------------------------------------------------------------- menus, docks, welcome
def test_edit_view_and_help_menus(qtbot, window):
    qtbot.wait(10)                                                       # (Help moves last after __init__)
    tops = [a.text().replace("&", "") for a in window.menuBar().actions() if a.isVisible()]
    assert tops[:4] == ["File", "Edit", "View", "Run"] and tops[-1] == "Help"   # Tools, Publish… between
    assert {"Undo", "Redo", "Find…", "Find next", "Find previous"} <= set(menu_texts(window.menus.menu("edit")))
    assert window.menus["edit.undo"].shortcut() == QKeySequence(QKeySequence.StandardKey.Undo)
    assert window.menus["edit.find"].shortcut() == QKeySequence(QKeySequence.StandardKey.Find)
    panels = menu_texts(window.menus.menu("view.panels"))
    assert {"Catalog", "Problems", "Main toolbar"} <= {p.split(" — ")[0] for p in panels}
    assert menu_texts(window.menus.menu("view.theme")) == ["Follow the system", "Light", "Dark"]
    assert {"Documentation", "Keyboard shortcuts", "About Scellis Studio"} <= set(menu_texts(window.menus.menu("help")))
    from studio.app.shell.menus import ShortcutsDialog, shortcut_rows
    rows = {(m, a): k for m, a, k in shortcut_rows(window)}
    assert rows[("Run", "Run cell")].startswith("Ctrl+Return") and rows[("Run", "Conformance")] == "F5"
    assert rows[("Run", "Run cell and advance")].startswith("Shift+Return")
    dlg = ShortcutsDialog(window)
    assert dlg.table.rowCount() == len(rows) and dlg.table.item(0, 2).text()
    from studio.app.shell.window import about_text
    assert "Scellis Studio 1.2.3" in about_text("1.2.3", "GPU: x")
    # Tools appears when a feature adds an action to it
    window.menus.menu("tools").addAction("a tool")
    QApplication.processEvents()
    assert window.menus.menu("tools").menuAction().isVisible()


def test_a_closed_dock_comes_back_through_the_view_menu(qtbot, window):
    for dock in (window.catalog_dock, window.problems_dock):
        assert dock.isVisible()
        close = dock.findChild(QAbstractButton, "qt_dockwidget_closebutton")
        qtbot.mouseClick(close, Qt.MouseButton.LeftButton)               # the dock's own ✕
        assert not dock.isVisible()
        toggle = next(a for a in window.menus.menu("view.panels").actions() if a is dock.toggleViewAction())
        toggle.trigger()                                                 # View ▸ Panels ▸ …
        assert dock.isVisible()


@pytest.mark.slow
def test_welcome_page_when_no_tab_is_open(qtbot, window, pkg_copy):
    assert window.tabs.count() == 1 and window.tabs.widget(0) is window.welcome
    assert window.current() is None and not window.menus["file.save"].isEnabled()
    # the story's op, one click away
    qtbot.mouseClick(window.welcome.story, Qt.MouseButton.LeftButton)
    view = window.current()
    from studio.app.notebook.shipped import original_of
    assert view is not None and original_of(view.doc.path).resolve() == STORY_OP.resolve()   # the user's copy
    assert window.tabs.indexOf(window.welcome) < 0
    # closing the last tab brings the Welcome page back, not a blank area
    pkg = pkg_copy(name="mine")
    window.open_path(pkg)
    window.close_view(window.current(), discard=True)
    assert window.tabs.indexOf(window.welcome) < 0
    window.close_view(view, discard=True)
    assert window.tabs.count() == 1 and window.tabs.currentWidget() is window.welcome
    # with the package just opened among the recent files, a double-click away
    from studio.app.shell.paths import recent_packages
    qtbot.waitUntil(lambda: pkg.resolve() in [p.resolve() for p in recent_packages()], timeout=30_000)   # written off the GUI thread
    window.show_welcome()
    window.close_view(window.welcome)                                 # the Welcome page does not close
    assert window.tabs.currentWidget() is window.welcome
    recent = window.welcome.recent
    paths = [recent.item(i).data(Qt.ItemDataRole.UserRole) for i in range(recent.count())]
    assert str(pkg.resolve()) in paths
    item = recent.item(paths.index(str(pkg.resolve())))
    recent.itemActivated.emit(item)
    assert window.current() is not None and window.current().doc.path.resolve() == pkg.resolve()


@pytest.mark.slow
def test_trust_is_disabled_with_nothing_to_trust(window, tmp_path):
    assert not window.menus["run.trust"].isEnabled()                  # nothing open
    story = window.open_story()                               # the product's own example: trusted
    assert story.session.runnable and not window.menus["run.trust"].isEnabled()
    sent = shutil.copytree(EXAMPLES / "windowed_median", tmp_path / "sent_to_me",
                           ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    with open(sent / "reference.py", "a") as f:               # not the product's content any more
        f.write("\n# changed by whoever sent it\n")
    view = window.open_path(sent)                             # written elsewhere: untrusted
    assert not view.session.runnable and window.menus["run.trust"].isEnabled()
    window.tabs.setCurrentWidget(story)
    assert not window.menus["run.trust"].isEnabled()
    wf = window.open_workflow(WORKFLOW)
    assert window.tabs.currentWidget() is wf and not window.menus["run.trust"].isEnabled()
    for v in (view, story, wf):
        window.close_view(v, discard=True)
    assert window.tabs.currentWidget() is window.welcome and not window.menus["run.trust"].isEnabled()


# ----------------------------------------------------------------------------- running cells, find, undo
@pytest.mark.slow
def test_ctrl_enter_runs_the_cell_and_shift_enter_runs_and_advances(qtbot, window):
    view = window.open_story()
    wait_checked(qtbot, view)
    kernel = view.notebook.cell("kernel").editor
    before = view.doc.text("forward.wgsl")
    give_focus(qtbot, window, kernel)
    start = view.checker.checks_done
    qtbot.keyClick(kernel, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)     # a contract cell: check
    qtbot.waitUntil(lambda: view.checker.checks_done > start, timeout=90_000)
    qtbot.keyClick(kernel, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)       # check, then the next cell
    assert view.doc.text("forward.wgsl") == before and not view.doc.dirty              # no line break typed
    from studio.app.shell.menus import cell_of
    qtbot.waitUntil(lambda: cell_of(view, window.focusWidget()) == "conformance", timeout=5000)
    # in the Conformance cell, Ctrl+Enter runs conformance
    panel = view.conformance_panel
    give_focus(qtbot, window, window.focusWidget())
    qtbot.keyClick(window.focusWidget(), Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert view.conformance.job is not None and not panel.run_button.isEnabled()
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=120_000)
    assert panel.chip.text() == "PASS", panel.summary.text()


@pytest.mark.slow
def test_shift_enter_outside_a_document_is_left_to_the_widget(qtbot, window):
    """Control: the key filter is what keeps the kernel intact — an editor outside a document gets
    its line break as usual."""
    ed = QPlainTextEdit()
    qtbot.addWidget(ed)
    ed.show()
    ed.setPlainText("a")
    ed.moveCursor(ed.textCursor().MoveOperation.End)
    ed.setFocus()
    qtbot.keyClick(ed, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert ed.toPlainText() != "a"


@pytest.mark.slow
def test_find_in_the_current_code_cell(qtbot, window):
    view = window.open_story()
    ref = view.notebook.cell("reference").editor
    give_focus(qtbot, window, ref)
    window.menus["edit.find"].trigger()
    bar = window.find_bar
    assert bar.isVisible() and bar.editor is ref and "Reference" in bar.where.text()
    qtbot.keyClicks(bar.text, "def ")
    assert ref.textCursor().selectedText() == "def "
    n = ref.toPlainText().count("def ")
    assert bar.matches() == n >= 1 and bar.count.text().startswith(str(n))
    first = ref.textCursor().selectionStart()
    for _ in range(n):                                       # next, n times: wraps around to the first
        window.menus["edit.find_next"].trigger()
    assert ref.textCursor().selectionStart() == first
    bar.text.setText("no such text anywhere")
    assert not bar.find() and bar.count.text() == "no match"
    qtbot.keyClick(bar, Qt.Key.Key_Escape)
    assert not bar.isVisible()


@pytest.mark.slow
def test_undo_and_redo_from_the_edit_menu_follow_the_current_document(window, pkg_copy):
    a = window.open_path(pkg_copy(name="a"))
    b = window.open_path(pkg_copy(name="b"))
    assert hasattr(a, "undo_stack"), "DocumentView.undo_stack (studio-editing) is missing"
    window.tabs.setCurrentWidget(a)
    summary = a.notebook.cell("op").summary
    old = summary.text()
    summary.setFocus()
    summary.selectAll()
    summary.insert("a running median")
    summary.editingFinished.emit()
    assert a.doc.field("summary") == "a running median"
    assert window.menus["edit.undo"].isEnabled()
    window.tabs.setCurrentWidget(b)                            # the other document has nothing to undo
    assert not window.menus["edit.undo"].isEnabled()
    window.tabs.setCurrentWidget(a)
    window.menus["edit.undo"].trigger()
    assert a.doc.field("summary") == old and b.doc.field("summary") == old
    assert window.menus["edit.redo"].isEnabled()
    window.menus["edit.redo"].trigger()
    assert a.doc.field("summary") == "a running median"


# ----------------------------------------------------------------------------- catalog
@pytest.mark.slow
def test_catalog_groups_and_double_click_on_a_card_title(qtbot, window, tmp_path):
    qtbot.waitUntil(lambda: "user/demo/windowed_median@1" in window.catalog.cards, timeout=90_000)
    cat = window.catalog
    broken = [i for i, c in cat.cards.items() if "deliberately broken" in c.data["summary"] or "first_draft" in i]
    assert len(broken) >= 6
    assert all(cat.group_of_card(i) == "broken" for i in broken)
    assert cat.group_of_card("user/demo/windowed_median@1") == "example"
    assert not any(str(EXAMPLES.resolve()) in c.data["path"] for i, c in cat.cards.items()
                   if cat.group_of_card(i) == "user")
    assert all(cat.group_of_card(i) == "builtin" for i in cat.cards if i.startswith("core/"))
    # an op the user makes is under My ops
    window.new_op("windowed_median", tmp_path, "mine", "me")
    qtbot.waitUntil(lambda: "user/me/mine@1" in cat.cards, timeout=90_000)
    assert cat.group_of_card("user/me/mine@1") == "user"
    # double-clicking a card's title opens the op (it used to select the text)
    card = cat.cards["user/demo/windowed_median_composite@1"]
    cat.tree.scrollToItem(next(it for it in cat.card_items() if cat.tree.itemWidget(it, 0) is card))
    qtbot.mouseDClick(card.title, Qt.MouseButton.LeftButton, pos=QPoint(10, card.title.height() // 2))
    assert window.current() is not None
    assert window.current().doc.field("id") == "user/demo/windowed_median_composite@1"


# ----------------------------------------------------------------------------- small widgets
def test_progress_bar_is_busy_until_the_corpus_size_is_known(qtbot):
    from studio.app.panels.conformance import ConformancePanel
    p = ConformancePanel(8)
    qtbot.addWidget(p)
    p.show()
    assert not p.progress.isTextVisible()
    old = QProgressBar()                                      # control: what it showed before
    old.setFormat("%v / %m cases")
    old.setValue(0)
    assert old.text() == "0 / 100 cases"
    p.started()
    assert p.progress.maximum() == 0 and not p.progress.isTextVisible()     # indeterminate
    p.on_progress(0, 0)                                       # a report without a size changes nothing
    assert p.progress.maximum() == 0
    p.on_progress(12, 354)
    assert p.progress.isTextVisible() and p.progress.text() == "12 / 354 cases"


def test_remove_with_nothing_selected_removes_nothing(qtbot):
    from studio.app.cells.tables import RowTable
    t = RowTable([("name", None), ("dtype", ["f32", "u32"])], defaults=["x", "f32"])
    qtbot.addWidget(t)
    t.show()
    t.set_rows([["a", "f32"], ["b", "u32"], ["c", "f32"]])
    t.table.clearSelection()
    t._remove()
    qtbot.mouseClick(t.remove_button, Qt.MouseButton.LeftButton)
    assert [r[0] for r in t.rows()] == ["a", "b", "c"]
    t.table.selectRow(1)
    qtbot.mouseClick(t.remove_button, Qt.MouseButton.LeftButton)
    assert [r[0] for r in t.rows()] == ["a", "c"]


CONTROLS = (QAbstractButton, QComboBox, QLineEdit, QAbstractSpinBox, QProgressBar)


def controls_without_tooltips(root: QWidget, *, hidden_too: bool = False) -> list[str]:
    """Every visible control under ``root`` (``hidden_too``: every one) whose toolTip() is empty or
    only repeats the control's own text (a QLineEdit inside a combo box or spin box belongs to it;
    the tab bar's and dock's own buttons are Qt's)."""
    out = []
    for w in root.findChildren(QWidget):
        if not isinstance(w, CONTROLS) or not (hidden_too or w.isVisibleTo(root)):
            continue
        parent = w.parentWidget()
        if isinstance(w, QLineEdit) and isinstance(parent, (QComboBox, QAbstractSpinBox)):
            continue
        if w.objectName().startswith("qt_") or type(w).__name__ in ("QTabBar", "CloseButton"):
            continue
        own = w.text() if hasattr(w, "text") and callable(w.text) else ""
        tip = w.toolTip().strip()
        if not tip or (own.strip() and tip.lower() == own.strip().lower()):
            from studio.app.cells.base import Cell
            p, cell = w, None
            while p is not None and cell is None:
                cell = p if isinstance(p, Cell) else None
                p = p.parentWidget()
            text = w.text() if hasattr(w, "text") and callable(w.text) else ""
            out.append(f"{type(w).__name__} {w.objectName() or text!r} in {getattr(cell, 'title', '—')}")
    return out


CONTRACT_CELLS = ("op", "signature", "bindings", "tolerance", "backward", "reference", "kernel", "manifest")


@pytest.mark.slow
def test_every_control_has_a_tooltip(qtbot, window):
    from studio.app.cells.tables import RowTable
    assert controls_without_tooltips(window) == []              # the Welcome page, catalog, toolbar
    view = window.open_story()
    qtbot.waitUntil(lambda: len(window.catalog.cards) > 0, timeout=90_000)
    notebook = view.notebook
    for c in notebook.cells.values():
        c.set_expanded(True)
    window.menus["edit.find"].trigger()
    assert controls_without_tooltips(window) == []    # every cell, the "go to" box, the find bar, panels, docks
    # controls made later: a row added in every table (inputs, params, relations, outputs, bindings,
    # vjp rules) brings its own editors, and they carry their column's tooltip
    tables = [t for k in CONTRACT_CELLS for t in notebook.cell(k).findChildren(RowTable)]
    assert len(tables) == 6
    for t in tables:
        rows = t.table.rowCount()
        qtbot.mouseClick(t.add_button, Qt.MouseButton.LeftButton)
        assert t.table.rowCount() == rows + 1
        r = t.table.rowCount() - 1
        for c in range(t.table.columnCount()):
            w = t.table.cellWidget(r, c)
            tip = w.toolTip() if w is not None else t.table.item(r, c).toolTip()
            assert tip.strip() and tip == t.table.horizontalHeaderItem(c).toolTip(), (t.add_button.text(), c)
    assert controls_without_tooltips(window) == []
    # the contract cells' controls shown only sometimes (ulp's K, bound's C, the device VJP's fields)
    for k in CONTRACT_CELLS:
        assert controls_without_tooltips(notebook.cell(k), hidden_too=True) == [], k
    window.open_workflow(WORKFLOW)
    assert controls_without_tooltips(window) == []
    bare = QWidget()                                   # controls: the walk finds a bare control, and one
    qtbot.addWidget(bare)                              # whose tooltip only repeats its label
    QLineEdit(bare)
    echo = QPushButton("Run", bare)
    echo.setToolTip("run")
    assert len(controls_without_tooltips(bare)) == 2


# ----------------------------------------------------------------------------- remembered state
@pytest.mark.slow
def test_geometry_docks_and_tabs_are_restored_on_restart(qtbot, pkg_copy, _isolated_home):
    pkg = pkg_copy(name="kept")
    first = make_window(qtbot)
    assert Path(first.settings.fileName()).resolve().is_relative_to(Path(_isolated_home).resolve())
    first.open_path(pkg)
    first.open_workflow(WORKFLOW)
    first.open_story()
    first.tabs.setCurrentIndex(1)
    first.resize(777, 711)                                          # inside the offscreen screen (800 × 800)
    qtbot.wait(50)
    size = (first.width(), first.height())
    first.problems_dock.close()
    first.close()                                                  # closeEvent: remembers, then shuts down
    assert (Path(_isolated_home) / "studio.ini").is_file()

    second = make_window(qtbot)
    try:
        assert second.state.restoring and second.tabs.count() == 3          # placeholders first, then filled in
        qtbot.waitUntil(lambda: not second.state.restoring, timeout=30_000)
        assert abs(second.width() - size[0]) <= 8 and abs(second.height() - size[1]) <= 8, (second.size(), size)
        assert size[1] != 900                                       # (not the default size)
        assert not second.problems_dock.isVisible() and second.catalog_dock.isVisible()
        titles = [second.tabs.tabText(i) for i in range(second.tabs.count())]
        assert len(titles) == 3 and titles[1].startswith("⚙")
        assert second.tabs.currentIndex() == 1
        assert second.views[0].doc.path.resolve() == pkg.resolve()
    finally:
        dispose(second)
    # control: without restoring, none of it comes back
    third = make_window(qtbot, restore_session=False)
    try:
        assert third.tabs.count() == 1 and third.tabs.widget(0) is third.welcome
        assert third.problems_dock.isVisible()
    finally:
        dispose(third)
