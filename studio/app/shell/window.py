"""The Studio's main window: the catalog, a notebook per open op, the problems panel; the menus
(File, Edit, View, Run, Tools, Help), Ctrl+Enter / Shift+Enter to run a cell, the Welcome page when
no tab is open, light and dark themes, and the window's state remembered across restarts."""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QIcon, QUndoGroup
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ...engine.context import Context
from ...engine.contract.catalog import Catalog, user_ops_dir
from ...engine.errors import StudioError
from ...engine.resources import ICON
from ...engine.services.requests import Kind
from .autosave import AutosaveStore
from ..bridge.background import Background
from ..tools.catalog_panel import CatalogPanel
from ..notebook.document_view import DocumentView
from ..notebook.documents import create_from_template, open_package
from ..widgets.fitting import ElidedLabel
from .actions import LEARNER_LAYOUT, SHARD_LAYOUT, TUNE_LAYOUT
from .docks import Docks
from .menus import CellCommands, FindBar
from ..notebook.model import OpDocument
from ..notebook.new_op import NewOpDialog
from ..notebook.problems import ProblemsPanel
from .recovery import Recovery
from .settings import settings_store
from .shell_menus import Menus, RunKeys, about_text  # noqa: F401 - about_text: the About box's text
from ..notebook.shipped import banner_text, copy_of, original_of, shipped_path
from ..widgets.theme import ThemeManager
from .welcome import FIRST_DRAFT, STORY_OP, WelcomePage
from .window_state import WindowState
from ..bridge.worker_bridge import DeviceWorkers


class MainWindow(QMainWindow):
    """Holds its parts: ``menus`` (shell_menus.py, built from actions.py), ``docks``, ``state`` (what
    it remembers, window_state.py), ``recovery``, ``cells`` (commands on the current cell, menus.py)."""
    tabsRestored = Signal(list)          # the restored session's views, once every tab is filled in

    def __init__(self, *, workers: DeviceWorkers | None = None, store: AutosaveStore | None = None,
                 ctx: Context | None = None, offer_recovery: bool = True, restore_session: bool = True):
        """``ctx``: the GUI process's Context (trust store, catalog); one is opened when not given.
        Device work never uses it: that runs in the device worker, with the worker's own.
        ``restore_session``: reopen the tabs, geometry, docks and theme of the last session
        (studio/app/shell/settings.py: ``$SCELLIS_HOME/studio.ini``)."""
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
        self.extra_workers: list[DeviceWorkers] = []       # features' own (publishing): closed with these
        self.store = store or AutosaveStore()
        self.profile = None          # the profile request's ProfileReport, once it answered
        from .paths import recent_packages
        self.extra_roots: list[Path] = [p for p in recent_packages() if original_of(p) is None]
        self._own_ctx = ctx is None
        self.ctx = ctx or Context.open(self.extra_roots)
        self.views: list[DocumentView] = []
        self.settings = settings_store()
        self.theme = ThemeManager(parent=self)
        self.undo_group = QUndoGroup(self)
        self.closing = False                 # closing its tabs on the way out: they are not forgotten
        self.cells = CellCommands(self)
        self.recovery = Recovery(self)

        self.tabs = QTabWidget()
        self.tabs.setObjectName("documents")
        self.tabs.setTabsClosable(True)
        self.tabs.setDocumentMode(True)
        self.tabs.setMovable(True)
        self.tabs.tabCloseRequested.connect(lambda i: self.close_view(self.tabs.widget(i)))
        self.welcome = WelcomePage()
        self.welcome.storyRequested.connect(self.open_story)
        self.welcome.firstDraftRequested.connect(lambda: self.open_path(FIRST_DRAFT))
        self.welcome.newRequested.connect(self.new_op_dialog)
        self.welcome.openRequested.connect(self.open_dialog)
        self.welcome.openWorkflowRequested.connect(lambda: self.state.open_workflow_dialog())
        self.welcome.recentRequested.connect(self.open_path)
        self.welcome.set_recent(self.extra_roots)
        self.find_bar = FindBar(self.cells.find_target)
        central = QWidget()
        clay = QVBoxLayout(central)
        clay.setContentsMargins(0, 0, 0, 0)
        clay.setSpacing(0)
        clay.addWidget(self.tabs, 1)
        clay.addWidget(self.find_bar)
        self.setCentralWidget(central)
        self.show_welcome()
        self.state = WindowState(self)           # (after the Welcome page: keeps the tabs from here on)

        self.catalog = CatalogPanel()
        self.catalog.openRequested.connect(self.open_path)
        self.problems = ProblemsPanel()
        self.problems.activated.connect(self._jump)
        self.menus = Menus(self)
        self.docks = Docks(self)
        self.catalog_dock = self.docks.add_panel("Catalog", "catalog_dock", self.catalog,
                                                 Qt.DockWidgetArea.LeftDockWidgetArea, "Ctrl+Shift+C")
        self.problems_dock = self.docks.add_panel("Problems", "problems_dock", self.problems,
                                                  Qt.DockWidgetArea.BottomDockWidgetArea, "Ctrl+Shift+M")
        self.tabs.currentChanged.connect(lambda _i: self._current_changed())

        self.gpu_label = ElidedLabel("GPU: starting the device worker…")
        self.busy_label = QLabel("")
        self.statusBar().addPermanentWidget(self.busy_label)
        self.statusBar().addPermanentWidget(self.gpu_label)
        self.gpu_label.setToolTip("the GPU the device worker runs on, and this machine's GPU profile "
                                  "(receipts are scoped to it)")
        self.busy_label.setToolTip("the device worker is running a job")
        self.workers.busyChanged.connect(self._show_busy)   # a method, not a lambda: it goes with the window
        self.resize(1400, 900)
        restored = restore_session and self.state.restore()
        if not restored:
            QTimer.singleShot(0, self, lambda: (
                self.resizeDocks([self.problems_dock], [140], Qt.Orientation.Vertical),
                self.resizeDocks([self.catalog_dock], [360], Qt.Orientation.Horizontal)))
        self._keys = RunKeys(self)
        QApplication.instance().installEventFilter(self._keys)
        QApplication.instance().focusChanged.connect(self.cells.focus_changed)
        self._ask_profile()
        self.refresh_catalog()
        self.background.run(self.ctx.trust.product_hashes)    # warm: judging an opened package's trust hashes these
        if offer_recovery:
            QTimer.singleShot(0, self, self.recovery.offer)
        if restore_session:
            self.state.restore_tabs()             # placeholders now; each tab filled in once the window is up
        self._current_changed()
        QTimer.singleShot(0, self, self.menus.help_last)          # Help stays the last menu, whatever features add
        from ..publish import install_publish; install_publish(self)   # noqa: E702 - extensions, one line each: Publish
        from ..tools.learner_view import install_learner; install_learner(self, LEARNER_LAYOUT)   # noqa: E702 - the Learner panel
        from ..tools.shard_view import install_shard; install_shard(self, SHARD_LAYOUT)   # noqa: E702 - the Sharding panel
        from ..panels.tune import install_tune; install_tune(self, TUNE_LAYOUT)   # noqa: E702 - the Tune panel

    def current(self) -> DocumentView | None:
        w = self.tabs.currentWidget()
        return w if isinstance(w, DocumentView) else None

    def _current_changed(self) -> None:
        view = self.current()
        stack = getattr(view, "undo_stack", None) if view is not None else None
        if stack is not None and stack not in self.undo_group.stacks():
            self.undo_group.addStack(stack)
        self.undo_group.setActiveStack(stack)
        self.menus.enable(document=view is not None,
                          closable=self.tabs.currentWidget() is not self.welcome and self.tabs.count() > 0)
        if view is None and self.find_bar.isVisible():
            self.find_bar.setVisible(False)
        self._show_problems()

    # ------------------------------------------------------------------ documents
    def show_welcome(self) -> None:
        self.welcome.show_in(self.tabs)           # when no tab is open

    def hide_welcome(self) -> None:
        self.welcome.leave(self.tabs)

    def open_story(self):
        """The story's op (the windowed median the tutorial follows), one click from the Welcome page."""
        return self.open_path(STORY_OP)

    def add_document(self, doc: OpDocument, *, authored: bool | None = None) -> DocumentView:
        view = DocumentView(doc, self.workers, self.background, self.store, ctx=self.ctx, authored=authored)
        self.views.append(view)
        view.problemsChanged.connect(lambda v, _p: self._show_problems() if v is self.current() else None)
        view.catalogChanged.connect(self.refresh_catalog)
        stack = getattr(view, "undo_stack", None)
        if stack is not None:
            self.undo_group.addStack(stack)
        self.hide_welcome()
        i = self.tabs.addTab(view, self._tab_title(doc))
        original = original_of(doc.path)
        self.tabs.setTabToolTip(i, (f"your copy of the shipped {original.name}, in your folder: {doc.path}"
                                    if original else str(doc.path) if doc.path else "not saved yet"))
        if original is not None:
            view.notebook.set_banner(banner_text(doc.path, original))
        doc.dirtyChanged.connect(lambda _d: self._retitle(view))
        doc.changed.connect(lambda k, _o: self._retitle(view) if k == "field:id" else None)
        self.tabs.setCurrentIndex(i)
        return view

    def _tab_title(self, doc: OpDocument) -> str:
        name = str(doc.field("id") or "untitled").split("/")[-1]
        copy = " (your copy)" if original_of(doc.path) is not None else ""
        return name + copy + (" ●" if doc.dirty else "")

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
        """Open the package at ``path``; a shipped one (a builtin, an example) opens as the user's
        editable copy in their folder (shipped.py): nothing is ever written into the install."""
        path = Path(path)
        if path.name == "op.toml":
            path = path.parent
        if shipped_path(path) is not None:
            try:
                path = copy_of(path)
            except (StudioError, OSError) as e:
                self.error(e if isinstance(e, StudioError) else StudioError(f"cannot copy {path}: {e}"))
                return None
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
        """A workflow notebook tab for the .toml at ``path`` (studio/app/tools/workflow_view.py)."""
        from ..tools.workflow_view import WorkflowView
        try:
            view = WorkflowView(path, self.workers, ctx=self.ctx, background=self.background)
        except StudioError as e:
            self.error(e)
            return None
        self.hide_welcome()
        i = self.tabs.addTab(view, f"⚙ {view.wf.name}")
        self.tabs.setTabToolTip(i, str(view.path))
        self.tabs.setCurrentIndex(i)
        return view

    def save_current(self, ask: bool = False, folder: str | Path | None = None) -> Path | None:
        view = self.current()
        if view is None:
            return None
        if folder is None and (ask or view.doc.path is None or view.doc.read_only or
                               shipped_path(view.doc.path) is not None):      # never into the install
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
        if original_of(folder) is None and all(folder.resolve() != r.resolve() for r in self.extra_roots):
            # (a copy of a shipped op is in the Recent list, not among the catalog's roots: it would
            # stand twice in the catalog beside the shipped one)
            self.extra_roots.append(folder)
        self.background.run(lambda: remember_package(folder), ordered=True)

    def close_view(self, view, *, discard: bool | None = None) -> bool:
        from ..tools.workflow_view import WorkflowView
        if isinstance(view, WorkflowView):
            if view.job is not None and view.job.active:
                self.workers.cancel(view.job)
            self.tabs.removeTab(self.tabs.indexOf(view))
            view.deleteLater()
            self.show_welcome()
            return True
        if self.state.close_placeholder(view):          # a tab closed before it was restored (window_state.py)
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
        self.cells.forget(view)
        self.tabs.removeTab(self.tabs.indexOf(view))
        view.deleteLater()
        self.show_welcome()
        self._current_changed()
        self.state.keep_tabs()
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

    # ------------------------------------------------------------------ catalog, problems, profile
    def refresh_catalog(self) -> None:
        """Re-read the catalog in the device worker (the ``catalog`` request, see catalog_scan.py)."""
        roots = [str(r) for r in self.extra_roots]
        pid = self.profile.id if self.profile else None
        job = self.workers.submit("edit", Kind.CATALOG, supersede="catalog", roots=roots, profile_id=pid)
        job.succeeded.connect(lambda report: self.catalog.set_cards(report, pid))
        job.failed.connect(self.catalog.scan_failed)

    def _ask_profile(self) -> None:
        job = self.workers.submit("edit", Kind.PROFILE)
        job.succeeded.connect(self._got_profile)
        job.failed.connect(lambda e: self.gpu_label.setText(f"GPU: unavailable — {getattr(e, 'message', e)}"))

    def _got_profile(self, prof) -> None:
        self.profile = prof
        self.gpu_label.setText(prof.label())
        self.refresh_catalog()

    def _show_problems(self) -> None:
        view = self.current()
        self.menus.enable(untrusted=view is not None and not view.session.runnable)
        self.problems.set_problems(view.problems if view else [])
        self.problems_dock.setWindowTitle(f"Problems — {self.problems.summary()}" if view else "Problems")

    def _jump(self, problem) -> None:
        view = self.current()
        if view is not None and problem is not None:
            view.notebook.jump(problem)

    def error(self, e: StudioError) -> None:
        self.statusBar().showMessage(e.message, 10000)
        QMessageBox.warning(self, "Scellis Studio", e.format())

    def closeEvent(self, event) -> None:
        self.state.save()
        self.closing = True                      # closing the tabs now does not forget them
        for view in list(self.views):
            if not self.close_view(view):
                self.closing = False
                event.ignore()
                return
        self.shutdown()
        event.accept()

    def changeEvent(self, event) -> None:
        if event.type() in (QEvent.Type.ApplicationPaletteChange, QEvent.Type.PaletteChange):
            self.state.palette_changed()             # the style sheet and plots follow the palette
        super().changeEvent(event)

    def _show_busy(self, busy: bool) -> None:
        self.busy_label.setText("● device busy" if busy else "")

    def shutdown(self) -> None:
        """Stop the workers and the background pool (once; closing the window after it is harmless)."""
        if getattr(self, "_shut_down", False):
            return
        self._shut_down = True
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self._keys)      # (focusChanged goes with the window: PySide drops it)
        self.workers.close()
        for w in self.extra_workers:
            w.close()
        self.background.wait(5)
        self.background.close()
        if self._own_ctx:
            self.ctx.close()

