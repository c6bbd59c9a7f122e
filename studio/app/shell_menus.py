"""The main window's menus and what they act on (a mixin of MainWindow, studio/app/window.py):
File, Edit (undo/redo of the current document, find in the current code cell), View (every
dock panel, the toolbar, the theme), Run (Ctrl+Enter / Shift+Enter: run the current cell, see
menus.py), Tools (for features that add their own items), Help (documentation, shortcuts, About);
the Welcome page's actions; ``add_dock`` for panels that must come back after being closed."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QApplication,
    QDockWidget,
    QMessageBox,
    QPlainTextEdit,
    QWidget,
)

from .fitting import scrolled

TOOL_DOCK_SHARE = 0.36         # of the window's width, a tool dock's when it opens
NOTEBOOK_ROOM = 620            # the notebook's least width beside the docks (its widest cell, Conformance, ~600)
from .menus import ShortcutsDialog, current_cell, focus_cell, next_cell, run_cell
from .theme import THEMES
from .welcome import STORY_OP

DOCS_URL = "https://github.com/scellis/scellis-studio/blob/main/docs/studio.md"
RUN_KEYS = {(Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier): False,
            (Qt.Key.Key_Enter, Qt.KeyboardModifier.ControlModifier): False,
            (Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier): True,
            (Qt.Key.Key_Enter, Qt.KeyboardModifier.ShiftModifier): True}


class MenusMixin:
    """Needs the window's ``tabs``, ``welcome``, ``find_bar``, ``undo_group``, ``theme``, ``settings``,
    ``views`` and its document methods (``open_path``, ``new_op_dialog``, …)."""

    # ------------------------------------------------------------------ actions
    def _actions(self) -> None:
        def act(text, slot, shortcut=None, menu=None, tip=None):
            a = QAction(text, self)
            if shortcut:
                a.setShortcuts([QKeySequence(k) for k in shortcut] if isinstance(shortcut, (list, tuple))
                               else [QKeySequence(shortcut)])
            a.triggered.connect(slot)
            keys = a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            a.setToolTip((tip or text.rstrip("…")) + (f" ({keys})" if keys else ""))
            a.setStatusTip(tip or text.rstrip("…"))
            menu.addAction(a)
            return a
        bar = self.menuBar()
        m = self.file_menu = bar.addMenu("&File")
        self.act_new = act("New op from template…", self.new_op_dialog, "Ctrl+N", m,
                           "start a new op from a template (elementwise, windowed, reduction, stencil)")
        self.act_open = act("Open package…", self.open_dialog, "Ctrl+O", m, "open an op package (a folder with op.toml)")
        self.act_open_workflow = act("Open workflow…", self.open_workflow_dialog, None, m,
                                     "open a workflow file as a notebook of steps")
        self.act_story = act("Open the story's op", self.open_story, None, m,
                             "open the windowed median, the op the tutorial follows")
        self.recent_menu = m.addMenu("Open recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        m.addSeparator()
        self.act_save = act("Save", lambda: self.save_current(), "Ctrl+S", m, "save the current op package")
        self.act_save_as = act("Save As…", lambda: self.save_current(ask=True), "Ctrl+Shift+S", m,
                               "save the current op into another folder")
        self.act_close = act("Close tab", lambda: self.close_view(self.tabs.currentWidget()), "Ctrl+W", m,
                             "close the current tab")
        m.addSeparator()
        self.act_quit = act("Quit", self.close, "Ctrl+Q", m, "quit Scellis Studio")

        e = self.edit_menu = bar.addMenu("&Edit")
        self.act_undo = self.undo_group.createUndoAction(self, "&Undo")
        self.act_undo.setShortcuts(QKeySequence.StandardKey.Undo)
        self.act_undo.setToolTip("undo the last edit of this document (forms and text alike)")
        self.act_redo = self.undo_group.createRedoAction(self, "&Redo")
        self.act_redo.setShortcuts(QKeySequence.StandardKey.Redo)
        self.act_redo.setToolTip("redo the edit undone last")
        e.addAction(self.act_undo)
        e.addAction(self.act_redo)
        e.addSeparator()
        self.act_find = act("Find…", self.find_bar_open, QKeySequence.StandardKey.Find, e,
                            "find text in the current code cell")
        self.act_find_next = act("Find next", lambda: self._find(True), QKeySequence.StandardKey.FindNext, e,
                                 "the next match in the code cell")
        self.act_find_prev = act("Find previous", lambda: self._find(False), QKeySequence.StandardKey.FindPrevious, e,
                                 "the previous match in the code cell")

        v = self.view_menu = bar.addMenu("&View")
        self.panels_menu = v.addMenu("Panels")
        v.addSeparator()
        self.theme_menu = v.addMenu("Theme")
        self.theme_actions = {}
        group = QActionGroup(self)
        for name in THEMES:
            a = QAction({"system": "Follow the system", "light": "Light", "dark": "Dark"}[name], self, checkable=True)
            a.setToolTip(f"{name} theme")
            a.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            group.addAction(a)
            self.theme_menu.addAction(a)
            self.theme_actions[name] = a
        self.theme_actions["system"].setChecked(True)
        v.addSeparator()
        self.act_goto = act("Go to cell…", self._goto_cell, "Ctrl+G", v, "jump to a cell of the notebook")

        r = self.run_menu = bar.addMenu("&Run")
        self.act_run_cell = act("Run cell", lambda: self.run_current_cell(advance=False), ["Ctrl+Return", "Ctrl+Enter"],
                                r, "run the current cell: conformance, gradcheck or run in those cells; a check "
                                   "elsewhere")
        self.act_run_advance = act("Run cell and advance", lambda: self.run_current_cell(advance=True),
                                   ["Shift+Return", "Shift+Enter"], r, "run the current cell, then go to the next one")
        r.addSeparator()
        self.act_check = act("Check now", lambda: self.current() and self.current().checker.check_now(), "Ctrl+B", r,
                             "parse, check and compile the document now")
        self.act_conform = act("Conformance", lambda: self.current() and self.current().conformance.run(), "F5", r,
                               "run conformance on the generated corpus")
        self.act_gradcheck = act("Gradcheck", lambda: self.current() and self.current().gradcheck.run(), "F6", r,
                                 "check the declared VJP against finite differences")
        self.act_run = act("Run on device", lambda: self.current() and self.current().runner.run(), "F7", r,
                           "run the op on the device on the Run cell's input")
        r.addSeparator()
        self.act_trust = act("Trust this package's code…", self.trust_current, None, r,
                             "let this package's Python reference run here (it was not written on this machine)")

        self.tools_menu = bar.addMenu("&Tools")
        self.tools_menu.installEventFilter(self._tools_watch())
        self.tools_menu.menuAction().setVisible(False)         # shown once a tool adds an action

        h = self.help_menu = bar.addMenu("&Help")
        self.act_docs = act("Documentation", self.open_docs, QKeySequence.StandardKey.HelpContents, h,
                            "open the Studio's documentation")
        self.act_shortcuts = act("Keyboard shortcuts", lambda: ShortcutsDialog(self).exec(), "Ctrl+/", h,
                                 "every keyboard shortcut")
        h.addSeparator()
        self.act_about = act("About Scellis Studio", self.about, None, h, "version, GPU, licence")

        tb = self.toolbar = self.addToolBar("Main toolbar")
        tb.setObjectName("main_toolbar")
        for a in (self.act_new, self.act_open, self.act_save, self.act_run_cell, self.act_trust):
            tb.addAction(a)
        tb.toggleViewAction().setToolTip("show or hide the main toolbar")
        self.panels_menu.addAction(tb.toggleViewAction())

    def _help_last(self) -> None:
        bar = self.menuBar()
        action = self.help_menu.menuAction()
        if bar.actions() and bar.actions()[-1] is not action:
            bar.removeAction(action)
            bar.addAction(action)

    def _tools_watch(self) -> QObject:
        window = self

        class Watch(QObject):
            def eventFilter(self, obj, event) -> bool:
                if event.type() in (QEvent.Type.ActionAdded, QEvent.Type.ActionRemoved):
                    QTimer.singleShot(0, lambda: window.tools_menu.menuAction().setVisible(
                        bool(window.tools_menu.actions())))
                return False
        return Watch(self)

    def add_dock(self, dock: QDockWidget, area=Qt.DockWidgetArea.RightDockWidgetArea,
                 shortcut: str | None = None, *, scroll: bool = True) -> QDockWidget:
        """Add a dock panel that View ▸ Panels can bring back after it was closed, and whose place is
        remembered. Its panel (``dock.panel``) scrolls inside the dock (``scroll``; fitting.py), so
        no panel raises the window's minimum width beyond the screen."""
        if not dock.objectName():
            dock.setObjectName(dock.windowTitle().lower().replace(" ", "_") + "_dock")
        if dock.toolTip() == "":
            dock.setToolTip(dock.windowTitle())
        panel = dock.widget()
        dock.panel = panel
        if scroll and panel is not None and not isinstance(panel, QAbstractScrollArea):
            dock.setWidget(scrolled(panel))       # it scrolls in the dock, never widens the window
        self.addDockWidget(area, dock)
        toggle = dock.toggleViewAction()
        toggle.setText(dock.windowTitle().split(" — ")[0])
        if shortcut:
            toggle.setShortcut(QKeySequence(shortcut))
        toggle.setToolTip(f"show or hide the {toggle.text()} panel")
        self.panels_menu.addAction(toggle)
        self.view_panels.append(toggle)
        return dock

    def add_tool_dock(self, title: str, name: str, panel, action: str, tip: str) -> QDockWidget:
        """A dock for a tool panel, hidden until Tools ▸ ``action`` shows it (the learner, the shard report)."""
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(panel(dock))
        self.add_dock(dock)
        dock.hide()
        act = self.tools_menu.addAction(action)
        act.setToolTip(tip)
        act.triggered.connect(lambda: self.show_tool_dock(dock))
        return dock

    def tool_dock_width(self) -> tuple[int, int]:
        """(the width a tool dock opens at, its least width), relative to the window: a third of it
        or so (280 to 560 px), never less than a fifth (at least 180 px), so its text is read, not
        clipped, at 1024 px as at 1600."""
        w = self.width()
        least = max(180, min(w // 5, 260))
        return max(least, min(max(280, int(w * TOOL_DOCK_SHARE)), 560, w // 2)), least

    def show_tool_dock(self, dock: QDockWidget) -> None:
        """Show a tool dock (Learner, Sharding, Card) at ``tool_dock_width``, the window keeping its
        size: the notebook gives way, the window never grows past where it was."""
        before = self.size()
        want, least = self.tool_dock_width()
        dock.widget().setMinimumWidth(least)
        if not dock.isFloating() and not dock.isVisible() and self._squeezes_the_notebook(dock, want):
            self.tabifyDockWidget(self.catalog_dock, dock)      # a tab beside the catalog: the notebook keeps its width
            want = max(want, self.catalog_dock.width())
        dock.show()
        dock.raise_()
        if dock.isFloating():
            return
        self.resizeDocks([dock], [want], Qt.Orientation.Horizontal)

        def settle() -> None:
            if self.isMaximized() or self.isFullScreen():
                return
            if self.width() > before.width() or self.height() > before.height():
                self.resize(before)
            self.resizeDocks([dock], [want], Qt.Orientation.Horizontal)
        QTimer.singleShot(0, settle)

    def _squeezes_the_notebook(self, dock: QDockWidget, want: int) -> bool:
        """Whether a third column ``want`` px wide would leave the notebook less than NOTEBOOK_ROOM
        (a 1024 px window with the catalog open); then the tool dock opens as a tab beside the
        catalog, where the catalog is docked and shown."""
        cat = self.catalog_dock
        if cat is dock or not cat.isVisible() or cat.isFloating():
            return False
        sides = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)
        beside = [d for d in self.findChildren(QDockWidget)
                  if d is not dock and d.isVisible() and not d.isFloating() and self.dockWidgetArea(d) in sides]
        # docks tabbed together share one column: the catalog's, counted once
        taken = cat.width() + sum(d.width() for d in beside if d is not cat and cat not in self.tabifiedDockWidgets(d))
        return self.width() - taken - want < NOTEBOOK_ROOM

    # ------------------------------------------------------------------ welcome, themes, help
    def _show_welcome(self) -> None:
        """The Welcome page takes the central area when no tab is open."""
        if self.tabs.count() == 0 and self.tabs.indexOf(self.welcome) < 0:
            from .paths import recent_packages
            self.welcome.set_recent(recent_packages())
            i = self.tabs.addTab(self.welcome, "Welcome")
            self.tabs.tabBar().setTabButton(i, self.tabs.tabBar().ButtonPosition.RightSide, None)
            self.tabs.setTabToolTip(i, "start here: the story's op, a new op, recent packages")

    def _hide_welcome(self) -> None:
        i = self.tabs.indexOf(self.welcome)
        if i >= 0:
            self.tabs.removeTab(i)

    def open_story(self):
        """The story's op (the windowed median the tutorial follows), one click from the Welcome page."""
        return self.open_path(STORY_OP)

    def set_theme(self, name: str) -> None:
        self.theme.apply(name)
        if name in self.theme_actions:
            self.theme_actions[name].setChecked(True)
        self.settings.setValue("theme", name)

    def open_docs(self) -> None:
        local = Path(__file__).resolve().parents[2] / "docs" / "studio.md"
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(local)) if local.is_file() else QUrl(DOCS_URL))

    def about(self) -> None:
        from importlib.metadata import PackageNotFoundError, version
        try:
            v = version("scellis-studio")
        except PackageNotFoundError:
            v = "source checkout"
        QMessageBox.about(self, "About Scellis Studio", about_text(v, self.gpu_label.text()))

    def _fill_recent(self) -> None:
        from .paths import recent_packages
        self.recent_menu.clear()
        for p in recent_packages()[:15]:
            a = self.recent_menu.addAction(f"{p.name} — {p}")
            a.setToolTip(str(p))
            a.triggered.connect(lambda _=False, path=p: self.open_path(path))
        if not self.recent_menu.actions():
            self.recent_menu.addAction("nothing opened yet").setEnabled(False)

    def _goto_cell(self) -> None:
        view = self.current()
        if view is not None:
            view.notebook.jump_box.setFocus(Qt.FocusReason.ShortcutFocusReason)
            view.notebook.jump_box.showPopup()

    # ------------------------------------------------------------------ running cells, find
    def run_current_cell(self, advance: bool = False) -> str | None:
        """Ctrl+Enter: run the cell holding the focus (menus.py says what that means per cell);
        Shift+Enter: run it, then move to the next cell. Returns what was done."""
        view = self.current()
        if view is None:
            return None
        key = current_cell(view, QApplication.focusWidget() or self.focusWidget())
        if key is None:
            return None
        done = run_cell(view, key)
        if advance:
            nxt = next_cell(view, key)
            if nxt is not None:
                focus_cell(view, nxt)
        return done

    def _focus_changed(self, _old, new) -> None:
        view = self.current()
        if view is not None and isinstance(new, QPlainTextEdit) and view.isAncestorOf(new):
            self._last_editor[id(view)] = new

    def find_target(self) -> QPlainTextEdit | None:
        """The code editor Find searches: the focused one, else the one focused last in this document,
        else the Kernel cell's."""
        view = self.current()
        if view is None:
            return None
        focus = QApplication.focusWidget() or self.focusWidget()
        if isinstance(focus, QPlainTextEdit) and view.isAncestorOf(focus):
            return focus
        last = self._last_editor.get(id(view))
        if last is not None and view.isAncestorOf(last):
            return last
        return getattr(view.notebook.cells.get("kernel"), "editor", None)

    def find_bar_open(self) -> None:
        if self.current() is not None:
            self.find_bar.open_bar()

    def _find(self, forward: bool) -> None:
        if not self.find_bar.isVisible():
            self.find_bar_open()
        self.find_bar.find(forward=forward)


class RunKeys(QObject):
    """Ctrl+Enter and Shift+Enter in a document run its current cell — even inside a code editor,
    which would otherwise take Shift+Enter as a line break (a text editor claims plain and Shift
    keys before the window's shortcuts see them)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window

    def eventFilter(self, obj, event) -> bool:
        if event.type() not in (QEvent.Type.KeyPress, QEvent.Type.ShortcutOverride):
            return False
        mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        advance = RUN_KEYS.get((event.key(), mods))
        if advance is None or not isinstance(obj, QWidget):
            return False
        view = self.window.current()
        if view is None or not view.isAncestorOf(obj):
            return False
        if event.type() == QEvent.Type.ShortcutOverride:
            event.accept()                   # ours: the KeyPress comes to this filter, not to a shortcut
            return True
        self.window.run_current_cell(advance=advance)
        return True


def about_text(version: str, gpu: str) -> str:
    return (f"<h3>Scellis Studio {version}</h3>"
            "<p>Write GPU compute ops as content — a contract, a Python reference, a WGSL kernel — and prove them "
            "right: conformance against the reference on a corpus the engine generates, receipts bound by hash to "
            "the kernel and scoped to this machine's GPU profile.</p>"
            f"<p>{gpu}</p><p>Apache-2.0 · Qt {_qt_version()} · pyqtgraph {_pg_version()}</p>")


def _qt_version() -> str:
    from PySide6 import __version__
    return __version__


def _pg_version() -> str:
    import pyqtgraph
    return pyqtgraph.__version__
