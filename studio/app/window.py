"""The Studio's main window: the catalog, a notebook per open op, the problems panel."""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QTabWidget,
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
from .model import OpDocument
from .new_op import NewOpDialog
from .problems import ProblemsPanel
from .worker_bridge import DeviceWorkers


class MainWindow(QMainWindow):
    def __init__(self, *, workers: DeviceWorkers | None = None, store: AutosaveStore | None = None,
                 ctx: Context | None = None, offer_recovery: bool = True):
        """``ctx``: the GUI process's Context (trust store, catalog); one is opened when not given.
        Device work never uses it: that runs in the device worker, with the worker's own."""
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

        self.tabs = QTabWidget()
        self.tabs.setTabsClosable(True)
        self.tabs.setDocumentMode(True)
        self.tabs.tabCloseRequested.connect(lambda i: self.close_view(self.tabs.widget(i)))
        self.welcome = QLabel("<h2>Scellis Studio</h2><p>Author a GPU op as content: File ▸ New op from template, "
                              "or double-click an op in the catalog.</p>")
        self.welcome.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.tabs.addTab(self.welcome, "Welcome")
        self.setCentralWidget(self.tabs)

        self.catalog = CatalogPanel()
        self.catalog.openRequested.connect(self.open_path)
        dock = QDockWidget("Catalog", self)
        dock.setObjectName("catalog_dock")
        dock.setWidget(self.catalog)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.problems = ProblemsPanel()
        self.problems.activated.connect(self._jump)
        pdock = QDockWidget("Problems", self)
        pdock.setObjectName("problems_dock")
        pdock.setWidget(self.problems)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, pdock)
        self.problems_dock = pdock
        self.tabs.currentChanged.connect(lambda _i: self._show_problems())

        self.gpu_label = QLabel("GPU: starting the device worker…")
        self.busy_label = QLabel("")
        self.statusBar().addPermanentWidget(self.busy_label)
        self.statusBar().addPermanentWidget(self.gpu_label)
        self.workers.busyChanged.connect(lambda b: self.busy_label.setText("● device busy" if b else ""))
        self._actions()
        self.resize(1400, 900)
        QTimer.singleShot(0, lambda: (self.resizeDocks([pdock], [140], Qt.Orientation.Vertical),
                                      self.resizeDocks([dock], [360], Qt.Orientation.Horizontal)))
        self._ask_profile()
        self.refresh_catalog()
        self.background.run(self.ctx.trust.product_hashes)    # warm: judging an opened package's trust hashes these
        if offer_recovery:
            QTimer.singleShot(0, self.offer_recovery)

    # ------------------------------------------------------------------ actions
    def _actions(self) -> None:
        def act(text, slot, shortcut=None, menu=None):
            a = QAction(text, self)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            a.triggered.connect(slot)
            menu.addAction(a)
            return a
        m = self.menuBar().addMenu("&File")
        self.act_new = act("New op from template…", self.new_op_dialog, "Ctrl+N", m)
        self.act_open = act("Open package…", self.open_dialog, "Ctrl+O", m)
        self.act_open_workflow = act("Open workflow…", self.open_workflow_dialog, None, m)
        self.act_save = act("Save", lambda: self.save_current(), "Ctrl+S", m)
        self.act_save_as = act("Save As…", lambda: self.save_current(ask=True), "Ctrl+Shift+S", m)
        act("Close", lambda: self.close_view(self.current()), "Ctrl+W", m)
        m.addSeparator()
        act("Quit", self.close, "Ctrl+Q", m)
        r = self.menuBar().addMenu("&Run")
        act("Check now", lambda: self.current() and self.current().checker.check_now(), "Ctrl+B", r)
        act("Conformance", lambda: self.current() and self.current().conformance.run(), "F5", r)
        act("Gradcheck", lambda: self.current() and self.current().gradcheck.run(), "F6", r)
        act("Run on device", lambda: self.current() and self.current().runner.run(), "F7", r)
        r.addSeparator()
        self.act_trust = act("Trust this package's code…", self.trust_current, None, r)
        tb = self.addToolBar("main")
        tb.setObjectName("main_toolbar")
        for a in (self.act_new, self.act_open, self.act_save, self.act_trust):
            tb.addAction(a)

    def current(self) -> DocumentView | None:
        w = self.tabs.currentWidget()
        return w if isinstance(w, DocumentView) else None

    # ------------------------------------------------------------------ documents
    def add_document(self, doc: OpDocument, *, authored: bool | None = None) -> DocumentView:
        view = DocumentView(doc, self.workers, self.background, self.store, ctx=self.ctx, authored=authored)
        self.views.append(view)
        view.problemsChanged.connect(lambda v, _p: self._show_problems() if v is self.current() else None)
        view.catalogChanged.connect(self.refresh_catalog)
        i = self.tabs.addTab(view, self._tab_title(doc))
        doc.dirtyChanged.connect(lambda _d: self._retitle(view))
        doc.changed.connect(lambda k, _o: self._retitle(view) if k == "field:id" else None)
        if self.tabs.indexOf(self.welcome) >= 0:
            self.tabs.removeTab(self.tabs.indexOf(self.welcome))
            i = self.tabs.indexOf(view)
        self.tabs.setCurrentIndex(i)
        return view

    def _tab_title(self, doc: OpDocument) -> str:
        name = str(doc.field("id") or "untitled").split("/")[-1]
        return name + (" ●" if doc.dirty else "")

    def _retitle(self, view: DocumentView) -> None:
        i = self.tabs.indexOf(view)
        if i >= 0:
            self.tabs.setTabText(i, self._tab_title(view.doc))

    def new_op(self, template: str, folder: str | Path, name: str, author: str = "you") -> DocumentView:
        root = create_from_template(template, folder, name, author, ctx=self.ctx)    # authored here
        doc = open_package(root)
        self._remember(root)
        view = self.add_document(doc, authored=True)
        self.refresh_catalog()
        return view

    def new_op_dialog(self) -> None:
        dlg = NewOpDialog(self, folder=str(user_ops_dir()))
        if dlg.exec():
            try:
                self.new_op(*dlg.values())
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
        i = self.tabs.addTab(view, f"⚙ {view.wf.name}")
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
        self.tabs.removeTab(self.tabs.indexOf(view))
        view.deleteLater()
        self._show_problems()
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

    def closeEvent(self, event) -> None:  # noqa: N802
        for view in list(self.views):
            if not self.close_view(view):
                event.ignore()
                return
        self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        self.workers.close()
        self.background.wait(5)
        self.background.close()
        if self._own_ctx:
            self.ctx.close()


def _on_disk(package: str | None) -> dict[str, str] | None:
    if not package:
        return None
    try:
        return read_folder(Path(package))[0]
    except (StudioError, OSError):
        return {}
