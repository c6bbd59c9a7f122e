"""A small editable table whose columns are text fields or dropdowns; rows compose grammar text."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..widgets.wheel_guard import guard


class RowTable(QWidget):
    """Columns: (header, choices-or-None, editable-combo). ``rows()`` gives lists of strings;
    ``edited`` fires on any user change (cell text, dropdown, add/remove row); ``widgetMade`` for
    each dropdown the table creates (the document view routes its undo keys). ``tips``: one tooltip
    per column (what the field means, its syntax), given to the header, to every cell's text item
    and to every dropdown, rows added later included; ``add_tip``: the add button's."""
    edited = Signal()
    widgetMade = Signal(QWidget)

    def __init__(self, columns: list[tuple[str, list[str] | None]], *, defaults: list[str], parent=None,
                 add_label: str = "+ add", tips: list[str] | None = None, add_tip: str = ""):
        super().__init__(parent)
        self.columns = columns
        self.defaults = defaults
        self.tips = list(tips or [])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, len(columns))
        self.table.setHorizontalHeaderLabels([c[0] for c in columns])
        for c in range(len(columns)):
            if self.tip(c):
                self.table.horizontalHeaderItem(c).setToolTip(self.tip(c))
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.itemChanged.connect(lambda _it: self._user_edit())
        lay.addWidget(self.table)
        buttons = QHBoxLayout()
        self.add_button = QPushButton(add_label)
        self.remove_button = QPushButton("− remove")
        self.add_button.setToolTip(add_tip or f"add a row ({', '.join(d or '—' for d in defaults)}); edit its cells in place")
        self.remove_button.setToolTip("remove the selected rows (select a row first: with nothing selected, nothing "
                                      "is removed); Edit ▸ Undo brings them back")
        self.add_button.clicked.connect(self._add)
        self.remove_button.clicked.connect(self._remove)
        self.remove_button.setEnabled(False)                 # until a row is selected
        self.table.itemSelectionChanged.connect(
            lambda: self.remove_button.setEnabled(bool(self.table.selectedIndexes())))
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        lay.addLayout(buttons)
        self._loading = False
        self._fit()

    def tip(self, c: int) -> str:
        """The tooltip of column ``c`` (empty when none was given)."""
        return self.tips[c] if c < len(self.tips) else ""

    def _fit(self) -> None:
        h = self.table.horizontalHeader().height() + 4 + sum(self.table.rowHeight(r) for r in range(self.table.rowCount()))
        self.table.setFixedHeight(max(h, self.table.horizontalHeader().height() + 28))

    def _user_edit(self) -> None:
        if not self._loading:
            self.edited.emit()

    def _put_row(self, r: int, values: list[str]) -> None:
        for c, (_, choices) in enumerate(self.columns):
            v = values[c] if c < len(values) else ""
            if choices is not None:
                box = QComboBox()
                box.setEditable(True)
                box.addItems(choices)
                if box.findText(v) < 0:
                    box.addItem(v)
                box.setCurrentText(v)
                box.setToolTip(self.tip(c))
                box.currentTextChanged.connect(lambda _t: self._user_edit())
                guard(box)                       # the wheel never edits an unfocused dropdown
                self.table.setCellWidget(r, c, box)
                self.widgetMade.emit(box)
            else:
                item = QTableWidgetItem(v)
                item.setToolTip(self.tip(c))
                self.table.setItem(r, c, item)

    def set_rows(self, rows: list[list[str]]) -> None:
        """Show rows without emitting ``edited`` (the model changed elsewhere)."""
        if rows == self.rows():
            return
        self._loading = True
        try:
            self.table.setRowCount(len(rows))
            for r, values in enumerate(rows):
                self._put_row(r, values)
        finally:
            self._loading = False
        self._fit()

    def rows(self) -> list[list[str]]:
        out = []
        for r in range(self.table.rowCount()):
            row = []
            for c, (_, choices) in enumerate(self.columns):
                if choices is not None:
                    w = self.table.cellWidget(r, c)
                    row.append(w.currentText().strip() if w else "")
                else:
                    it = self.table.item(r, c)
                    row.append(it.text().strip() if it else "")
            out.append(row)
        return out

    def set_cell(self, r: int, c: int, text: str) -> None:
        """Edit one cell as a user would (emits ``edited``)."""
        if self.columns[c][1] is not None:
            self.table.cellWidget(r, c).setCurrentText(text)
        else:
            self.table.item(r, c).setText(text)

    def _add(self) -> None:
        r = self.table.rowCount()
        self._loading = True
        self.table.insertRow(r)
        self._put_row(r, list(self.defaults))
        self._loading = False
        self._fit()
        self.edited.emit()

    def _remove(self) -> None:
        """Remove the selected rows — only those: with nothing selected, nothing is removed."""
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True)
        if not rows:
            return
        for r in rows:
            self.table.removeRow(r)
        self._fit()
        self.edited.emit()

    def setEnabled(self, on: bool) -> None:
        super().setEnabled(on)
        self.add_button.setVisible(on)
        self.remove_button.setVisible(on)
