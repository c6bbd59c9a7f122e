"""What the main window remembers across restarts (a mixin of MainWindow): geometry, docks and
toolbar, the open tabs (saved packages and workflows, in order) and the current one, the theme —
in the Studio's own settings file (studio/app/settings.py: ``$SCELLIS_HOME/studio.ini``); and the
palette-change handler that keeps the style sheet and plots in step with the palette."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent


class WindowStateMixin:
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
        if getattr(self, "_closing", False) and sync:
            return
        s = self.settings
        tabs = []
        for i in range(self.tabs.count()):
            w = self.tabs.widget(i)
            if hasattr(w, "doc") and hasattr(w, "session") and w.doc.path is not None:
                tabs.append("package:" + str(Path(w.doc.path).resolve()))
            elif hasattr(w, "wf") and hasattr(w, "path"):
                tabs.append("workflow:" + str(w.path))
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
