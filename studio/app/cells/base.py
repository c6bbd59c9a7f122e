"""A notebook cell: a numbered, collapsible frame with a title, a status chip and a body."""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..widgets.editors import mono_font
from ..widgets.fitting import ElidedLabel
from ..widgets.style import colour


class Chip(ElidedLabel):
    """A small rounded status label (ok / error / warn / busy / idle); too long for its place, it
    ends in "…" and its tooltip holds the whole text."""

    def __init__(self, text: str = "", kind: str = "idle", parent=None):
        super().__init__(text, parent)
        from ..widgets.style import install
        install()
        self.kind = kind
        self.set(text, kind)

    def set(self, text: str, kind: str = "idle") -> None:
        if kind != self.property("chip"):
            self.setProperty("chip", kind)
            self.style().unpolish(self)
            self.style().polish(self)
        self.kind = kind
        self.setText(text)
        self.setVisible(bool(text))


class Cell(QFrame):
    """One step of the authoring journey. Subclasses fill ``self.body``."""
    toggled = Signal(bool)
    title = "Cell"
    key = "cell"

    def __init__(self, number: int, parent=None):
        super().__init__(parent)
        self.setObjectName(f"cell_{self.key}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setProperty("cell", True)
        from ..widgets.style import install
        install()
        outer = QVBoxLayout(self)
        outer.setContentsMargins(10, 6, 10, 10)
        head = QHBoxLayout()
        self.fold = QToolButton()
        self.fold.setArrowType(Qt.ArrowType.DownArrow)
        self.fold.setAutoRaise(True)
        self.fold.setToolTip(f"fold or unfold the {self.title} cell (its heading and status stay visible)")
        self.fold.clicked.connect(lambda: self.set_expanded(not self.expanded))
        self.number = QLabel(f"[{number}]")
        self.number.setProperty("note", True)               # the muted colour, from the app style sheet
        self.number.setFont(mono_font())
        self.heading = QLabel(f"<b>{self.title}</b>")
        self.chip = Chip()
        head.addWidget(self.fold)
        head.addWidget(self.number)
        head.addWidget(self.heading)
        head.addStretch(1)
        self.head_extra = QHBoxLayout()
        head.addLayout(self.head_extra)
        head.addWidget(self.chip)
        outer.addLayout(head)
        self.body = QWidget()
        self.body_layout = QVBoxLayout(self.body)
        self.body_layout.setContentsMargins(22, 2, 0, 0)
        outer.addWidget(self.body)
        self.expanded = True

    def set_expanded(self, on: bool) -> None:
        self.expanded = on
        self.body.setVisible(on)
        self.fold.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.toggled.emit(on)

    def set_status(self, text: str, kind: str = "idle") -> None:
        self.chip.set(text, kind)

    def set_running(self, on: bool) -> None:
        """Framed in the busy colour while its job runs (the app style sheet's ``running`` rule)."""
        if bool(self.property("running")) != on:
            self.setProperty("running", on)
            self.style().unpolish(self)
            self.style().polish(self)
            self.update()


PALETTE_EVENTS = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)


class ThemedLabel(QLabel):
    """A rich-text label whose spans take meaning colours (``style.colour``) of the current palette:
    ``set_rendered(render)`` keeps the function that writes the text and runs it again when the
    palette changes, so light ⇄ dark never leaves a span in the other theme's colour."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._render = None

    def set_rendered(self, render) -> None:
        """``render()`` → the label's text (None clears)."""
        self._render = render
        self.setText(render() if render is not None else "")

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in PALETTE_EVENTS and self._render is not None:
            text = self._render()
            if text != self.text():
                self.setText(text)


class InlineMessage(ThemedLabel):
    """A validation message under a field: the engine's own words, position and hint."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setVisible(False)
        self.error = None

    def show_error(self, err) -> None:
        """``err``: a StudioError or None (clears)."""
        self.error = err
        if err is None:
            self.set_rendered(None)
            self.clear()
            self.setVisible(False)
            return
        where = ""
        if err.line is not None:
            where = f"line {err.line}" + (f", col {err.col}" if err.col is not None else "") + ": "

        def render():
            text = f"<span style='color:{colour('error')}'>✖ {where}{_esc(err.message)}</span>"
            if err.hint:
                text += f"<br><span style='color:{colour('muted')}'>hint: {_esc(err.hint)}</span>"
            return text
        self.set_rendered(render)
        self.setVisible(True)

    def show_ok(self, text: str) -> None:
        self.error = None
        self.set_rendered(lambda: f"<span style='color:{colour('ok')}'>✔ {_esc(text)}</span>")
        self.setVisible(True)


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
