"""Panels that fit the screen: a dock's panel scrolls inside the dock instead of raising the
window's minimum width (``scrolled``), and a label too long for its place ends in "…" with the
whole text in its tooltip (``ElidedLabel``), instead of being cut or widening its row."""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QSizePolicy, QWidget

PANEL_MIN_WIDTH = 200          # what a dock asks of the window at least, whatever its panel holds


def scrolled(panel: QWidget, *, min_width: int = PANEL_MIN_WIDTH) -> QScrollArea:
    """``panel`` in a frameless scroll area: the dock can be narrower than the panel's own minimum
    (it scrolls sideways then), so no panel pushes the window wider than the screen."""
    area = QScrollArea()
    area.setObjectName(f"{panel.objectName() or type(panel).__name__.lower()}_scroll")
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
    area.setWidget(panel)
    area.setMinimumWidth(min_width)
    area.panel = panel
    return area


class ElidedLabel(QLabel):
    """Plain text that ends in ``…`` when it does not fit (``mode``: Qt.TextElideMode) and shows the
    whole text in its tooltip; its minimum width is a few characters, never the text's length."""

    def __init__(self, text: str = "", parent=None, *, mode=Qt.TextElideMode.ElideRight, bold: bool = False):
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self._tip: str | None = None
        if bold:
            f = self.font()
            f.setBold(True)
            self.setFont(f)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def text(self) -> str:
        """The whole text (what is painted may end in "…")."""
        return self._full

    def shown_text(self) -> str:
        return QLabel.text(self)

    def setText(self, text: str) -> None:  # Qt's name
        self._full = text or ""
        self._elide()
        self.updateGeometry()

    def setToolTip(self, tip: str) -> None:  # Qt's name
        """A tooltip of its own; the whole text is added to it when the text is elided."""
        self._tip = tip
        self._elide()

    def _extra(self) -> int:
        m = self.contentsMargins()
        return m.left() + m.right() + 2 * self.margin() + 2

    def sizeHint(self) -> QSize:
        s = super().sizeHint()
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + self._extra(), s.height())

    def minimumSizeHint(self) -> QSize:
        s = super().minimumSizeHint()
        fm = self.fontMetrics()
        return QSize(min(fm.horizontalAdvance(self._full[:3] + "…"), fm.horizontalAdvance(self._full))
                     + self._extra(), s.height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = self.contentsRect().width() - 2 * self.margin()
        shown = self.fontMetrics().elidedText(self._full, self._mode, max(width, 0)) if self.isVisible() or \
            width > 0 else self._full
        if shown != QLabel.text(self):
            QLabel.setText(self, shown)
        elided = shown != self._full
        tip = self._tip or ""
        if elided and self._full not in tip:
            tip = self._full + (f"\n{tip}" if tip else "")
        QLabel.setToolTip(self, tip)

    def is_elided(self) -> bool:
        return QLabel.text(self) != self._full


def fit_column(root: QWidget, *, longer_than: int = 32) -> None:
    """Let the notebook's column reflow to the window: every label under ``root`` with a sentence
    in it wraps, every form puts a long row's field under its label, and progress bars give way
    first, so no cell's minimum width is a line of prose (no sideways scroll at 1024 px)."""
    from PySide6.QtWidgets import QFormLayout, QProgressBar
    for bar in root.findChildren(QProgressBar):
        bar.setMinimumWidth(48)
    for label in root.findChildren(QLabel):
        if isinstance(label, ElidedLabel) or label.wordWrap():
            continue
        if len(label.text()) > longer_than and " " in label.text():
            label.setWordWrap(True)
    for form in root.findChildren(QFormLayout):
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)


TITLE_BAR_EXTRA = 160          # a window manager's icon and buttons beside the title


def fit_title(window: QWidget) -> int:
    """A dialog at least as wide as its title needs in a title bar (never wider than the screen), so
    the window manager does not cut it off. Returns the minimum width set."""
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QApplication
    fm = QFontMetrics(QApplication.font("QMdiSubWindowTitleBar"))
    want = fm.horizontalAdvance(window.windowTitle()) + TITLE_BAR_EXTRA
    screen = window.screen() or QApplication.primaryScreen()
    cap = screen.availableGeometry().width() - 40 if screen is not None else want
    width = max(window.minimumWidth(), min(want, cap))
    window.setMinimumWidth(width)
    return width
