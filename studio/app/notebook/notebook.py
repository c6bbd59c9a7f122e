"""The notebook: one op document as a column of cells in the order of the authoring journey —
Op, Signature, Bindings, Tolerance & category, Backward, Reference, Kernel, Conformance,
Gradcheck, Run — with op.toml as text for power users. Problems land in the cell they belong to
and a click in the problems panel jumps to the exact line and column."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ...engine.contract.package import MANIFEST
from ..cells.backward import BackwardCell
from ..cells.bindings import BindingsCell
from ..cells.code import KernelCell, ManifestCell, ReferenceCell
from ..cells.metadata import MetadataCell
from ..cells.signature import SignatureCell
from ..cells.tolerance import ToleranceCell
from ..widgets.editors import Marker
from ..widgets.fitting import ElidedLabel, fit_column
from .problems import Problem
from ..widgets.wheel_guard import guard, guard_tree

EMBEDDED = ("signature", "bindings.text", "backward.text", "kernel.invocations", "backward.bindings",
            "backward.invocations")
HEADER_PX = 36            # a cell's header: what must be in view for the cell to count as shown
FIELD_CELL = {"signature": "signature", "bindings": "bindings", "tolerance": "tolerance", "backward": "backward",
              "kernel": "kernel", "reference": "reference", "trust": "reference", "id": "op", "summary": "op",
              "license": "op", "visibility": "op", "authors": "op"}


def embedded_position(doc, line: int, col: int | None) -> tuple[str, int, int | None] | None:
    """(field, line, col) inside an embedded text of op.toml for a position in op.toml."""
    if not doc.data:
        return None
    best = None
    for dotted in EMBEDDED:
        l0, c0 = doc.position(dotted)
        text = doc.field(dotted)
        if l0 is None or not isinstance(text, str):
            continue
        last = l0 + text.count("\n")
        if l0 <= line <= last and (best is None or l0 > best[1]):
            best = (dotted, l0, c0)
    if best is None:
        return None
    dotted, l0, c0 = best
    return dotted, line - l0 + 1, (col - c0 + 1 if (col is not None and line == l0) else col)


class Notebook(QWidget):
    def __init__(self, doc, panels: list, background=None, parent=None):
        super().__init__(parent)
        self.doc = doc
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        nav = QHBoxLayout()
        nav.setContentsMargins(8, 4, 8, 0)
        self.heading = ElidedLabel(bold=True)          # the op's id (● when unsaved)
        self.where = ElidedLabel(mode=Qt.TextElideMode.ElideMiddle)      # its folder
        self.where.setProperty("note", True)
        self.jump_box = QComboBox()
        self.jump_box.setToolTip("scroll the notebook to a cell (it unfolds if folded): Op, Signature, Bindings, "
                                 "… Run, op.toml (text)")
        nav.addWidget(self.heading)
        nav.addWidget(self.where, 1)
        nav.addWidget(QLabel("go to"))
        nav.addWidget(self.jump_box)
        lay.addLayout(nav)
        self.banner = QLabel()                    # e.g. "your editable copy of the shipped …" (set_banner)
        self.banner.setObjectName("notebook_banner")
        self.banner.setWordWrap(True)
        self.banner.setProperty("banner", True)
        self.banner.setContentsMargins(8, 2, 8, 2)
        self.banner.setVisible(False)
        lay.addWidget(self.banner)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setObjectName("notebook_scroll")
        lay.addWidget(self.scroll)
        inner = QWidget()
        inner.setObjectName("notebook_inner")
        self.column = QVBoxLayout(inner)
        self.column.setSpacing(10)
        self.column.setContentsMargins(12, 10, 12, 40)
        self.scroll.setWidget(inner)

        n = iter(range(1, 100))
        contract = [MetadataCell(next(n), doc, background), SignatureCell(next(n), doc), BindingsCell(next(n), doc),
                    ToleranceCell(next(n), doc), BackwardCell(next(n), doc), ReferenceCell(next(n), doc),
                    KernelCell(next(n), doc)]
        for p in panels:
            p.number.setText(f"[{next(n)}]")
        self.manifest = ManifestCell(next(n), doc)
        self.manifest.set_expanded(False)
        self.cells = {c.key: c for c in [*contract, *panels, self.manifest]}
        for c in self.cells.values():
            self.column.addWidget(c)
            self.jump_box.addItem(c.title, c.key)
        self.column.addStretch(1)
        fit_column(inner)                   # the column reflows: no sideways scroll at 1024 px
        guard_tree(inner)                         # the wheel scrolls the notebook, never an unfocused control
        guard(self.jump_box)
        self.jump_box.activated.connect(lambda i: self.show_cell(self.jump_box.itemData(i)))
        self.scroll.verticalScrollBar().valueChanged.connect(self._follow)
        self._title()
        doc.changed.connect(lambda *_: self._title())
        doc.dirtyChanged.connect(lambda *_: self._title())

    def _title(self) -> None:
        where = str(self.doc.path) if self.doc.path else "not saved yet"
        self.heading.setText(f"{self.doc.field('id') or 'untitled'}{' ●' if self.doc.dirty else ''}")
        self.where.setText(f"— {where}")

    def set_banner(self, text: str | None) -> None:
        self.banner.setText(text or "")
        self.banner.setToolTip(text or "")
        self.banner.setVisible(bool(text))

    def cell(self, key: str):
        return self.cells[key]

    def show_cell(self, key: str) -> None:
        """Go to a cell: unfolded, its header at the top of the notebook (as far as the scroll goes)."""
        c = self.cells[key]
        if not c.expanded:
            c.set_expanded(True)
        self._to_top(c)
        # again after the layout settles, so the position is right even for a just-expanded cell
        QTimer.singleShot(0, lambda: self._to_top(c))

    def reveal_cell(self, key: str) -> None:
        """Bring a cell into view for a run asked from elsewhere (a menu, F5): its header at the top,
        unless the cell is in view already (the user is looking at it: its ▶ was clicked)."""
        c = self.cells[key]
        if not c.expanded:
            c.set_expanded(True)
        top = c.y() - self.scroll.verticalScrollBar().value()
        seen = min(top + c.height(), self.scroll.viewport().height()) - max(top, 0)
        if seen < HEADER_PX:
            self.show_cell(key)

    def header_in_view(self, key: str) -> bool:
        c = self.cells[key]
        top = c.y() - self.scroll.verticalScrollBar().value()
        return 0 <= top and top + HEADER_PX <= self.scroll.viewport().height()

    def _to_top(self, c) -> None:
        bar = self.scroll.verticalScrollBar()
        bar.setValue(max(0, min(c.y() - self.column.spacing(), bar.maximum())))
        self._follow()

    def top_cell(self) -> str | None:
        """The key of the cell at the top of the view (the one the notebook is "at")."""
        y = self.scroll.verticalScrollBar().value() + HEADER_PX
        at = None
        for key, c in self.cells.items():
            if c.isVisible() and c.y() <= y:
                at = key
        return at or next(iter(self.cells), None)

    def _follow(self, *_a) -> None:
        """The "go to" box names the cell at the top of the view, as the notebook scrolls."""
        key = self.top_cell()
        i = self.jump_box.findData(key)
        if i >= 0 and i != self.jump_box.currentIndex() and not self.jump_box.view().isVisible():
            self.jump_box.blockSignals(True)
            self.jump_box.setCurrentIndex(i)
            self.jump_box.blockSignals(False)

    # ------------------------------------------------------------------ problems
    def set_problems(self, problems: list[Problem]) -> None:
        by_file: dict[str, list] = {}
        embedded: dict[str, list] = {}
        for p in problems:
            if p.file == MANIFEST and p.line is not None:
                hit = embedded_position(self.doc, p.line, p.col)
                if hit is not None:
                    embedded.setdefault(hit[0], []).append((p, hit[1], hit[2]))
            by_file.setdefault(p.file, []).append(p)
        from ...engine.errors import StudioError
        as_err = {k: [StudioError(p.message, file=p.file, line=p.line, col=p.col, hint=p.hint) for p in v]
                  for k, v in by_file.items()}
        self.cells["kernel"].set_problems(as_err.get(self.doc.kernel_file, []))
        bw = self.cells["backward"]
        bw.device_editor.set_markers([Marker(e.line, e.col, e.message) for e in as_err.get(bw.device_kernel(), [])
                                      if e.line is not None])
        self.cells["reference"].set_problems(as_err.get(self.doc.reference_file, []))
        self.cells["manifest"].set_check_problems(as_err.get(MANIFEST, []))
        for dotted, editor in (("bindings.text", self.cells["bindings"].editor), ("backward.text", bw.editor),
                               ("backward.bindings", bw.device_bindings)):
            found = embedded.get(dotted, [])
            editor.set_markers([Marker(ln, c, p.message) for p, ln, c in found])      # none found: cleared
            if dotted == "bindings.text":
                self.cells["bindings"].set_check_problems([p.message for p, _ln, _c in found])

    def jump(self, p: Problem) -> None:
        """Show the cell a problem belongs to and put the cursor at its line and column."""
        if p.file in (self.doc.kernel_file, self.doc.reference_file) and p.file is not None:
            key = "kernel" if p.file == self.doc.kernel_file else "reference"
            self.show_cell(key)
            if p.line is not None:
                self.cells[key].editor.goto(p.line, p.col)
            return
        if p.file is not None and p.file == self.cells["backward"].device_kernel():
            self.show_cell("backward")
            if p.line is not None:
                self.cells["backward"].device_editor.goto(p.line, p.col)
            return
        if p.file == MANIFEST and p.line is not None:
            hit = embedded_position(self.doc, p.line, p.col)
            if hit is not None:
                dotted, line, col = hit
                self._jump_embedded(dotted, line, col)
                return
            self.show_cell("manifest")
            self.cells["manifest"].editor.goto(p.line, p.col)
            return
        if p.field:
            key = FIELD_CELL.get(p.field.split(".")[0])
            if key:
                self.show_cell(key)
                return
        self.show_cell("manifest")

    def _jump_embedded(self, dotted: str, line: int, col: int | None) -> None:
        if dotted == "signature":
            self.show_cell("signature")
            w: QLineEdit = self.cells["signature"].text
            w.setFocus(Qt.FocusReason.OtherFocusReason)
            w.setCursorPosition(max((col or 1) - 1, 0))
        elif dotted in ("kernel.invocations", "backward.invocations"):
            key = dotted.split(".")[0]
            self.show_cell(key)
            w = self.cells[key].invocations if key == "kernel" else self.cells[key].device_invocations
            w.setFocus(Qt.FocusReason.OtherFocusReason)
            w.setCursorPosition(max((col or 1) - 1, 0))
        else:
            editors = {"bindings.text": ("bindings", "editor"), "backward.text": ("backward", "editor"),
                       "backward.bindings": ("backward", "device_bindings")}
            key, attr = editors[dotted]
            self.show_cell(key)
            getattr(self.cells[key], attr).goto(line, col)
