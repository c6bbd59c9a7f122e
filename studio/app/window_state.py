"""What the main window remembers across restarts (a mixin of MainWindow): geometry, docks and
toolbar, the open tabs (saved packages and workflows, in order) and the current one, the theme —
in the Studio's own settings file (studio/app/settings.py: ``$SCELLIS_HOME/studio.ini``); and the
palette-change handler that keeps the style sheet and plots in step with the palette."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QLabel, QProgressBar, QVBoxLayout, QWidget

RESTORE_FIRST_MS = 120          # the first restored tab is built after the window's first paint
RESTORE_NEXT_MS = 15            # then one per turn of the event loop


class RestoringTab(QWidget):
    """A restored tab's place until its view is built: its name and a busy bar."""

    def __init__(self, entry: str):
        super().__init__()
        self.entry = entry
        kind, _, path = entry.partition(":")
        self.kind, self.path = kind, Path(path)
        self.title = self.path.stem if kind == "workflow" else self.path.name
        lay = QVBoxLayout(self)
        lay.addStretch(1)
        label = QLabel(f"restoring {'the workflow' if kind == 'workflow' else 'the op'} {self.path}…")
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        label.setWordWrap(True)
        lay.addWidget(label)
        bar = QProgressBar()
        bar.setRange(0, 0)                        # busy
        bar.setMaximumWidth(320)
        lay.addWidget(bar, 0, Qt.AlignmentFlag.AlignHCenter)
        lay.addStretch(2)


class WindowStateMixin:
    restoring = False                 # True while restored tabs are still placeholders
    restored_views: tuple = ()        # the views restore_tabs filled in, in order
    # ------------------------------------------------------------------ remembered state
    def save_window_state(self) -> None:
        """Geometry, docks and toolbar, open tabs (saved packages and workflows, in order) and the
        current one, the theme — into the Studio's settings (settings.py)."""
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        self.save_tabs(sync=False)
        s.setValue("theme", self.theme.choice)
        s.sync()

    def save_tabs(self, *, sync: bool = True) -> None:
        """The open tabs and the current one, written as they change (not only at a clean exit: a
        killed Studio reopens them too). Not while the window closes its tabs on the way out."""
        if getattr(self, "_closing", False) and sync or getattr(self, "_restoring_one", False):
            return
        s = self.settings
        tabs = []
        for i in range(self.tabs.count()):
            w = self.tabs.widget(i)
            if hasattr(w, "doc") and hasattr(w, "session") and w.doc.path is not None:
                tabs.append("package:" + str(Path(w.doc.path).resolve()))
            elif hasattr(w, "wf") and hasattr(w, "path"):
                tabs.append("workflow:" + str(w.path))
            elif isinstance(w, RestoringTab):         # not filled in yet: kept as it was
                tabs.append(w.entry)
        s.setValue("session/tabs", tabs)
        s.setValue("session/current", max(self.tabs.currentIndex(), 0))
        if sync:
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

    def restore_tabs(self, *, at_once: bool = False) -> list:
        """Reopen the tabs of the last session (those whose folder or file still exists).

        Each tab first appears as a placeholder ("restoring …", a progress bar in the status bar
        counting them), and is filled in once the window is up, one tab per turn of the event loop:
        the window is shown and answers at once, however many tabs come back (a document view takes
        a second or more to build on a loaded machine). ``at_once``: fill them in now (returns the
        views); else returns [] and ``restored(views)`` follows."""
        tabs = self.settings.value("session/tabs") or []
        if isinstance(tabs, str):
            tabs = [tabs]
        entries = []
        for t in tabs:
            kind, _, path = str(t).partition(":")
            if kind == "package" and (Path(path) / "op.toml").is_file() or kind == "workflow" and Path(path).is_file():
                entries.append(str(t))
        cur = int(self.settings.value("session/current", 0) or 0)
        self.restored_views = []
        if not entries:
            return []
        self._hide_welcome()
        for entry in entries:
            holder = RestoringTab(entry)
            i = self.tabs.addTab(holder, "⏳ " + holder.title)
            self.tabs.setTabToolTip(i, f"restoring {holder.path}")
        if 0 <= cur < self.tabs.count():
            self.tabs.setCurrentIndex(cur)
        self.restore_bar = QProgressBar()
        self.restore_bar.setObjectName("restore_progress")
        self.restore_bar.setRange(0, len(entries))
        self.restore_bar.setFormat("restoring tabs: %v of %m")
        self.restore_bar.setTextVisible(True)
        self.restore_bar.setMaximumWidth(220)
        self.restore_bar.setToolTip("the tabs of your last session, opened one by one; the window is yours meanwhile")
        self.statusBar().addPermanentWidget(self.restore_bar)
        self.restoring = True
        if at_once:
            while self._restore_next(schedule=False):
                pass
            return list(self.restored_views)
        self._restore_timer = QTimer(self)
        self._restore_timer.setSingleShot(True)
        self._restore_timer.timeout.connect(lambda: self._restore_next())
        self._restore_timer.start(RESTORE_FIRST_MS)       # after the window's first paint
        return []

    def close_placeholder(self, view) -> bool:
        """Close a tab not yet filled in (it is then not restored); False for any other tab."""
        if not isinstance(view, RestoringTab):
            return False
        self.tabs.removeTab(self.tabs.indexOf(view))
        view.deleteLater()
        self._show_welcome()
        self._keep_tabs()
        return True

    def workflow_start_dir(self) -> Path:
        """Where "Open workflow…" starts: the folder of the last workflow opened, else the user's
        workflows folder (<Scellis folder>/workflows) when there is one, else the home folder —
        never the folder the process happened to start in."""
        from ..engine.home import studio_home
        last = self.settings.value("paths/workflows")
        for p in ([Path(str(last))] if last else []) + [studio_home() / "workflows", Path.home()]:
            if p.is_dir():
                return p
        return Path.home()

    def open_workflow_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open workflow", str(self.workflow_start_dir()),
                                              "Workflow (*.toml)")
        if path and self.open_workflow(path) is not None:
            self.settings.setValue("paths/workflows", str(Path(path).resolve().parent))

    def _placeholders(self) -> list:
        return [self.tabs.widget(i) for i in range(self.tabs.count())
                if isinstance(self.tabs.widget(i), RestoringTab)]

    def _restore_next(self, *, schedule: bool = True) -> bool:
        """Fill in the first placeholder tab; True while more are left."""
        if getattr(self, "_closing", False):
            return False
        left = self._placeholders()
        if not left:
            self._restored()
            return False
        holder = left[0]
        at = self.tabs.indexOf(holder)
        was_current = self.tabs.currentWidget() is holder
        current = self.tabs.currentWidget()
        kind, _, path = holder.entry.partition(":")
        self._restoring_one = True
        try:
            view = self.open_path(path) if kind == "package" else self.open_workflow(path)
        finally:
            self._restoring_one = False
        if view is not None:
            self.restored_views.append(view)
            self.tabs.tabBar().moveTab(self.tabs.indexOf(view), at)
        self.tabs.removeTab(self.tabs.indexOf(holder))
        holder.deleteLater()
        if view is not None and was_current:
            self.tabs.setCurrentWidget(view)
        elif current is not holder and self.tabs.indexOf(current) >= 0:
            self.tabs.setCurrentWidget(current)
        if self.tabs.count() == 0:
            self._show_welcome()
        self.restore_bar.setValue(self.restore_bar.value() + 1)
        more = bool(self._placeholders())
        if not more:
            self._restored()
        elif schedule:
            self._restore_timer.start(RESTORE_NEXT_MS)
        return more

    def _restored(self) -> None:
        if not getattr(self, "restoring", False):
            return
        self.restoring = False
        self.statusBar().removeWidget(self.restore_bar)
        self.restore_bar.deleteLater()
        n = len(self.restored_views)
        self.statusBar().showMessage(f"restored {n} tab(s) of your last session", 5000)
        self.save_tabs()
        self.tabsRestored.emit(list(self.restored_views))

    def changeEvent(self, event) -> None:
        """A new application palette (the desktop switched to dark, or a theme was chosen): the style
        sheet's meaning colours and every plot follow it."""
        if event.type() in (QEvent.Type.ApplicationPaletteChange, QEvent.Type.PaletteChange) and \
                not getattr(self, "_restyling", False):
            from .theme import refresh
            self._restyling = True
            try:
                refresh()
            finally:
                self._restyling = False
        super().changeEvent(event)
