"""The main window's dock panels (an object the window holds: ``window.docks``): a dock that View ▸
Panels can bring back after it was closed, a tool dock that Tools ▸ <action> shows, and where a
tool dock opens (a third of the window or so, the window keeping its size)."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QAbstractScrollArea, QDockWidget

from ..widgets.fitting import scrolled

TOOL_DOCK_SHARE = 0.36         # of the window's width, a tool dock's when it opens
NOTEBOOK_ROOM = 620            # the notebook's least width beside the docks (its widest cell, Conformance, ~600)


class Docks:
    """Needs the window's ``menus`` (View ▸ Panels, Tools) and, for tool docks, its ``catalog_dock``."""

    def __init__(self, window):
        self.window = window
        self.panel_toggles = []            # View ▸ Panels: each dock's show/hide action

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
        self.window.addDockWidget(area, dock)
        toggle = dock.toggleViewAction()
        toggle.setText(dock.windowTitle().split(" — ")[0])
        if shortcut:
            toggle.setShortcut(QKeySequence(shortcut))
        toggle.setToolTip(f"show or hide the {toggle.text()} panel")
        self.window.menus.menu("view.panels").addAction(toggle)
        self.panel_toggles.append(toggle)
        return dock

    def add_panel(self, title: str, name: str, panel, area, shortcut: str) -> QDockWidget:
        """A dock for one of the window's own panels (Catalog, Problems), which scroll themselves."""
        dock = QDockWidget(title, self.window)
        dock.setObjectName(name)
        dock.setWidget(panel)
        return self.add_dock(dock, area, shortcut, scroll=False)

    def add_tool_dock(self, title: str, name: str, panel, layout) -> QDockWidget:
        """A dock for a tool panel, hidden until its declared Tools action (``layout``: one Action of
        studio/app/shell/actions.py, e.g. LEARNER_LAYOUT) shows it (the learner, the shard report)."""
        dock = QDockWidget(title, self.window)
        dock.setObjectName(name)
        dock.setWidget(panel(dock))
        self.add_dock(dock)
        dock.hide()
        (action,) = layout
        self.window.menus.extend(layout, {action.command or action.id: lambda: self.show_tool_dock(dock)})
        return dock

    def tool_dock_width(self) -> tuple[int, int]:
        """(the width a tool dock opens at, its least width), relative to the window: a third of it
        or so (280 to 560 px), never less than a fifth (at least 180 px), so its text is read, not
        clipped, at 1024 px as at 1600."""
        w = self.window.width()
        least = max(180, min(w // 5, 260))
        return max(least, min(max(280, int(w * TOOL_DOCK_SHARE)), 560, w // 2)), least

    def show_tool_dock(self, dock: QDockWidget) -> None:
        """Show a tool dock (Learner, Sharding, Card) at ``tool_dock_width``, the window keeping its
        size: the notebook gives way, the window never grows past where it was."""
        win = self.window
        before = win.size()
        want, least = self.tool_dock_width()
        dock.widget().setMinimumWidth(least)
        if not dock.isFloating() and not dock.isVisible() and self.squeezes_the_notebook(dock, want):
            win.tabifyDockWidget(win.catalog_dock, dock)      # a tab beside the catalog: the notebook keeps its width
            want = max(want, win.catalog_dock.width())
        dock.show()
        dock.raise_()
        if dock.isFloating():
            return
        win.resizeDocks([dock], [want], Qt.Orientation.Horizontal)

        def settle() -> None:
            if win.isMaximized() or win.isFullScreen():
                return
            if win.width() > before.width() or win.height() > before.height():
                win.resize(before)
            win.resizeDocks([dock], [want], Qt.Orientation.Horizontal)
        QTimer.singleShot(0, settle)

    def squeezes_the_notebook(self, dock: QDockWidget, want: int) -> bool:
        """Whether a third column ``want`` px wide would leave the notebook less than NOTEBOOK_ROOM
        (a 1024 px window with the catalog open); then the tool dock opens as a tab beside the
        catalog, where the catalog is docked and shown."""
        win = self.window
        cat = win.catalog_dock
        if cat is dock or not cat.isVisible() or cat.isFloating():
            return False
        sides = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)
        beside = [d for d in win.findChildren(QDockWidget)
                  if d is not dock and d.isVisible() and not d.isFloating() and win.dockWidgetArea(d) in sides]
        # docks tabbed together share one column: the catalog's, counted once
        taken = cat.width() + sum(d.width() for d in beside if d is not cat and cat not in win.tabifiedDockWidgets(d))
        return win.width() - taken - want < NOTEBOOK_ROOM
