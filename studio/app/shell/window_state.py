"""What the main window remembers across restarts (an object the window holds: ``window.state``):
geometry, docks and toolbar, the open tabs (saved packages and workflows, in order) and the current
one, the theme — in the Studio's own settings file (studio/app/shell/settings.py:
``$SCELLIS_HOME/studio.ini``); and the palette-change handler that keeps the style sheet and plots in
step with the palette."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer
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


class WindowState(QObject):
    """Needs the window's ``settings``, ``tabs``, ``theme``, ``menus`` (View ▸ Theme), ``closing``,
    ``tabsRestored`` and its document methods (``open_path``, ``open_workflow``, the Welcome page's
    ``show_welcome`` / ``hide_welcome``). Create it once the window's tabs exist."""

    def __init__(self, window):
        super().__init__(window)
        self.w = window
        self.restoring = False              # True while restored tabs are still placeholders
        self.restored_views: list = []      # the views restore_tabs filled in, in order
        self.restore_bar: QProgressBar | None = None
        self._restoring_one = False
        self._restyling = False
        self._tabs_timer = QTimer(self, singleShot=True, interval=0)      # the open tabs, kept as they change
        self._tabs_timer.timeout.connect(self.save_tabs)
        window.tabs.currentChanged.connect(self.keep_tabs)     # (not QTimer.start(int): the index is no interval)
        window.tabs.tabBar().tabMoved.connect(self.keep_tabs)

    def keep_tabs(self, *_args) -> None:
        """The open tabs are written once this turn of the event loop is over."""
        self._tabs_timer.start()

    # ------------------------------------------------------------------ remembered state
    def save(self) -> None:
        """Geometry, docks and toolbar, open tabs (saved packages and workflows, in order) and the
        current one, the theme — into the Studio's settings (settings.py)."""
        s = self.w.settings
        s.setValue("window/geometry", self.w.saveGeometry())
        s.setValue("window/state", self.w.saveState())
        self.save_tabs(sync=False)
        s.setValue("theme", self.w.theme.choice)
        s.sync()

    def save_tabs(self, *, sync: bool = True) -> None:
        """The open tabs and the current one, written as they change (not only at a clean exit: a
        killed Studio reopens them too). Not while the window closes its tabs on the way out."""
        if self.w.closing and sync or self._restoring_one:
            return
        s = self.w.settings
        tabs = []
        for i in range(self.w.tabs.count()):
            w = self.w.tabs.widget(i)
            if hasattr(w, "doc") and hasattr(w, "session") and w.doc.path is not None:
                tabs.append("package:" + str(Path(w.doc.path).resolve()))
            elif hasattr(w, "wf") and hasattr(w, "path"):
                tabs.append("workflow:" + str(w.path))
            elif isinstance(w, RestoringTab):         # not filled in yet: kept as it was
                tabs.append(w.entry)
        s.setValue("session/tabs", tabs)
        s.setValue("session/current", max(self.w.tabs.currentIndex(), 0))
        if sync:
            s.sync()

    def restore(self) -> bool:
        """The theme, geometry, docks and toolbar of the last session; True when the geometry came back."""
        s = self.w.settings
        theme = s.value("theme", "system")
        if theme != "system":
            self.set_theme(str(theme))
        geo, state = s.value("window/geometry"), s.value("window/state")
        ok = bool(geo is not None and self.w.restoreGeometry(geo))
        if state is not None:
            ok = self.w.restoreState(state) and ok
        return ok

    def set_theme(self, name: str) -> None:
        """View ▸ Theme: apply it, tick it in the menu, remember it."""
        self.w.theme.apply(name)
        action = self.w.menus.actions.get(f"view.theme.{name}")
        if action is not None:
            action.setChecked(True)
        self.w.settings.setValue("theme", name)

    def restore_tabs(self, *, at_once: bool = False) -> list:
        """Reopen the tabs of the last session (those whose folder or file still exists).

        Each tab first appears as a placeholder ("restoring …", a progress bar in the status bar
        counting them), and is filled in once the window is up, one tab per turn of the event loop:
        the window is shown and answers at once, however many tabs come back (a document view takes
        a second or more to build on a loaded machine). ``at_once``: fill them in now (returns the
        views); else returns [] and the window's ``tabsRestored(views)`` follows."""
        win = self.w
        tabs = win.settings.value("session/tabs") or []
        if isinstance(tabs, str):
            tabs = [tabs]
        entries = []
        for t in tabs:
            kind, _, path = str(t).partition(":")
            if kind == "package" and (Path(path) / "op.toml").is_file() or kind == "workflow" and Path(path).is_file():
                entries.append(str(t))
        cur = int(win.settings.value("session/current", 0) or 0)
        self.restored_views = []
        if not entries:
            return []
        win.hide_welcome()
        for entry in entries:
            holder = RestoringTab(entry)
            i = win.tabs.addTab(holder, "⏳ " + holder.title)
            win.tabs.setTabToolTip(i, f"restoring {holder.path}")
        if 0 <= cur < win.tabs.count():
            win.tabs.setCurrentIndex(cur)
        bar = self.restore_bar = QProgressBar()
        bar.setObjectName("restore_progress")
        bar.setRange(0, len(entries))
        bar.setFormat("restoring tabs: %v of %m")
        bar.setTextVisible(True)
        bar.setMaximumWidth(220)
        bar.setToolTip("the tabs of your last session, opened one by one; the window is yours meanwhile")
        win.statusBar().addPermanentWidget(bar)
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
        self.w.tabs.removeTab(self.w.tabs.indexOf(view))
        view.deleteLater()
        self.w.show_welcome()
        self.keep_tabs()
        return True

    def workflow_start_dir(self) -> Path:
        """Where "Open workflow…" starts: the folder of the last workflow opened, else the user's
        workflows folder (<Scellis folder>/workflows) when there is one, else the home folder —
        never the folder the process happened to start in."""
        from ...engine.home import studio_home
        last = self.w.settings.value("paths/workflows")
        for p in ([Path(str(last))] if last else []) + [studio_home() / "workflows", Path.home()]:
            if p.is_dir():
                return p
        return Path.home()

    def open_workflow_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.w, "Open workflow", str(self.workflow_start_dir()),
                                              "Workflow (*.toml)")
        if path and self.w.open_workflow(path) is not None:
            self.w.settings.setValue("paths/workflows", str(Path(path).resolve().parent))

    def _placeholders(self) -> list:
        tabs = self.w.tabs
        return [tabs.widget(i) for i in range(tabs.count()) if isinstance(tabs.widget(i), RestoringTab)]

    def _restore_next(self, *, schedule: bool = True) -> bool:
        """Fill in the first placeholder tab; True while more are left."""
        win, tabs = self.w, self.w.tabs
        if win.closing:
            return False
        left = self._placeholders()
        if not left:
            self._restored()
            return False
        holder = left[0]
        at = tabs.indexOf(holder)
        was_current = tabs.currentWidget() is holder
        current = tabs.currentWidget()
        kind, _, path = holder.entry.partition(":")
        self._restoring_one = True
        try:
            view = win.open_path(path) if kind == "package" else win.open_workflow(path)
        finally:
            self._restoring_one = False
        if view is not None:
            self.restored_views.append(view)
            tabs.tabBar().moveTab(tabs.indexOf(view), at)
        tabs.removeTab(tabs.indexOf(holder))
        holder.deleteLater()
        if view is not None and was_current:
            tabs.setCurrentWidget(view)
        elif current is not holder and tabs.indexOf(current) >= 0:
            tabs.setCurrentWidget(current)
        if tabs.count() == 0:
            win.show_welcome()
        self.restore_bar.setValue(self.restore_bar.value() + 1)
        more = bool(self._placeholders())
        if not more:
            self._restored()
        elif schedule:
            self._restore_timer.start(RESTORE_NEXT_MS)
        return more

    def _restored(self) -> None:
        if not self.restoring:
            return
        self.restoring = False
        self.w.statusBar().removeWidget(self.restore_bar)
        self.restore_bar.deleteLater()
        self.restore_bar = None
        n = len(self.restored_views)
        self.w.statusBar().showMessage(f"restored {n} tab(s) of your last session", 5000)
        self.save_tabs()
        self.w.tabsRestored.emit(list(self.restored_views))

    def palette_changed(self) -> None:
        """A new application palette (the desktop switched to dark, or a theme was chosen): the style
        sheet's meaning colours and every plot follow it (the window's changeEvent calls this)."""
        if self._restyling:
            return
        from ..widgets.theme import refresh
        self._restyling = True
        try:
            refresh()
        finally:
            self._restyling = False
