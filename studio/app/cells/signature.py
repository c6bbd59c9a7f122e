"""Signature cell: what the op promises — inputs, params and relations, outputs, shape class.

The form composes signature text from its rows; the engine's parser judges it (errors at their
column, shown under the text with a caret); the model holds the text either way, so nothing
typed is lost while it is still wrong.
"""
from __future__ import annotations

from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit

from ...engine.contract.signature import parse_signature
from ...engine.errors import StudioError
from ...engine.precision import DTYPE_BYTES
from ..editors import mono_font
from ..model import FIELD
from .base import Cell, InlineMessage
from .binding import Binder
from .tables import RowTable

DTYPES = list(DTYPE_BYTES)
DOMAINS = ["any", "finite", "nonneg", "in [0, 1]"]


def compose(name: str, inputs, params, relations, outputs) -> str:
    ins = []
    for n, dt, dims, dom in inputs:
        ins.append(f"{n}: {dt}[{dims}]" + (f" {dom}" if dom and dom != "any" else ""))
    ps = []
    for n, dt, parity, rng in params:
        ps.append(f"{n}: {dt}" + (f" {parity}" if parity else "") + (f" in [{rng}]" if rng else ""))
    ps += [r[0] for r in relations if r[0]]
    outs = [f"{n}: {dt}[{dims}]" for n, dt, dims in outputs]
    out = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    return f"{name}({', '.join(ins)}{'; ' + ', '.join(ps) if ps else ''}) -> {out}"


def decompose(sig) -> tuple[str, list, list, list, list]:
    inputs = [[t.name, t.dtype, ", ".join(map(str, t.dims)), str(t.domain)] for t in sig.inputs]
    params = [[p.name, p.dtype, p.parity or "", f"{p.lo}, {p.hi}" if p.lo is not None else ""] for p in sig.params]
    relations = [[str(r)] for r in sig.relations]
    outputs = [[t.name, t.dtype, ", ".join(map(str, t.dims))] for t in sig.outputs]
    return sig.name, inputs, params, relations, outputs


def caret_html(text: str, col: int | None) -> str:
    """The text with a caret under ``col`` (1-based), for single-line grammar fields."""
    if col is None:
        return ""
    esc = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return (f"<pre style='margin:0'>{esc}\n{' ' * (col - 1)}<span style='color:#b3261e'>^</span></pre>")


class SignatureCell(Cell):
    title = "Signature"
    key = "signature"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, parent)
        self.doc = doc
        self.binder = Binder(doc, on_error=lambda e: self.message.show_error(e))
        form = QFormLayout()
        self.name = QLineEdit()
        self.name.setPlaceholderText("op name, e.g. windowed_median")
        form.addRow("name", self.name)
        self.inputs = RowTable([("input", None), ("dtype", DTYPES), ("dims", None), ("domain", DOMAINS)],
                               defaults=["x", "f32", "n", "finite"], add_label="+ input")
        self.params = RowTable([("param", None), ("dtype", ["u32", "i32", "f32"]), ("parity", ["", "odd", "even"]),
                                ("range lo, hi", None)], defaults=["k", "u32", "", ""], add_label="+ param")
        self.relations = RowTable([("relation", None)], defaults=["k <= n"], add_label="+ relation")
        self.outputs = RowTable([("output", None), ("dtype", DTYPES), ("dims (expressions)", None)],
                                defaults=["y", "f32", "n"], add_label="+ output")
        form.addRow("inputs", self.inputs)
        form.addRow("params", self.params)
        form.addRow("relations", self.relations)
        form.addRow("outputs", self.outputs)
        self.text = QLineEdit()
        self.text.setFont(mono_font())
        self.text.setObjectName("signature_text")
        form.addRow("signature", self.text)
        self.caret = QLabel()
        self.caret.setFont(mono_font())
        form.addRow("", self.caret)
        self.message = InlineMessage()
        form.addRow("", self.message)
        self.shape_class = QLabel()
        form.addRow("shape class", self.shape_class)
        self.body_layout.addLayout(form)

        self.binder.line(self.text, "signature")
        for w in (self.inputs, self.params, self.relations, self.outputs):
            w.edited.connect(self._form_edited)
        self.name.textEdited.connect(lambda _t: self._form_edited())
        self.binder.watch(FIELD + "signature", self, self._from_model)
        self.binder.watch(FIELD + "signature", self.text, self._validate)   # also after the text line's own edits
        self._from_model()
        self.set_read_only(doc.read_only)

    def set_read_only(self, on: bool) -> None:
        for w in (self.name, self.text):
            w.setReadOnly(on)
        for w in (self.inputs, self.params, self.relations, self.outputs):
            w.setEnabled(not on)

    def _form_edited(self) -> None:
        text = compose(self.name.text().strip(), self.inputs.rows(), self.params.rows(),
                       self.relations.rows(), self.outputs.rows())
        if self.binder.write(FIELD + "signature", text, self):
            self.text.setText(text)
        self._validate()

    def _from_model(self) -> None:
        sig = self._validate()
        if sig is None:
            return
        name, inputs, params, relations, outputs = decompose(sig)
        if self.name.text() != name:
            self.name.setText(name)
        self.inputs.set_rows(inputs)
        self.params.set_rows(params)
        self.relations.set_rows(relations)
        self.outputs.set_rows(outputs)

    def _validate(self):
        text = self.doc.field("signature")
        if not isinstance(text, str):
            self.message.show_error(StudioError("op.toml has no signature", field="signature",
                                                hint="fill in the form, or write signature = \"...\""))
            self.caret.clear()
            self.caret.setVisible(False)
            self.set_status("missing", "error")
            return None
        try:
            sig = parse_signature(text)
        except StudioError as e:
            self.message.show_error(e)
            self.caret.setText(caret_html(text, e.col if (e.line or 1) == 1 else None))
            self.caret.setVisible(bool(self.caret.text()))
            self.set_status("invalid", "error")
            return None
        self.caret.clear()
        self.caret.setVisible(False)
        self.message.show_ok("well-formed")
        self.shape_class.setText(f"<b>{sig.shape_class}</b> — " + (
            "output sizes follow from shapes and parameters: memory is budgeted before anything runs"
            if sig.shape_class == "static" else "an output size depends on the data"))
        self.set_status(sig.shape_class, "ok")
        return sig
