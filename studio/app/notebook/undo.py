"""The document's undo: one QUndoStack per open document, covering every edit made through the
model's one setter — form fields, tables, dropdowns, code editors and the op.toml text alike.

Each edit is a command holding the package's text files before and after it; undo and redo put
them back through ``OpDocument.restore``, so every view, inline check and problem mark follows
as it does for any change. Typing in one place within ``MERGE_S`` seconds is one command (a word,
not a keystroke, per Ctrl+Z). Widgets' own per-widget undo is bypassed: Ctrl+Z / Ctrl+Shift+Z
(and Ctrl+Y) in any control of the document go to this stack (``UndoKeys``).
"""
from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeySequence, QUndoCommand, QUndoStack
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

from .model import FIELD, FILE, OpDocument

MERGE_S = 1.0
_EDIT_ID = 0x5ce11


def describe(key: str) -> str:
    if key.startswith(FILE):
        return f"edit {key[len(FILE):]}"
    if key.startswith(FIELD):
        return f"edit {key[len(FIELD):]}"
    return "edit"


class EditCommand(QUndoCommand):
    def __init__(self, doc: OpDocument, key: str, before: dict, after: dict, origin):
        super().__init__(describe(key))
        self.doc, self.key, self.before, self.after, self.origin = doc, key, before, after, origin
        self.at = time.monotonic()
        self._applied = True           # pushed after the edit happened: the first redo does nothing

    def id(self) -> int:
        return _EDIT_ID

    def mergeWith(self, other) -> bool:
        if not isinstance(other, EditCommand) or other.key != self.key or self.origin is None or \
                other.origin is not self.origin or other.at - self.at > MERGE_S:
            return False
        self.after, self.at = other.after, other.at
        return True

    def redo(self) -> None:
        if self._applied:
            self._applied = False
            return
        self.doc.restore(self.after)

    def undo(self) -> None:
        self.doc.restore(self.before)


class DocumentUndo(QObject):
    """The undo stack of one document. ``stack`` is a QUndoStack (undo/redo actions, clean state)."""

    def __init__(self, doc: OpDocument, parent=None):
        super().__init__(parent)
        self.doc = doc
        self.stack = QUndoStack(self)
        doc.contentEdited.connect(self._edited)

    def _edited(self, key: str, before: dict, origin) -> None:
        self.stack.push(EditCommand(self.doc, key, before, self.doc.files(), origin))


TEXT_WIDGETS = (QLineEdit, QPlainTextEdit, QTextEdit, QAbstractSpinBox, QComboBox)
_CTRL = Qt.KeyboardModifier.ControlModifier
_SHIFT = Qt.KeyboardModifier.ShiftModifier


def is_undo(e) -> bool:
    mods = e.modifiers() & (_CTRL | _SHIFT | Qt.KeyboardModifier.AltModifier)
    return (e.key() == Qt.Key.Key_Z and mods == _CTRL) or e.matches(QKeySequence.StandardKey.Undo)


def is_redo(e) -> bool:
    mods = e.modifiers() & (_CTRL | _SHIFT | Qt.KeyboardModifier.AltModifier)
    return ((e.key() == Qt.Key.Key_Z and mods == _CTRL | _SHIFT) or (e.key() == Qt.Key.Key_Y and mods == _CTRL)
            or e.matches(QKeySequence.StandardKey.Redo))


class UndoKeys(QObject):
    """Routes Ctrl+Z / Ctrl+Shift+Z (and the platform's other redo keys) from a control to the
    document's stack instead of the control's own undo. A window-level shortcut for the same keys
    (an Edit menu) still fires: the control no longer claims them."""

    def __init__(self, stack: QUndoStack, parent=None):
        super().__init__(parent)
        self.stack = stack

    def install(self, root: QWidget) -> None:
        """Watch ``root`` and every text-taking control under it."""
        for w in [root, *root.findChildren(QWidget)]:
            self.watch(w)

    def watch(self, w: QWidget) -> None:
        if isinstance(w, TEXT_WIDGETS) and not w.property("undo_keys"):
            w.setProperty("undo_keys", True)
            w.installEventFilter(self)
            if isinstance(w, (QPlainTextEdit, QTextEdit)):
                w.setUndoRedoEnabled(False)        # one history: the document's
            inner = w.lineEdit() if isinstance(w, (QComboBox, QAbstractSpinBox)) else None
            if inner is not None:
                self.watch(inner)

    def eventFilter(self, obj, e) -> bool:
        t = e.type()
        if t == QEvent.Type.ShortcutOverride and (is_undo(e) or is_redo(e)):
            return True                     # the control does not claim the keys; shortcuts may
        if t == QEvent.Type.KeyPress:
            if is_undo(e):
                self.stack.undo()
                return True
            if is_redo(e):
                self.stack.redo()
                return True
        return False
