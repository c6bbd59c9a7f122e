"""Light and dark: the Studio follows the system palette, or the user's choice (View ▸ Theme).

``system`` keeps the palette the platform gave the application at start (and switches to the dark
palette when the platform says its colour scheme is dark but handed over a light palette);
``light`` and ``dark`` are Fusion palettes. Every colour in the Studio's own widgets comes from the
palette (studio/app/widgets/style.py), and plots follow it too (``style_plot``): a plot's background is
the palette's base, its axes, ticks, labels and legend are in the palette's text colour."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from . import style
from .input_frames import FramedStyle

THEMES = ("system", "light", "dark")


def dark_palette() -> QPalette:
    p = QPalette()
    roles = QPalette.ColorRole
    for role, c in ((roles.Window, "#2b2d30"), (roles.WindowText, "#e6e6e6"), (roles.Base, "#1e1f22"),
                    (roles.AlternateBase, "#2b2d30"), (roles.ToolTipBase, "#3c3f41"), (roles.ToolTipText, "#e6e6e6"),
                    (roles.Text, "#e6e6e6"), (roles.Button, "#3c3f41"), (roles.ButtonText, "#e6e6e6"),
                    (roles.BrightText, "#ff6b6b"), (roles.Link, "#6cb4ff"), (roles.Highlight, "#2f65ca"),
                    (roles.HighlightedText, "#ffffff"), (roles.PlaceholderText, "#8c8c8c"), (roles.Mid, "#55585c"),
                    (roles.Dark, "#17181a"), (roles.Light, "#4a4d51"), (roles.Midlight, "#404346"),
                    (roles.Shadow, "#0d0d0d")):
        p.setColor(role, QColor(c))
    for role, c in ((roles.WindowText, "#7f7f7f"), (roles.Text, "#7f7f7f"), (roles.ButtonText, "#7f7f7f")):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(c))
    return p


def light_palette() -> QPalette:
    from PySide6.QtWidgets import QStyleFactory
    fusion = QStyleFactory.create("Fusion")
    return fusion.standardPalette() if fusion is not None else QPalette()


class ThemeManager(QObject):
    """Owns the application's palette choice. One per window (it remembers the palette the
    application had when it was made, the system's)."""
    changed = Signal(str)

    def __init__(self, app: QApplication | None = None, parent=None):
        super().__init__(parent)
        self.app = app or QApplication.instance()
        self.system_palette = QPalette(self.app.palette())
        self.system_style = self.app.style().name()
        self.choice = "system"
        hints = self.app.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(lambda _s: self.choice == "system" and self.apply("system"))

    def palette_for(self, choice: str) -> QPalette:
        if choice == "dark":
            return dark_palette()
        if choice == "light":
            return light_palette()
        hints = self.app.styleHints()
        scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else None
        if scheme == Qt.ColorScheme.Dark and not style.is_dark(self.system_palette):
            return dark_palette()
        return QPalette(self.system_palette)

    def apply(self, choice: str) -> None:
        if choice not in THEMES:
            choice = "system"
        self.choice = choice
        if choice in ("light", "dark") or style.is_dark(self.palette_for(choice)) != style.is_dark(self.system_palette):
            self.app.setStyle(FramedStyle())      # Fusion (the platform style may ignore a palette it did not
            # make), with input frames that read on a dark palette (input_frames.py)
        elif self.app.style().name() != self.system_style:
            self.app.setStyle(self.system_style)
        self.app.setPalette(self.palette_for(choice))
        refresh(self.app)
        self.changed.emit(choice)


def refresh(app: QApplication | None = None) -> None:
    """Re-derive the style sheet and restyle every plot for the application's current palette."""
    app = app or QApplication.instance()
    style.install(app)                   # a no-op when the palette's colours did not change
    import pyqtgraph as pg
    for w in app.allWidgets():
        if isinstance(w, pg.PlotWidget):
            style_plot(w)


def style_plot(plot, palette: QPalette | None = None) -> None:
    """Background, axes, tick labels, title and legend text in the palette's colours; re-applied by
    itself when the palette changes (an event filter on the plot)."""
    pal = palette or plot.palette()
    bg = pal.color(QPalette.ColorRole.Base)
    fg = pal.color(QPalette.ColorRole.Text)
    plot.setBackground(bg)
    item = plot.getPlotItem()
    for side in ("left", "bottom", "top", "right"):
        ax = item.getAxis(side)
        ax.setPen(fg)
        ax.setTextPen(fg)
        if ax.labelText:
            ax.setLabel(ax.labelText, units=ax.labelUnits or None, color=fg.name())
    title = item.titleLabel
    if title is not None and title.text:
        title.setText(title.text, color=fg.name())
    legend = item.legend
    if legend is not None:
        legend.setLabelTextColor(fg)             # for entries added later; the shown ones are redrawn:
        for _sample, label in legend.items:      # (pyqtgraph keeps their old colour until their text is set)
            label.setText(label.text, color=fg.name())
        legend.setBrush(QColor(bg.red(), bg.green(), bg.blue(), 200))
        legend.setPen(pal.color(QPalette.ColorRole.Mid))
    if not getattr(plot, "_themed", False):
        plot._themed = True
        plot.installEventFilter(_PaletteWatch(plot))


class _PaletteWatch(QObject):
    """Restyles its parent plot when the palette changes (a child of the plot: it goes with it)."""

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.PaletteChange:
            style_plot(obj)
        return False
