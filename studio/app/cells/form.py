"""Forms built from the field declaration (studio/engine/contract/fields.py).

A field's kind picks its widget through ``WIDGETS``, a registry from kind to a factory (the
widget, with its placeholder and tooltip from the declaration), a binder (the widget to the
document through ``Binder``, hence ``OpDocument.set``, the one setter with undo) and a lock
(read-only documents). A form lays the declared fields out in declaration order, row labels from
the declaration; a cell may give its own widget for a field (the tolerance class's three parts),
which the form places under the declared label and the cell binds. :func:`undeclared` finds the
fields a cell's widgets edit that the declaration does not have."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from PySide6.QtWidgets import QComboBox, QFormLayout, QLayout, QLineEdit, QPlainTextEdit, QWidget

from ...engine.contract.fields import KINDS, Field, declared
from .binding import Binder


@dataclass(frozen=True)
class WidgetType:
    make: Callable[[Field], QWidget]
    bind: Callable[[Binder, QWidget, Field], object]
    lock: Callable[[QWidget, bool], None]


WIDGETS: dict[str, WidgetType] = {}


def register(kind: str, make, bind, lock) -> None:
    """Give a field kind its widget (a kind the engine declares: fields.KINDS)."""
    if kind not in KINDS:
        raise ValueError(f"no field kind {kind!r} is declared (fields.KINDS: {', '.join(KINDS)})")
    WIDGETS[kind] = WidgetType(make, bind, lock)


def _read_only(w, on: bool) -> None:
    w.setReadOnly(on)


def _disabled(w, on: bool) -> None:
    w.setEnabled(not on)


def _line(f: Field) -> QLineEdit:
    w = QLineEdit()
    if f.placeholder:
        w.setPlaceholderText(f.placeholder)
    return w


def _plain(f: Field) -> QPlainTextEdit:
    w = QPlainTextEdit()
    if f.placeholder:
        w.setPlaceholderText(f.placeholder)
    return w


def _combo(f: Field) -> QComboBox:
    w = QComboBox()
    w.addItems(list(f.choices))
    return w


def _split(text: str) -> list[str]:
    return [a.strip() for a in text.split(",") if a.strip()]


def _joined(v) -> str:
    return ", ".join(v) if isinstance(v, list) else str(v)


register("text", _line, lambda b, w, f: b.line(w, f.path), _read_only)
register("multiline", _plain, lambda b, w, f: b.plain(w, f.path), _read_only)
register("choice", _combo, lambda b, w, f: b.combo(w, f.path, default=str(f.default or "")), _disabled)
register("text_list", _line, lambda b, w, f: b.line(w, f.path, to_value=_split, to_text=_joined), _read_only)


class Form:
    """The rows of ``fields`` in a QFormLayout, each widget bound to the document through
    ``binder``. ``after``: rows (label "") placed right after a field's row (its inline message);
    ``own``: a field's widget or layout given by the cell, placed under the declared label and
    bound by the cell. ``widgets``: path -> the widget the form made."""

    def __init__(self, binder: Binder, fields: Iterable[Field], *, read_only: bool = False,
                 after: dict[str, QWidget] | None = None, own: dict[str, QWidget | QLayout] | None = None,
                 layout: QFormLayout | None = None):
        self.binder = binder
        self.layout = layout if layout is not None else QFormLayout()
        self.fields = tuple(fields)
        self.widgets: dict[str, QWidget] = {}
        after, own = after or {}, own or {}
        for f in self.fields:
            if f.path in own:
                w = own[f.path]
                if isinstance(w, QWidget) and not w.toolTip():
                    w.setToolTip(f.help)
                self.layout.addRow(f.name, w)
            else:
                self.widgets[f.path] = self.add(f, read_only)
            if f.path in after:
                self.layout.addRow("", after[f.path])

    def add(self, f: Field, read_only: bool = False) -> QWidget:
        kind = WIDGETS.get(f.kind)
        if kind is None:
            raise KeyError(f"field {f.path!r}: no widget is registered for kind {f.kind!r} (form.register)")
        w = kind.make(f)
        w.setToolTip(f.help)
        self.layout.addRow(f.name, w)
        kind.bind(self.binder, w, f)
        kind.lock(w, read_only)
        return w


def undeclared(binder: Binder, fields: Iterable[Field] | None = None) -> list[str]:
    """The manifest fields a widget bound through ``binder`` edits that the declaration lacks
    (each form field must be declared once, in studio/engine/contract/fields.py)."""
    known = {f.path for f in declared(fields)}
    return sorted(p for p in binder.bound_fields() if p not in known)
