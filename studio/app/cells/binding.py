"""Two-way binding of widgets to the document model: edits go through ``OpDocument.set``;
model events come back to every other widget showing that key."""
from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QPlainTextEdit, QSpinBox

from ...engine.errors import StudioError
from ..notebook.model import FIELD, FILE, OpDocument


class Binder:
    """Connects widgets of one cell to one document. ``on_error(err)`` receives refused edits
    (e.g. a form edit while op.toml has a syntax error)."""

    def __init__(self, doc: OpDocument, on_error=None):
        self.doc = doc
        self.on_error = on_error or (lambda e: None)
        self._views: dict[str, list] = {}
        doc.changed.connect(self._changed)

    def write(self, key: str, value, origin) -> bool:
        try:
            self.doc.set(key, value, origin)
        except StudioError as e:
            self.on_error(e)
            return False
        return True

    def _changed(self, key: str, origin) -> None:
        for widget, show in self._views.get(key, []):
            if widget is None or widget is not origin:
                show()

    def watch(self, key: str, widget, show) -> None:
        """Call ``show()`` when ``key`` changes from anywhere but ``widget``."""
        self._views.setdefault(key, []).append((widget, show))

    def bound_fields(self) -> set[str]:
        """The manifest fields (dotted) that a widget of this binder shows and edits."""
        return {key[len(FIELD):] for key, views in self._views.items()
                if key.startswith(FIELD) and any(w is not None for w, _ in views)}

    # ------------------------------------------------------------------ widgets
    def line(self, widget: QLineEdit, dotted: str, *, to_value=str, to_text=str) -> QLineEdit:
        key = FIELD + dotted

        def show():
            v = self.doc.field(dotted)
            text = "" if v is None else to_text(v)
            if widget.text() != text:
                widget.blockSignals(True)
                widget.setText(text)
                widget.blockSignals(False)

        def edited(text):
            try:
                value = to_value(text)
            except (ValueError, StudioError) as e:
                self.on_error(e if isinstance(e, StudioError) else StudioError(str(e), field=dotted))
                return
            self.write(key, value, widget)

        widget.textEdited.connect(edited)
        self.watch(key, widget, show)
        show()
        return widget

    def combo(self, widget: QComboBox, dotted: str, *, default: str = "") -> QComboBox:
        key = FIELD + dotted

        def show():
            v = self.doc.field(dotted)
            text = default if v is None else str(v)
            if widget.currentText() != text:
                widget.blockSignals(True)
                if widget.findText(text) < 0:
                    widget.addItem(text)
                widget.setCurrentText(text)
                widget.blockSignals(False)

        widget.currentTextChanged.connect(lambda t: self.write(key, t, widget))
        self.watch(key, widget, show)
        show()
        return widget

    def spin(self, widget: QSpinBox, dotted: str, *, default: int = 0) -> QSpinBox:
        key = FIELD + dotted

        def show():
            v = self.doc.field(dotted)
            value = default if not isinstance(v, int) else v
            if widget.value() != value:
                widget.blockSignals(True)
                widget.setValue(value)
                widget.blockSignals(False)

        widget.valueChanged.connect(lambda v: self.write(key, int(v), widget))
        self.watch(key, widget, show)
        show()
        return widget

    def check(self, widget: QCheckBox, dotted: str) -> QCheckBox:
        key = FIELD + dotted

        def show():
            widget.blockSignals(True)
            widget.setChecked(bool(self.doc.field(dotted)))
            widget.blockSignals(False)

        widget.toggled.connect(lambda on: self.write(key, bool(on), widget))
        self.watch(key, widget, show)
        show()
        return widget

    def plain(self, widget: QPlainTextEdit, dotted: str) -> QPlainTextEdit:
        """A multi-line manifest string (justification, embedded texts)."""
        key = FIELD + dotted

        def show():
            v = self.doc.field(dotted)
            text = "" if v is None else str(v)
            if widget.toPlainText() != text:
                if hasattr(widget, "set_text"):
                    widget.set_text(text)
                else:
                    widget.blockSignals(True)
                    widget.setPlainText(text)
                    widget.blockSignals(False)

        if hasattr(widget, "edited"):
            widget.edited.connect(lambda t: self.write(key, t, widget))
        else:
            widget.textChanged.connect(lambda: self.write(key, widget.toPlainText(), widget))
        self.watch(key, widget, show)
        show()
        return widget

    def file(self, editor, rel_fn) -> None:
        """A CodeEditor showing one package file; ``rel_fn()`` names it (it can be renamed in op.toml)."""
        current = {"rel": rel_fn()}

        def show():
            rel = rel_fn()
            current["rel"] = rel
            editor.set_text(self.doc.text(rel))

        editor.edited.connect(lambda t: self.write(FILE + current["rel"], t, editor))
        self.doc.changed.connect(lambda key, origin: show() if origin is not editor and (
            key == FILE + current["rel"] or key in (FIELD + "kernel.file", FIELD + "reference.file")) else None)
        show()
