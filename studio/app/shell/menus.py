"""What the menus act on: the current cell of a document (for Ctrl+Enter / Shift+Enter), the find
bar over the current code cell (``CellCommands``, an object the window holds: ``window.cells``), and
the keyboard-shortcut list (Help ▸ Keyboard shortcuts), read
from the window's own actions so it is never out of date.

**Running a cell** (Ctrl+Enter; Shift+Enter runs it and moves to the next cell):

| cell | what "run" does |
|---|---|
| Conformance | runs conformance (its seed and corpus size as set) — as its ▶ button |
| Gradcheck | runs gradcheck (its parameters as set) — as its ▶ button |
| Run | runs the op on the device on the chosen input — as its ▶ button |
| every contract cell (Op, Signature, Bindings, Tolerance, Backward, Reference, Kernel, op.toml) | checks the document now: parse, checker, compile on the device; problems refresh |

The current cell is the one holding the keyboard focus, else the first cell in view."""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QKeySequence, QTextCursor, QTextDocument
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

PROOF_CELLS = {"conformance": "conformance_panel", "gradcheck": "gradcheck_panel", "run": "run_panel"}


def cell_of(view, widget) -> str | None:
    """The key of the notebook cell that holds ``widget``, if any."""
    from ..cells.base import Cell
    w = widget
    while w is not None and w is not view:
        if isinstance(w, Cell):
            for key, c in view.notebook.cells.items():
                if c is w:
                    return key
        w = w.parentWidget()
    return None


def cell_in_view(view) -> str | None:
    """The first cell whose body shows in the notebook's viewport."""
    scroll = view.notebook.scroll
    top = scroll.verticalScrollBar().value()
    for key, c in view.notebook.cells.items():
        if c.isVisible() and c.y() + c.height() > top + 4:
            return key
    return next(iter(view.notebook.cells), None)


def current_cell(view, focus=None) -> str | None:
    return cell_of(view, focus) or cell_in_view(view)


def run_cell(view, key: str) -> str:
    """Run the cell ``key`` as the table above says; returns what was done ("conformance",
    "gradcheck", "run", "check")."""
    if key in PROOF_CELLS:
        panel = getattr(view, PROOF_CELLS[key])
        if panel.run_button.isEnabled():           # not while its run is in flight
            panel.request_run()                    # what its ▶ button asks for
        return key
    view.checker.check_now()
    return "check"


def next_cell(view, key: str) -> str | None:
    keys = list(view.notebook.cells)
    i = keys.index(key) if key in keys else -1
    return keys[i + 1] if i + 1 < len(keys) else None


def focus_cell(view, key: str) -> None:
    """Show cell ``key`` and put the keyboard focus in it: its editor, else its first control."""
    view.notebook.show_cell(key)
    cell = view.notebook.cells[key]
    target = getattr(cell, "editor", None) or getattr(cell, "run_button", None)
    if target is None or not target.isEnabled():
        target = next((w for w in cell.findChildren(QWidget)
                       if w.focusPolicy() & Qt.FocusPolicy.TabFocus and w.isEnabled() and w.isVisibleTo(cell)), cell)
    target.setFocus(Qt.FocusReason.ShortcutFocusReason)


class CellCommands(QObject):
    """The commands on the current document's cells (Run ▸ Run cell, Edit ▸ Find…, View ▸ Go to cell…).
    Needs the window's ``current()`` and ``find_bar``. A child of the window: its ``focus_changed``
    connection goes with it."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.last_editor: dict[int, QPlainTextEdit] = {}     # id(view) -> the code editor last focused there

    def run_current_cell(self, advance: bool = False) -> str | None:
        """Ctrl+Enter: run the cell holding the focus (the table above says what that means per cell);
        Shift+Enter: run it, then move to the next cell. Returns what was done."""
        view = self.window.current()
        if view is None:
            return None
        key = current_cell(view, QApplication.focusWidget() or self.window.focusWidget())
        if key is None:
            return None
        done = run_cell(view, key)
        if advance:
            nxt = next_cell(view, key)
            if nxt is not None:
                focus_cell(view, nxt)
        return done

    def focus_changed(self, _old, new) -> None:
        view = self.window.current()
        if view is not None and isinstance(new, QPlainTextEdit) and view.isAncestorOf(new):
            self.last_editor[id(view)] = new

    def forget(self, view) -> None:
        self.last_editor.pop(id(view), None)

    def find_target(self) -> QPlainTextEdit | None:
        """The code editor Find searches: the focused one, else the one focused last in this document,
        else the Kernel cell's."""
        view = self.window.current()
        if view is None:
            return None
        focus = QApplication.focusWidget() or self.window.focusWidget()
        if isinstance(focus, QPlainTextEdit) and view.isAncestorOf(focus):
            return focus
        last = self.last_editor.get(id(view))
        if last is not None and view.isAncestorOf(last):
            return last
        return getattr(view.notebook.cells.get("kernel"), "editor", None)

    def find_bar_open(self) -> None:
        if self.window.current() is not None:
            self.window.find_bar.open_bar()

    def find(self, forward: bool) -> None:
        if not self.window.find_bar.isVisible():
            self.find_bar_open()
        self.window.find_bar.find(forward=forward)

    def goto_cell(self) -> None:
        view = self.window.current()
        if view is not None:
            view.notebook.jump_box.setFocus(Qt.FocusReason.ShortcutFocusReason)
            view.notebook.jump_box.showPopup()


class FindBar(QWidget):
    """Find in a code cell: the text, previous / next (wrapping), match case, the number of matches."""
    closed = Signal()

    def __init__(self, target_fn, parent=None):
        super().__init__(parent)
        self.setObjectName("find_bar")
        self.target_fn = target_fn             # () -> QPlainTextEdit | None
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 2, 8, 2)
        self.where = QLabel("find in")
        self.where.setProperty("note", True)
        self.text = QLineEdit()
        self.text.setObjectName("find_text")
        self.text.setPlaceholderText("find in the current code cell…")
        self.text.setToolTip("text to find in the current code cell (Enter: next, Shift+Enter: previous, Esc: close)")
        self.case = QCheckBox("match case")
        self.case.setToolTip("find only matches with the same upper and lower case")
        self.prev = QToolButton()
        self.prev.setText("▲")
        self.prev.setToolTip("previous match (Shift+F3)")
        self.next = QToolButton()
        self.next.setText("▼")
        self.next.setToolTip("next match (F3)")
        self.count = QLabel("")
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("close the find bar (Esc)")
        for w in (self.where, self.text, self.case, self.prev, self.next, self.count):
            lay.addWidget(w)
        lay.addStretch(1)
        lay.addWidget(self.close_button)
        self.text.textChanged.connect(lambda _t: self.find(forward=True, from_start=True))
        self.text.returnPressed.connect(lambda: self.find(forward=True))
        self.next.clicked.connect(lambda: self.find(forward=True))
        self.prev.clicked.connect(lambda: self.find(forward=False))
        self.case.toggled.connect(lambda _c: self.find(forward=True, from_start=True))
        self.close_button.clicked.connect(self.close_bar)
        self.editor: QPlainTextEdit | None = None
        self.setVisible(False)

    def open_bar(self) -> None:
        self.editor = self.target_fn()
        name = getattr(self.editor, "objectName", lambda: "")() if self.editor is not None else ""
        self.where.setText("find in " + (self._cell_name() or name or "—"))
        if self.editor is not None and self.editor.textCursor().hasSelection():
            self.text.setText(self.editor.textCursor().selectedText())
        self.setVisible(True)
        self.text.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.text.selectAll()
        self._count()

    def _cell_name(self) -> str:
        from ..cells.base import Cell
        w = self.editor
        while w is not None:
            if isinstance(w, Cell):
                return w.title
            w = w.parentWidget()
        return ""

    def close_bar(self) -> None:
        self.setVisible(False)
        if self.editor is not None:
            self.editor.setFocus(Qt.FocusReason.OtherFocusReason)
        self.closed.emit()

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.close_bar()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.find(forward=False)
            return
        super().keyPressEvent(event)

    def _flags(self, forward: bool):
        f = QTextDocument.FindFlag(0)
        if not forward:
            f |= QTextDocument.FindFlag.FindBackward
        if self.case.isChecked():
            f |= QTextDocument.FindFlag.FindCaseSensitively
        return f

    def find(self, *, forward: bool = True, from_start: bool = False) -> bool:
        """Select the next (or previous) match in the editor, wrapping around; False when none."""
        ed = self.editor
        needle = self.text.text()
        self._count()
        if ed is None or not needle:
            return False
        if from_start:
            c = ed.textCursor()
            c.setPosition(min(c.selectionStart(), c.position()))
            ed.setTextCursor(c)
        if ed.find(needle, self._flags(forward)):
            return True
        c = ed.textCursor()                      # wrap around
        c.movePosition(QTextCursor.MoveOperation.Start if forward else QTextCursor.MoveOperation.End)
        ed.setTextCursor(c)
        return ed.find(needle, self._flags(forward))

    def matches(self) -> int:
        if self.editor is None or not self.text.text():
            return 0
        hay, needle = self.editor.toPlainText(), self.text.text()
        if not self.case.isChecked():
            hay, needle = hay.lower(), needle.lower()
        return hay.count(needle)

    def _count(self) -> None:
        n = self.matches()
        self.count.setText("" if not self.text.text() else (f"{n} match" + ("" if n == 1 else "es") if n else "no match"))


def shortcut_rows(window) -> list[tuple[str, str, str]]:
    """(menu, action, shortcut) for every menu action that has a shortcut, in menu order."""
    rows = []
    for top in window.menuBar().actions():
        menu = top.menu()
        if menu is None:
            continue
        stack = [(menu, top.text().replace("&", ""))]
        while stack:
            m, title = stack.pop(0)
            for a in m.actions():
                if a.menu() is not None:
                    stack.append((a.menu(), f"{title} ▸ {a.text().replace('&', '')}"))
                elif not a.isSeparator():
                    keys = [k.toString(QKeySequence.SequenceFormat.NativeText) for k in a.shortcuts()]
                    if keys:
                        rows.append((title, a.text().replace("&", ""), ", ".join(keys)))
    return rows


class ShortcutsDialog(QDialog):
    def __init__(self, window):
        super().__init__(window)
        self.setWindowTitle("Keyboard shortcuts")
        lay = QVBoxLayout(self)
        rows = shortcut_rows(window)
        self.table = QTableWidget(len(rows), 3)
        self.table.setHorizontalHeaderLabels(["menu", "action", "keys"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setToolTip("every menu action that has a keyboard shortcut")
        for r, row in enumerate(rows):
            for c, v in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(v))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        lay.addWidget(self.table)
        note = QLabel("In a code cell, Ctrl+Enter runs the cell and Shift+Enter runs it and moves to the next one "
                      "(Conformance, Gradcheck and Run run their job; the other cells check the document).")
        note.setWordWrap(True)
        note.setProperty("note", True)
        lay.addWidget(note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("close this list")
        lay.addWidget(buttons)
        self.resize(560, 520)
