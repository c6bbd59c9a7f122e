"""Code editors: line numbers, pygments highlighting, problems marked at their line:col.

A marker is a red wavy underline from the reported column to the end of the token there, a
tinted line, a dot in the gutter and the message as a tooltip. ``goto(line, col)`` puts the
cursor exactly there (1-based, as the engine reports).

Colours follow the palette: the gutter is the palette's window colour with its numbers in the
muted text colour (the palette's PlaceholderText reaches only about 4.1:1 on the dark window), and
a marker takes ``style.colour("error")`` or ``("warn")``; both are derived again when the palette
changes (light ⇄ dark).
"""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFontDatabase,
    QPainter,
    QPalette,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QToolTip, QWidget

from .highlight import PygmentsHighlighter
from .style import colour


@dataclass(frozen=True)
class Marker:
    line: int            # 1-based
    col: int | None      # 1-based; None marks the whole line
    message: str
    severity: str = "error"


def mono_font():
    f = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    f.setPointSize(max(f.pointSize(), 10))
    return f


class _Gutter(QWidget):
    def __init__(self, editor: "CodeEditor"):
        super().__init__(editor)
        self.editor = editor

    def sizeHint(self) -> QSize:
        return QSize(self.editor.gutter_width(), 0)

    def paintEvent(self, event) -> None:
        self.editor.paint_gutter(event)


class CodeEditor(QPlainTextEdit):
    """A plain-text code editor. ``edited`` carries the new text on user edits only."""
    edited = Signal(str)

    def __init__(self, language: str | None = None, parent=None, *, min_lines: int = 12, max_lines: int = 40):
        super().__init__(parent)
        self.setFont(mono_font())
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setTabStopDistance(self.fontMetrics().horizontalAdvance(" ") * 4)
        self.highlighter = PygmentsHighlighter(self.document(), language) if language else None
        self.markers: list[Marker] = []
        self._marker_sources: dict[str, list[Marker]] = {}
        self._programmatic = False
        self._min_lines, self._max_lines = min_lines, max_lines
        self._gutter = _Gutter(self)
        self.blockCountChanged.connect(self._update_margins)
        self.updateRequest.connect(self._scroll_gutter)
        self.textChanged.connect(self._on_text_changed)
        self._update_margins()
        self._fit_height()

    # ------------------------------------------------------------------ text
    def set_text(self, text: str) -> None:
        """Replace the text without emitting ``edited``, keeping the cursor where it was."""
        if text == self.toPlainText():
            return
        pos = self.textCursor().position()
        self._programmatic = True
        try:
            self.setPlainText(text)
        finally:
            self._programmatic = False
        c = self.textCursor()
        c.setPosition(min(pos, len(text)))
        self.setTextCursor(c)

    def _on_text_changed(self) -> None:
        self._fit_height()
        if not self._programmatic:
            self.edited.emit(self.toPlainText())

    def _fit_height(self) -> None:
        lines = max(self._min_lines, min(self._max_lines, self.blockCount() + 1))
        h = self.fontMetrics().lineSpacing() * lines + 2 * self.frameWidth() + 8
        if self.horizontalScrollBar().isVisible():
            h += self.horizontalScrollBar().height()
        self.setFixedHeight(int(h))

    # ------------------------------------------------------------------ navigation
    def goto(self, line: int, col: int | None = None) -> None:
        block = self.document().findBlockByNumber(max(0, line - 1))
        c = QTextCursor(block)
        if col:
            c.setPosition(block.position() + min(max(col - 1, 0), max(block.length() - 1, 0)))
        self.setTextCursor(c)
        self.centerCursor()
        self.setFocus(Qt.FocusReason.OtherFocusReason)
        self.reveal_cursor()
        QTimer.singleShot(0, self, self.reveal_cursor)    # again once the notebook has scrolled to the cell

    def reveal_cursor(self) -> None:
        """Scroll every scroll area this editor sits in (the notebook's) so the cursor's line is on
        screen: an editor taller than the view would leave it below the bottom edge."""
        from PySide6.QtWidgets import QScrollArea
        rect = self.cursorRect()
        w = self.parentWidget()
        while w is not None:
            if isinstance(w, QScrollArea) and w.widget() is not None and w.widget().isAncestorOf(self):
                at = self.viewport().mapTo(w.widget(), rect.center())
                w.ensureVisible(at.x(), at.y(), 40, max(rect.height() * 3, 60))
            w = w.parentWidget()

    def cursor_line_col(self) -> tuple[int, int]:
        c = self.textCursor()
        return c.blockNumber() + 1, c.positionInBlock() + 1

    # ------------------------------------------------------------------ markers
    def set_markers(self, markers: list[Marker], source: str = "check") -> None:
        """Show ``markers`` from ``source`` (a cell's own inline validation is ``local``, the
        worker's check ``check``): setting one source replaces only its marks, so a fix clears
        exactly the marks it fixed while the other source's stay."""
        self._marker_sources[source] = list(markers)
        merged, seen = [], set()
        for ms in self._marker_sources.values():
            for m in ms:
                if (m.line, m.col, m.message) not in seen:
                    seen.add((m.line, m.col, m.message))
                    merged.append(m)
        self.markers = merged
        self._show_markers()

    def marker_colour(self, severity: str = "error") -> QColor:
        """The colour of a mark of ``severity`` on this editor's palette."""
        return QColor(colour("error" if severity == "error" else "warn", self.palette()))

    def _show_markers(self) -> None:
        sels = []
        for m in self.markers:
            block = self.document().findBlockByNumber(max(0, m.line - 1))
            if not block.isValid():
                continue
            tone = self.marker_colour(m.severity)
            line_sel = QTextEdit.ExtraSelection()
            line_sel.format.setBackground(QColor(tone.red(), tone.green(), tone.blue(), 28))
            line_sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            line_sel.cursor = QTextCursor(block)
            sels.append(line_sel)
            start = block.position() + (min(m.col - 1, max(block.length() - 2, 0)) if m.col else 0)
            text = block.text()
            rel = start - block.position()
            end = rel + 1
            while end < len(text) and (text[end].isalnum() or text[end] == "_") and \
                    (text[rel].isalnum() or text[rel] == "_"):
                end += 1
            if not m.col:
                rel, end = 0, max(len(text), 1)
            under = QTextEdit.ExtraSelection()
            fmt = QTextCharFormat()
            fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
            fmt.setUnderlineColor(tone)
            under.format = fmt
            cur = QTextCursor(block)
            cur.setPosition(block.position() + rel)
            cur.setPosition(block.position() + min(end, max(len(text), rel + 1)), QTextCursor.MoveMode.KeepAnchor)
            under.cursor = cur
            sels.append(under)
        self.setExtraSelections(sels)
        self._gutter.update()

    def marker_at(self, line: int) -> Marker | None:
        return next((m for m in self.markers if m.line == line), None)

    def changeEvent(self, e) -> None:
        super().changeEvent(e)
        if e.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._show_markers()                 # the marks' colours for the new palette; the gutter repaints
            if self.highlighter is not None:
                self._programmatic = True        # re-colouring is no edit
                try:
                    self.highlighter.set_palette(self.palette())
                finally:
                    self._programmatic = False

    def event(self, e) -> bool:
        if e.type() == e.Type.ToolTip:
            c = self.cursorForPosition(self.viewport().mapFromGlobal(e.globalPos()))
            m = self.marker_at(c.blockNumber() + 1)
            if m:
                QToolTip.showText(e.globalPos(), m.message, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(e)

    # ------------------------------------------------------------------ gutter
    def gutter_width(self) -> int:
        digits = len(str(max(1, self.blockCount())))
        return 14 + self.fontMetrics().horizontalAdvance("9") * max(digits, 2)

    def _update_margins(self, *_):
        self.setViewportMargins(self.gutter_width(), 0, 0, 0)

    def _scroll_gutter(self, rect, dy) -> None:
        if dy:
            self._gutter.scroll(0, dy)
        else:
            self._gutter.update(0, rect.y(), self._gutter.width(), rect.height())

    def resizeEvent(self, e) -> None:
        super().resizeEvent(e)
        cr = self.contentsRect()
        self._gutter.setGeometry(QRect(cr.left(), cr.top(), self.gutter_width(), cr.height()))

    def gutter_background(self) -> QColor:
        """The line-number gutter's background: the palette's window colour, set off from the text's base."""
        return self.palette().color(QPalette.ColorRole.Window)

    def gutter_numbers(self) -> QColor:
        """The line numbers' colour: the muted text colour, ≥ 4.5:1 on the gutter in light and dark."""
        return QColor(colour("muted", self.palette()))

    def paint_gutter(self, event) -> None:
        p = QPainter(self._gutter)
        p.fillRect(event.rect(), self.gutter_background())
        numbers = self.gutter_numbers()
        block = self.firstVisibleBlock()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        bottom = top + round(self.blockBoundingRect(block).height())
        severity_at = {}
        for m in self.markers:
            severity_at.setdefault(m.line, m.severity)
        while block.isValid() and top <= event.rect().bottom():
            if block.isVisible() and bottom >= event.rect().top():
                n = block.blockNumber() + 1
                if n in severity_at:
                    p.setBrush(self.marker_colour(severity_at[n]))
                    p.setPen(Qt.PenStyle.NoPen)
                    d = 6
                    p.drawEllipse(2, top + (self.fontMetrics().height() - d) // 2, d, d)
                p.setPen(numbers)
                p.drawText(0, top, self._gutter.width() - 4, self.fontMetrics().height(),
                           Qt.AlignmentFlag.AlignRight, str(n))
            block = block.next()
            top = bottom
            bottom = top + round(self.blockBoundingRect(block).height())
        p.end()
