"""The Studio's main window: the catalog, a notebook per open op, the problems panel; the menus
(File, Edit, View, Run, Tools, Help), Ctrl+Enter / Shift+Enter to run a cell, the Welcome page when
no tab is open, light and dark themes, and the window's state remembered across restarts."""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QIcon, QKeySequence, QUndoGroup
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ..engine.context import Context
from ..engine.contract.catalog import Catalog, user_ops_dir
from ..engine.errors import StudioError
from ..engine.resources import ICON
from .autosave import AutosaveStore
from .background import Background
from .catalog_panel import CatalogPanel
from .document_view import DocumentView
from .documents import create_from_template, open_package, read_folder
from .menus import FindBar, ShortcutsDialog, current_cell, focus_cell, next_cell, run_cell
from .model import OpDocument
from .new_op import NewOpDialog
from .problems import ProblemsPanel
from .settings import settings_store
from .theme import THEMES, ThemeManager
from .welcome import STORY_OP, WelcomePage
from .worker_bridge import DeviceWorkers

DOCS_URL = "https://github.com/scellis/scellis-studio/blob/main/docs/studio.md"
RUN_KEYS = {(Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier): False,
            (Qt.Key.Key_Enter, Qt.KeyboardModifier.ControlModifier): False,
            (Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier): True,
            (Qt.Key.Key_Enter, Qt.KeyboardModifier.ShiftModifier): True}


class MainWindow(QMainWindow):
    def __init__(self, *, workers: DeviceWorkers | None = None, store: AutosaveStore | None = None,
                 ctx: Context | None = None, offer_recovery: bool = True, restore_session: bool = True):
        """``ctx``: the GUI process's Context (trust store, catalog); one is opened when not given.
        Device work never uses it: that runs in the device worker, with the worker's own.
        ``restore_session``: reopen the tabs, geometry, docks and theme of the last session
        (studio/app/settings.py: ``$SCELLIS_HOME/studio.ini``)."""
        super().__init__()
        # Background threads of this process (file writes, SPDX checks) hand the GIL back to the event
        # loop within 1 ms instead of Python's default 5 ms: a paint that calls into Python dozens of
        # times would otherwise wait that long at each call.
        sys.setswitchinterval(0.001)
        self.setWindowTitle("Scellis Studio")
        if ICON.is_file():
            self.setWindowIcon(QIcon(str(ICON)))
        self.background = Background(parent=self)
        self.workers = workers or DeviceWorkers(parent=self)
        self.store = store or AutosaveStore()
        self.profile: dict | None = None
        from .paths import recent_packages
        self.extra_roots: list[Path] = recent_packages()
        self._own_ctx = ctx is None
        self.ctx = ctx or Context.open(self.extra_roots)
        self.views: list[DocumentView] = []
        self.settings = settings_store()
        self.theme = ThemeManager(parent=self)
        self.undo_group = QUndoGroup(self)
        self._last_editor: dict[int, QPlainTextEdit] = {}        # id(view) -> the code editor last focused there

        self.tabs = QTabWidget()
        self.tabs.setObjectName("documents")
        self.tabs.setTabsClosable(True)
        self.tabs.setDocumentMode(True)
        self.tabs.setMovable(True)
        self.tabs.tabCloseRequested.connect(lambda i: self.close_view(self.tabs.widget(i)))
        self.welcome = WelcomePage()
        self.welcome.storyRequested.connect(self.open_story)
        self.welcome.newRequested.connect(self.new_op_dialog)
        self.welcome.openRequested.connect(self.open_dialog)
        self.welcome.openWorkflowRequested.connect(self.open_workflow_dialog)
        self.welcome.recentRequested.connect(self.open_path)
        self.welcome.set_recent(self.extra_roots)
        self.find_bar = FindBar(self.find_target)
        central = QWidget()
        clay = QVBoxLayout(central)
        clay.setContentsMargins(0, 0, 0, 0)
        clay.setSpacing(0)
        clay.addWidget(self.tabs, 1)
        clay.addWidget(self.find_bar)
        self.setCentralWidget(central)
        self._show_welcome()

        self.view_panels: list[QAction] = []
        self.catalog = CatalogPanel()
        self.catalog.openRequested.connect(self.open_path)
        self.problems = ProblemsPanel()
        self.problems.activated.connect(self._jump)
        self._actions()
        dock = QDockWidget("Catalog", self)
        dock.setObjectName("catalog_dock")
        dock.setWidget(self.catalog)
        self.catalog_dock = self.add_dock(dock, Qt.DockWidgetArea.LeftDockWidgetArea, "Ctrl+Shift+C")
        pdock = QDockWidget("Problems", self)
        pdock.setObjectName("problems_dock")
        pdock.setWidget(self.problems)
        self.problems_dock = self.add_dock(pdock, Qt.DockWidgetArea.BottomDockWidgetArea, "Ctrl+Shift+M")
        self.tabs.currentChanged.connect(lambda _i: self._current_changed())

        self.gpu_label = QLabel("GPU: starting the device worker…")
        self.busy_label = QLabel("")
        self.statusBar().addPermanentWidget(self.busy_label)
        self.statusBar().addPermanentWidget(self.gpu_label)
        self.gpu_label.setToolTip("the GPU the device worker runs on, and this machine's GPU profile "
                                  "(receipts are scoped to it)")
        self.busy_label.setToolTip("the device worker is running a job")
        self.workers.busyChanged.connect(lambda b: self.busy_label.setText("● device busy" if b else ""))
        self.resize(1400, 900)
        restored = restore_session and self.restore_window_state()
        if not restored:
            QTimer.singleShot(0, lambda: (self.resizeDocks([pdock], [140], Qt.Orientation.Vertical),
                                          self.resizeDocks([dock], [360], Qt.Orientation.Horizontal)))
        self._keys = _RunKeys(self)
        QApplication.instance().installEventFilter(self._keys)
        QApplication.instance().focusChanged.connect(self._focus_changed)
        self._ask_profile()
        self.refresh_catalog()
        self.background.run(self.ctx.trust.product_hashes)    # warm: judging an opened package's trust hashes these
        if offer_recovery:
            QTimer.singleShot(0, self.offer_recovery)
        if restore_session:
            self.restore_tabs()
        self._current_changed()
        # --- extensions (publish, learner, shard): one line each below ---
        from .publish import install_publish; install_publish(self)   # noqa: E702 - the Publish menu
        from .learner_view import install_learner; install_learner(self)   # noqa: E702 - the Learner panel
        from .shard_view import install_shard; install_shard(self)   # noqa: E702 - the Sharding panel

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

    def _tools_watch(self) -> QObject:
        window = self

        class Watch(QObject):
            def eventFilter(self, obj, event) -> bool:  # noqa: N802
                if event.type() in (QEvent.Type.ActionAdded, QEvent.Type.ActionRemoved):
                    QTimer.singleShot(0, lambda: window.tools_menu.menuAction().setVisible(
                        bool(window.tools_menu.actions())))
                return False
        return Watch(self)

    def add_dock(self, dock: QDockWidget, area=Qt.DockWidgetArea.RightDockWidgetArea,
                 shortcut: str | None = None) -> QDockWidget:
        """Add a dock panel that View ▸ Panels can bring back after it was closed, and whose place is
        remembered (other features' panels use this too: /tmp/notes/studio-shell-api.md)."""
        if not dock.objectName():
            dock.setObjectName(dock.windowTitle().lower().replace(" ", "_") + "_dock")
        if dock.toolTip() == "":
            dock.setToolTip(dock.windowTitle())
        self.addDockWidget(area, dock)
        toggle = dock.toggleViewAction()
        toggle.setText(dock.windowTitle().split(" — ")[0])
        if shortcut:
            toggle.setShortcut(QKeySequence(shortcut))
        toggle.setToolTip(f"show or hide the {toggle.text()} panel")
        self.panels_menu.addAction(toggle)
        self.view_panels.append(toggle)
        return dock

    def current(self) -> DocumentView | None:
        w = self.tabs.currentWidget()
        return w if isinstance(w, DocumentView) else None

    def _current_changed(self) -> None:
        view = self.current()
        stack = getattr(view, "undo_stack", None) if view is not None else None
        if stack is not None and stack not in self.undo_group.stacks():
            self.undo_group.addStack(stack)
        self.undo_group.setActiveStack(stack)
        for a in (self.act_save, self.act_save_as, self.act_check, self.act_conform, self.act_gradcheck,
                  self.act_run, self.act_run_cell, self.act_run_advance, self.act_find, self.act_find_next,
                  self.act_find_prev, self.act_goto):
            a.setEnabled(view is not None)
        self.act_close.setEnabled(self.tabs.currentWidget() is not self.welcome and self.tabs.count() > 0)
        if view is None and self.find_bar.isVisible():
            self.find_bar.setVisible(False)
        self._show_problems()

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

    def open_story(self) -> DocumentView | None:
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

    # ------------------------------------------------------------------ documents
    def add_document(self, doc: OpDocument, *, authored: bool | None = None) -> DocumentView:
        view = DocumentView(doc, self.workers, self.background, self.store, ctx=self.ctx, authored=authored)
        self.views.append(view)
        view.problemsChanged.connect(lambda v, _p: self._show_problems() if v is self.current() else None)
        view.catalogChanged.connect(self.refresh_catalog)
        stack = getattr(view, "undo_stack", None)
        if stack is not None:
            self.undo_group.addStack(stack)
        self._hide_welcome()
        i = self.tabs.addTab(view, self._tab_title(doc))
        self.tabs.setTabToolTip(i, str(doc.path) if doc.path else "not saved yet")
        doc.dirtyChanged.connect(lambda _d: self._retitle(view))
        doc.changed.connect(lambda k, _o: self._retitle(view) if k == "field:id" else None)
        self.tabs.setCurrentIndex(i)
        return view

    def _tab_title(self, doc: OpDocument) -> str:
        name = str(doc.field("id") or "untitled").split("/")[-1]
        return name + (" ●" if doc.dirty else "")

    def _retitle(self, view: DocumentView) -> None:
        i = self.tabs.indexOf(view)
        if i >= 0:
            self.tabs.setTabText(i, self._tab_title(view.doc))

    def new_op(self, template: str, folder: str | Path, name: str, author: str = "you", **options) -> DocumentView:
        """``options``: create_from_template's license, visibility, summary (the dialog's ``options()``)."""
        root = create_from_template(template, folder, name, author, ctx=self.ctx, **options)    # authored here
        doc = open_package(root)
        self._remember(root)
        view = self.add_document(doc, authored=True)
        self.refresh_catalog()
        return view

    def new_op_dialog(self) -> None:
        dlg = NewOpDialog(self, folder=str(user_ops_dir()))
        if dlg.exec():
            try:
                self.new_op(*dlg.values(), **dlg.options())
            except StudioError as e:
                self.error(e)

    def open_path(self, path: str | Path) -> DocumentView | None:
        path = Path(path)
        for v in self.views:
            if v.doc.path and v.doc.path.resolve() == path.resolve():
                self.tabs.setCurrentWidget(v)
                return v
        try:
            doc = open_package(path)
        except StudioError as e:
            self.error(e)
            return None
        view = self.add_document(doc)
        self._remember(path)
        if not view.session.runnable:
            self.statusBar().showMessage(f"{doc.title}: its code is not trusted here, so nothing of it runs "
                                         "until you use Trust", 10000)
        return view

    def open_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open op package (a folder with op.toml)")
        if path:
            self.open_path(path)

    def open_workflow(self, path: str | Path):
        """A workflow notebook tab for the .toml at ``path`` (studio/app/workflow_view.py)."""
        from .workflow_view import WorkflowView
        try:
            view = WorkflowView(path, self.workers, ctx=self.ctx)
        except StudioError as e:
            self.error(e)
            return None
        self._hide_welcome()
        i = self.tabs.addTab(view, f"⚙ {view.wf.name}")
        self.tabs.setTabToolTip(i, str(view.path))
        self.tabs.setCurrentIndex(i)
        return view

    def open_workflow_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open workflow", "", "Workflow (*.toml)")
        if path:
            self.open_workflow(path)

    def save_current(self, ask: bool = False, folder: str | Path | None = None) -> Path | None:
        view = self.current()
        if view is None:
            return None
        if folder is None and (ask or view.doc.path is None or view.doc.read_only):
            folder = QFileDialog.getExistingDirectory(self, "Save op package into folder")
            if not folder:
                return None
        try:
            path = view.save(folder)
        except (StudioError, OSError) as e:
            self.error(e if isinstance(e, StudioError) else StudioError(str(e)))
            return None
        self.statusBar().showMessage(f"saved {path}", 5000)
        self._remember(path)
        return path

    def _remember(self, folder: Path) -> None:
        """Keep the package in My ops across sessions (the catalog is re-read in the worker)."""
        from .paths import remember_package
        folder = Path(folder)
        if any(folder.resolve().is_relative_to(r.resolve()) for r in Catalog.default().roots):
            return                               # the catalog reads these folders anyway
        if all(folder.resolve() != r.resolve() for r in self.extra_roots):
            self.extra_roots.append(folder)
        self.background.run(lambda: remember_package(folder), ordered=True)

    def close_view(self, view, *, discard: bool | None = None) -> bool:
        from .workflow_view import WorkflowView
        if isinstance(view, WorkflowView):
            if view.job is not None and view.job.active:
                self.workers.cancel(view.job)
            self.tabs.removeTab(self.tabs.indexOf(view))
            view.deleteLater()
            self._show_welcome()
            return True
        if not isinstance(view, DocumentView):
            return False
        if view.doc.dirty and discard is None:
            ans = QMessageBox.question(self, "Unsaved changes", f"Save {view.doc.title} before closing?",
                                       QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard |
                                       QMessageBox.StandardButton.Cancel)
            if ans == QMessageBox.StandardButton.Cancel:
                return False
            if ans == QMessageBox.StandardButton.Save:
                self.tabs.setCurrentWidget(view)
                if self.save_current() is None:
                    return False
        view.close()
        self.views.remove(view)
        stack = getattr(view, "undo_stack", None)
        if stack is not None and stack in self.undo_group.stacks():
            self.undo_group.removeStack(stack)
        self._last_editor.pop(id(view), None)
        self.tabs.removeTab(self.tabs.indexOf(view))
        view.deleteLater()
        self._show_welcome()
        self._current_changed()
        return True

    def trust_current(self) -> None:
        view = self.current()
        if view is None or view.session.runnable:
            return
        ans = QMessageBox.question(self, "Trust this code?",
                                   f"{view.doc.title} was not written on this machine. Trusting it lets its Python "
                                   "reference run here (in a confined process). Trust this exact content?")
        if ans == QMessageBox.StandardButton.Yes:
            view.session.trust_now()
            view.checker.check_now()
            self._show_problems()

    # ------------------------------------------------------------------ recovery
    def offer_recovery(self) -> list[DocumentView]:
        entries = self.store.orphans()
        if not entries or not self.ask_recovery(entries):
            for e in entries:
                self.store.set_aside(e)
            return []
        restored = []
        for e in entries:
            doc = OpDocument(e.files, Path(e.package) if e.package else None, binary=e.binary,
                             saved=_on_disk(e.package), doc_id=e.doc_id)
            view = self.add_document(doc)
            view.session.autosave_now()
            restored.append(view)
        return restored

    def ask_recovery(self, entries) -> bool:
        names = "\n".join(f"• {e.title}" for e in entries)
        return QMessageBox.question(self, "Restore unsaved work?",
                                    f"Scellis Studio did not close cleanly. Restore these documents?\n\n{names}"
                                    ) == QMessageBox.StandardButton.Yes

    # ------------------------------------------------------------------ catalog, problems, profile
    def refresh_catalog(self) -> None:
        """Re-read the catalog in the device worker (the ``catalog`` request, see catalog_scan.py)."""
        roots = [str(r) for r in self.extra_roots]
        pid = self.profile.get("id") if self.profile else None
        job = self.workers.submit("edit", "catalog", supersede="catalog", roots=roots, profile_id=pid)
        job.succeeded.connect(lambda cards: self.catalog.set_cards(cards, pid))
        job.failed.connect(lambda e: self.catalog.status.setText(f"catalog: {getattr(e, 'message', e)}"))

    def _ask_profile(self) -> None:
        job = self.workers.submit("edit", "profile")
        job.succeeded.connect(self._got_profile)
        job.failed.connect(lambda e: self.gpu_label.setText(f"GPU: unavailable — {getattr(e, 'message', e)}"))

    def _got_profile(self, prof) -> None:
        self.profile = prof if isinstance(prof, dict) else {"id": str(prof)}
        adapter = self.profile.get("adapter", {})
        self.gpu_label.setText(f"GPU: {adapter.get('device', '?')} [{adapter.get('backend_type', '')}] · "
                               f"profile {self.profile.get('id')}")
        self.refresh_catalog()

    def _show_problems(self) -> None:
        view = self.current()
        self.act_trust.setEnabled(view is not None and not view.session.runnable)
        self.problems.set_problems(view.problems if view else [])
        self.problems_dock.setWindowTitle(f"Problems — {self.problems.summary()}" if view else "Problems")

    def _jump(self, problem) -> None:
        view = self.current()
        if view is not None and problem is not None:
            view.notebook.jump(problem)

    def error(self, e: StudioError) -> None:
        self.statusBar().showMessage(e.message, 10000)
        QMessageBox.warning(self, "Scellis Studio", e.format())

    # ------------------------------------------------------------------ remembered state
    def save_window_state(self) -> None:
        """Geometry, docks and toolbar, open tabs (saved packages and workflows, in order) and the
        current one, the theme — into the Studio's settings (settings.py)."""
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        tabs = []
        for i in range(self.tabs.count()):
            w = self.tabs.widget(i)
            if isinstance(w, DocumentView) and w.doc.path is not None:
                tabs.append("package:" + str(Path(w.doc.path).resolve()))
            elif hasattr(w, "wf") and hasattr(w, "path"):
                tabs.append("workflow:" + str(w.path))
        s.setValue("session/tabs", tabs)
        s.setValue("session/current", max(self.tabs.currentIndex(), 0))
        s.setValue("theme", self.theme.choice)
        s.sync()

    def restore_window_state(self) -> bool:
        s = self.settings
        theme = s.value("theme", "system")
        if theme != "system":
            self.set_theme(str(theme))
        geo, state = s.value("window/geometry"), s.value("window/state")
        ok = bool(geo is not None and self.restoreGeometry(geo))
        if state is not None:
            ok = self.restoreState(state) and ok
        return ok

    def restore_tabs(self) -> list:
        """Reopen the tabs of the last session (those whose folder or file still exists)."""
        tabs = self.settings.value("session/tabs") or []
        if isinstance(tabs, str):
            tabs = [tabs]
        opened = []
        for t in tabs:
            kind, _, path = str(t).partition(":")
            if kind == "package" and (Path(path) / "op.toml").is_file():
                opened.append(self.open_path(path))
            elif kind == "workflow" and Path(path).is_file():
                opened.append(self.open_workflow(path))
        cur = int(self.settings.value("session/current", 0) or 0)
        if opened and 0 <= cur < self.tabs.count():
            self.tabs.setCurrentIndex(cur)
        return [v for v in opened if v is not None]

    def changeEvent(self, event) -> None:  # noqa: N802
        """A new application palette (the desktop switched to dark, or a theme was chosen): the style
        sheet's meaning colours and every plot follow it."""
        if event.type() == QEvent.Type.ApplicationPaletteChange and not getattr(self, "_restyling", False):
            from .theme import refresh
            self._restyling = True
            try:
                refresh()
            finally:
                self._restyling = False
        super().changeEvent(event)

    def closeEvent(self, event) -> None:  # noqa: N802
        self.save_window_state()
        for view in list(self.views):
            if not self.close_view(view):
                event.ignore()
                return
        self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self._keys)      # (focusChanged goes with the window: PySide drops it)
        self.workers.close()
        self.background.wait(5)
        self.background.close()
        if self._own_ctx:
            self.ctx.close()


class _RunKeys(QObject):
    """Ctrl+Enter and Shift+Enter in a document run its current cell — even inside a code editor,
    which would otherwise take Shift+Enter as a line break (a text editor claims plain and Shift
    keys before the window's shortcuts see them)."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
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


def _on_disk(package: str | None) -> dict[str, str] | None:
    if not package:
        return None
    try:
        return read_folder(Path(package))[0]
    except (StudioError, OSError):
        return {}
