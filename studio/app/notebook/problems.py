"""The problems panel: every error the engine found in the current document — parse errors,
checker findings, compile errors — with its file, line and column. Click one to jump there."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem

from ...engine.errors import StudioError
from .naga_words import in_product_words
from ..widgets.style import colour


@dataclass(frozen=True)
class Problem:
    message: str
    file: str | None = None        # path relative to the package ("op.toml", "forward.wgsl")
    line: int | None = None
    col: int | None = None
    field: str | None = None
    hint: str | None = None
    severity: str = "error"        # error | warning
    source: str = "check"          # parse | check | compile | worker

    @property
    def where(self) -> str:
        """The place as the author finds it: a form's field by its name first (its op.toml position
        after it, in brackets), else file:line:col."""
        s = self.file or "op"
        if self.line is not None:
            s += f":{self.line}" + (f":{self.col}" if self.col is not None else "")
        if self.field and (self.file in (None, "op.toml")):
            return f"field {self.field} ({s})"
        if self.field:
            s += f" [{self.field}]"
        return s

    def key(self) -> tuple:
        return (self.file, self.line, self.col, self.message)


def relative(file: str | None, roots: list[Path]) -> str | None:
    """A reported path made relative to the package (the worker reports snapshot paths)."""
    if not file:
        return None
    p = Path(file)
    for r in roots:
        try:
            return p.relative_to(r).as_posix()
        except ValueError:
            continue
    return p.name if p.is_absolute() else file


# naga's source excerpt under its message: "┌─ wgsl:3:5", "│", "3 │     x = 1", "│     ^^^^ label";
# the problems table has one line a problem and the editor marks the place, so only the words stay
_ART_LINE = re.compile(r"^\s*(?:\d+\s*)?(?:[│|┌└╭╰├]|─)")
_CARETS = re.compile(r"(?:(?<=\s)|^)(?:\^{2,}|~{2,})(?=\s|$)")     # (a lone ^ is WGSL's xor)


def plain_message(message: str) -> str:
    """A compiler message without its caret art: the excerpt lines go, a caret line's label stays."""
    words = []
    for line in str(message).splitlines():
        if _ART_LINE.match(line):
            label = line.split("│", 1)[-1] if "│" in line else line
            if "^" not in label and "~" not in label:
                continue                                   # the excerpt's frame or its source line
            line = re.sub(r"^\s*[\^~]+", "", label)       # the caret under the place, its label kept
        line = _CARETS.sub(" ", line)
        line = " ".join(line.split())
        if line and line not in words:
            words.append(line)
    return " — ".join(words)


def from_error(e: StudioError, roots: list[Path], source: str = "check", severity: str = "error") -> Problem:
    """(wgpu's compiler notation in a message is written in WGSL's words: naga_words.py; its caret
    art is left out: ``plain_message``)"""
    return Problem(plain_message(in_product_words(e.message)), relative(e.file, roots), e.line, e.col, e.field,
                   e.hint, severity, source)


def from_json(d: dict, roots: list[Path], source: str = "check", severity: str = "error") -> Problem:
    return from_error(StudioError.from_dict(d), roots, source, severity)


def with_related(e: StudioError, roots: list[Path], source: str = "check", severity: str = "error") -> list[Problem]:
    """The problem and one more at each place it relates to: a contract/kernel disagreement is
    marked on the descriptor line *and* on the WGSL line (the engine's ``related`` positions)."""
    out = [from_error(e, roots, source, severity)]
    for r in e.related:
        if r.file is None and r.line is None:
            continue
        out.append(Problem(f"{e.message} — here: {r.message}", relative(r.file, roots), r.line, r.col, r.field,
                           r.hint or e.hint, severity, source))
    return out


def all_from_json(d: dict, roots: list[Path], source: str = "check", severity: str = "error") -> list[Problem]:
    return with_related(StudioError.from_dict(d), roots, source, severity)


class ProblemsPanel(QTreeWidget):
    """``activated(problem)`` when the user clicks a row."""
    activated = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("problems")
        self.setColumnCount(4)
        self.setHeaderLabels(["", "where", "message", "hint"])
        self.setRootIsDecorated(False)
        self.setAlternatingRowColors(True)
        h = self.header()
        h.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.problems: list[Problem] = []
        self.itemClicked.connect(lambda it, _c: self.activated.emit(it.data(0, Qt.ItemDataRole.UserRole)))
        self.itemActivated.connect(lambda it, _c: self.activated.emit(it.data(0, Qt.ItemDataRole.UserRole)))

    def set_problems(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        self.clear()
        for p in self.problems:
            it = QTreeWidgetItem(["✖" if p.severity == "error" else "⚠", p.where, p.message, p.hint or ""])
            it.setForeground(0, self._mark_colour(p))
            it.setToolTip(2, p.message + (f"\nhint: {p.hint}" if p.hint else ""))
            it.setData(0, Qt.ItemDataRole.UserRole, p)
            self.addTopLevelItem(it)

    def _mark_colour(self, p: Problem) -> QColor:
        """The ✖ / ⚠ mark's colour on the current palette (error or warn)."""
        return QColor(colour("error" if p.severity == "error" else "warn", self.palette()))

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            for i in range(self.topLevelItemCount()):       # the marks take the new palette's colours
                it = self.topLevelItem(i)
                it.setForeground(0, self._mark_colour(it.data(0, Qt.ItemDataRole.UserRole)))

    def row_of(self, problem: Problem) -> QTreeWidgetItem | None:
        for i in range(self.topLevelItemCount()):
            if self.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole) == problem:
                return self.topLevelItem(i)
        return None

    def summary(self) -> str:
        e = sum(p.severity == "error" for p in self.problems)
        w = len(self.problems) - e
        return f"{e} error{'s' if e != 1 else ''}" + (f", {w} warning{'s' if w != 1 else ''}" if w else "")
