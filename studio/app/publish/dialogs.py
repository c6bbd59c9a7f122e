"""The Publish dialog, the card view, Fork, and the Publish menu (studio/app/publish/__init__.py)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDockWidget,
    QFileDialog,
    QFormLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QTextBrowser,
    QVBoxLayout,
)

from ...engine.atomic import write_bytes
from ...engine.contract.package import MANIFEST, OpPackage, load_package
from ...engine.errors import StudioError
from ...engine.services import publishing
from ...engine.services.requests import Kind
from ..shell.actions import PUBLISH_LAYOUT
from ..widgets.fitting import fit_title
from .published import confirm_published
from ..bridge.latest_check import LatestCheck


def publishing_workers(parent):
    """Device workers for the publishing requests (publish, card, verify_here) and the proof
    report's (report, report_check): their own lanes, the request table's kinds and budgets."""
    from ..bridge.worker_bridge import DeviceWorkers
    return DeviceWorkers(parent=parent)


def profile_id(window) -> str:
    prof = window.profile                     # the profile request's ProfileReport; None until it answered
    return prof.id if prof is not None else "unknown"


class PublishDialog(QDialog):
    """Visibility, license (validated as you type) and, for ``public``, every missing field of the bar."""

    def __init__(self, pkg: OpPackage, *, ctx, profile: str, workers=None, licenses=None, parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"Publish {pkg.id}")
        self.pkg, self.ctx, self.profile, self.workers = pkg, ctx, profile, workers
        self.licenses = licenses or publishing.spdx_list()     # loaded once: checked as the user types
        self.result_lines: list[str] = []
        self.job = None
        self.visibility = QComboBox()
        self.visibility.addItems(["private", "workspace", "public"])
        self.visibility.setCurrentText(pkg.contract.visibility)
        self.license = QLineEdit(pkg.contract.license or "")
        self.license.setPlaceholderText("an SPDX expression, e.g. Apache-2.0")
        self.license_status = QLabel()
        self.license_status.setObjectName("license_status")
        self.missing = QListWidget()
        self.missing.setObjectName("missing_fields")
        self.status = QLabel()
        form = QFormLayout()
        form.addRow("Visibility", self.visibility)
        form.addRow("License", self.license)
        form.addRow("", self.license_status)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.publish_button = self.buttons.addButton("Publish", QDialogButtonBox.ButtonRole.AcceptRole)
        self.publish_button.clicked.connect(self.publish)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(QLabel("Missing for the public bar:"))
        lay.addWidget(self.missing)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)
        fit_title(self)                           # the title bar shows "Publish <id>" whole
        # the license and the public bar are checked off the GUI thread (the bar hashes the package
        # and verifies its receipts: about a second), the newest text only (latest_check.py)
        self.publish_when_checked = False
        self.checker = LatestCheck(self.verdict, self.show_verdict, fail=self._check_failed, parent=self)
        self.finished.connect(lambda _=0: self.checker.close())
        self.visibility.currentTextChanged.connect(lambda _=None: self.refresh(at_once=True))
        self.license.textChanged.connect(lambda _=None: self.refresh())
        self.refresh(at_once=True)

    def snapshot(self) -> tuple[str, str]:
        return self.visibility.currentText(), self.license.text().strip()

    def shortfalls(self, snapshot: tuple[str, str] | None = None) -> list:
        """The bar on the content as it would be published (nothing written); any thread."""
        vis, text = snapshot or self.snapshot()
        updates = {"visibility": vis}
        if text:
            updates["license"] = text
        return publishing.bar_for_edit(self.ctx, self.pkg, updates, profile_id=self.profile, licenses=self.licenses)

    def verdict(self, snapshot: tuple[str, str]) -> dict:
        """What the dialog shows for (visibility, license text): computed in the check's thread."""
        vis, text = snapshot
        rep = publishing.license_report(text, self.licenses) if text else None
        found = [str(s) for s in self.shortfalls(snapshot)] if vis == "public" else []
        return {"snapshot": snapshot, "licensed": rep is not None and rep.ok, "license_ok": rep is None or rep.ok,
                "license": None if rep is None else ("✓ valid SPDX expression" if rep.ok else "✗ " + rep.summary()),
                "found": found}

    def refresh(self, at_once: bool = False) -> None:
        """Check what is typed now (off the GUI thread). Publish pressed meanwhile waits for the
        verdict on what is typed, and goes ahead only if it allows it."""
        self.status.setText("checking…")
        (self.checker.now if at_once else self.checker.changed)(self.snapshot())

    def show_verdict(self, v: dict) -> None:
        vis = v["snapshot"][0]
        self.license_status.setText(v["license"] or "no license: the op can only stay private")
        self.missing.clear()
        for s in v["found"]:
            self.missing.addItem(s)
        licensed, found = v["licensed"], v["found"]
        ok = vis == "private" and v["license_ok"] or vis == "workspace" and licensed or \
            vis == "public" and licensed and not found
        self.publish_button.setEnabled(ok and (self.job is None or not self.job.active))
        self.status.setText("" if ok else ("a license is needed to leave private" if not licensed and vis != "private"
                                           else f"{len(found)} field(s) missing" if found else "fix the license"))
        if self.publish_when_checked:
            self.publish_when_checked = False
            if ok:
                self.publish()

    def _check_failed(self, e) -> None:
        self.status.setText(f"could not check: {getattr(e, 'message', e)}")

    def publish(self) -> None:
        if self.workers is None or (self.job is not None and self.job.active):
            return
        if self.checker.pending:                    # pressed while the check of the latest text runs
            self.publish_when_checked = True
            self.status.setText("checking, then publishing…")
            return
        lic = self.license.text().strip() or None
        self.publish_button.setEnabled(False)
        self.status.setText("publishing (conformance runs again for the new content)…")
        self.job = self.workers.submit("proof", Kind.PUBLISH, target=str(self.pkg.root),
                                       visibility=self.visibility.currentText(), license=lic)
        self.job.succeeded.connect(self._done)
        self.job.failed.connect(self._failed)

    def _done(self, out) -> None:
        self.result_lines = list(out.lines)
        self.status.setText("\n".join(self.result_lines))
        self.accept()

    def _failed(self, e) -> None:
        self.status.setText(f"refused: {getattr(e, 'message', e)}")
        self.publish_button.setEnabled(True)


class CardView(QTextBrowser):
    """The op's card, as HTML (computed here: it needs the GPU profile id, not the device)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("card_view")
        self.setOpenExternalLinks(False)
        self.card: dict | None = None

    def show_package(self, pkg: OpPackage, *, ctx, profile: str, licenses=None) -> dict:
        self.card = publishing.card(ctx, pkg, profile_id=profile, licenses=licenses)
        self.setHtml(self.card["html"])
        return self.card


# ------------------------------------------------------------------ the menu
def _current_package(window) -> OpPackage | None:
    view = window.current() if hasattr(window, "current") else None
    doc = getattr(view, "doc", None)
    if doc is None or doc.path is None:
        QMessageBox.information(window, "Publish", "Open a saved op package first.")
        return None
    if doc.dirty:
        QMessageBox.information(window, "Publish", "Save the op first: what is published is what is on disk.")
        return None
    try:
        return load_package(doc.path)
    except StudioError as e:
        QMessageBox.warning(window, "Publish", e.format())
        return None


def open_publish_dialog(window, pkg: OpPackage | None = None) -> PublishDialog | None:
    pkg = pkg or _current_package(window)
    if pkg is None:
        return None
    dlg = PublishDialog(pkg, ctx=window.ctx, profile=profile_id(window), workers=window.publish_workers,
                        parent=window)
    dlg.accepted.connect(lambda: (reload_published(window, pkg.root), confirm_published(window, dlg.result_lines)))
    dlg.show()
    return dlg


def reload_published(window, root) -> None:
    """Publishing rewrote op.toml on disk: an open, unmodified document of that package takes the new
    text as saved (so a later save cannot put the old visibility back), and the card is refreshed."""
    root = Path(root).resolve()
    text = (root / MANIFEST).read_text(encoding="utf-8")
    for view in getattr(window, "views", []):
        doc = view.doc
        if doc.path is not None and Path(doc.path).resolve() == root and not doc.dirty:
            doc.restore({**doc.files(), MANIFEST: text})
            doc.mark_saved(doc.path)
    dock = getattr(window, "card_dock", None)
    if dock is not None and dock.isVisible():
        show_card(window, load_package(root))


def show_card(window, pkg: OpPackage | None = None) -> CardView | None:
    pkg = pkg or _current_package(window)
    if pkg is None:
        return None
    dock = getattr(window, "card_dock", None)
    if dock is None:
        dock = window.card_dock = QDockWidget("Card", window)
        dock.setObjectName("card_dock")
        dock.setWidget(CardView())
        window.docks.add_dock(dock, Qt.DockWidgetArea.RightDockWidgetArea, scroll=False)   # a text view: it scrolls
    dock.panel.show_package(pkg, ctx=window.ctx, profile=profile_id(window))
    if hasattr(window, "docks"):
        window.docks.show_tool_dock(dock)             # a third of the window or so; the window keeps its size
    else:
        dock.show()
    return dock.panel


def save_proof_report(window, pkg: OpPackage | None = None, path: str | None = None):
    """Publish ▸ Proof report…: the op proven in the device worker where no receipt covers it, then its
    one self-contained HTML report (``scellis report``'s) written where the user chose; the status bar
    says where, or why not. Returns the worker job (None when nothing was asked)."""
    pkg = pkg or _current_package(window)
    if pkg is None:
        return None
    if path is None:
        path, _ = QFileDialog.getSaveFileName(window, "Save proof report", str(Path.home() / f"{pkg.contract.id.name}.html"),
                                              "HTML (*.html)")
        if not path:
            return None
    window.statusBar().showMessage(f"proof report of {pkg.id}: proving where no receipt covers it…")
    job = window.publish_workers.submit("proof", Kind.REPORT, target=str(pkg.root))

    def done(out) -> None:
        try:
            write_bytes(path, out.html.encode("utf-8"))
        except OSError as e:
            window.statusBar().showMessage(f"proof report not written: {path}: {e.strerror}")
            return
        window.statusBar().showMessage(out.wrote(path))

    job.succeeded.connect(done)
    job.failed.connect(lambda e: window.statusBar().showMessage(f"proof report refused: {getattr(e, 'message', e)}"))
    return job


def fork_current(window, pkg: OpPackage | None = None, new_id: str | None = None) -> OpPackage | None:
    pkg = pkg or _current_package(window)
    if pkg is None:
        return None
    if new_id is None:
        new_id, ok = QInputDialog.getText(window, "Fork", f"New id for the fork of {pkg.id}:",
                                          text=f"user/you/{pkg.contract.id.name}@1")
        if not ok:
            return None
    try:
        forked = publishing.fork(window.ctx, pkg, new_id)
    except StudioError as e:
        QMessageBox.warning(window, "Fork", e.format())
        return None
    if hasattr(window, "open_path"):
        window.open_path(forked.root)
    return forked


def install_publish(window) -> None:
    """The Publish menu (Publish…, Card, Fork…, Ring panel) on the main window."""
    from .ring_panel import RingPanel
    # a child of the window, closed by the window's shutdown (``extra_workers``) — not from the window's
    # `destroyed`, which would run Python inside a C++ destructor, possibly in the garbage collector
    window.publish_workers = workers = publishing_workers(window)
    window.extra_workers.append(workers)
    app = QApplication.instance()
    if app is not None:
        app.aboutToQuit.connect(workers.close)
    window.publish_menu = window.menus.extend(PUBLISH_LAYOUT, {      # declared in studio/app/shell/actions.py
        "publish.publish": lambda: open_publish_dialog(window), "publish.card": lambda: show_card(window),
        "publish.report": lambda: save_proof_report(window), "publish.fork": lambda: fork_current(window),
        "publish.ring": lambda: (window.ring_dock.show(), window.ring_panel.refresh())})["publish"]
    window.ring_panel = RingPanel(window.ctx, workers=window.publish_workers, profile=lambda: profile_id(window))
    dock = window.ring_dock = QDockWidget("Exchange ring", window)
    dock.setObjectName("ring_dock")
    dock.setWidget(window.ring_panel)
    window.docks.add_dock(dock)                 # in View ▸ Panels too; it scrolls inside the dock
    dock.hide()
    dock.toggleViewAction().triggered.connect(lambda on: on and window.ring_panel.refresh())
