"""Signature cell: what the op promises — inputs, params and relations, outputs, shape class.

The form composes signature text from its rows; the engine's parser judges it (errors at their
column, shown under the text with a caret); the model holds the text either way, so nothing
typed is lost while it is still wrong.
"""
from __future__ import annotations

import re

from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit

from ...engine.contract.signature import parse_signature
from ...engine.errors import StudioError
from ...engine.precision import DTYPE_BYTES
from ..widgets.editors import mono_font
from ..notebook.model import FIELD
from ..widgets.style import colour
from .base import Cell, InlineMessage, ThemedLabel
from .binding import Binder
from .tables import RowTable

DTYPES = list(DTYPE_BYTES)
DOMAINS = ["any", "finite", "nonneg", "in [0, 1]"]
# the tables' column tooltips: what each field means and its syntax
INPUT_TIPS = [
    "the input tensor's name, as the reference, bindings and kernel use it (e.g. x)",
    "element type of this input: " + ", ".join(DTYPES),
    ("its shape: comma-separated size symbols or constants, e.g. n or m, k "
     "(a symbol names the size for the params, relations and outputs)"),
    ("the values it may hold: any (NaN and ±inf included), finite, nonneg "
     "(finite, >= 0) or in [lo, hi] with constants; for integer index inputs in [0, m) naming a size, "
     "or csr(nnz) for a CSR row pointer — conformance generates cases within it, a run refuses values outside"),
]
PARAM_TIPS = [
    "the scalar parameter's name (e.g. w for a window width)",
    "its type: u32, i32 or f32",
    "optional: odd or even (e.g. a centred window's width is odd); empty for either",
    "optional: the values it may take, two constants 'lo, hi' (written in [lo, hi]), e.g. 1, 31",
]
OUTPUT_TIPS = [
    "the output tensor's name (e.g. y)",
    "element type of this output: " + ", ".join(DTYPES),
    ("its shape as expressions of the inputs' sizes and params, e.g. n - w + 1; "
     "?m marks a size known only after the op runs"),
]


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


def written(v) -> str:
    """A bound as an author writes it: ``1e15``, not ``1000000000000000.0``; ``-1``, ``0.5``."""
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e6):
        return str(int(v))
    text = repr(float(v))
    if "e" not in text and len(text) > 10:
        import numpy as np
        text = np.format_float_scientific(float(v), trim="-")
    return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", text)


def domain_text(d) -> str:
    return f"in [{written(d.lo)}, {written(d.hi)}]" if d.kind == "in" else str(d)


def decompose(sig) -> tuple[str, list, list, list, list]:
    inputs = [[t.name, t.dtype, ", ".join(map(str, t.dims)), domain_text(t.domain)] for t in sig.inputs]
    params = [[p.name, p.dtype, p.parity or "", f"{p.lo}, {p.hi}" if p.lo is not None else ""] for p in sig.params]
    relations = [[str(r)] for r in sig.relations]
    outputs = [[t.name, t.dtype, ", ".join(map(str, t.dims))] for t in sig.outputs]
    return sig.name, inputs, params, relations, outputs


CARET_SPAN = 56          # characters of a long single-line field shown above the caret


def caret_html(text: str, col: int | None) -> str:
    """The text with a caret under ``col`` (1-based), for single-line grammar fields; the caret in
    the palette's error colour."""
    if col is None:
        return ""
    at = col - 1
    if len(text) > CARET_SPAN:                    # a long signature shows its stretch around the column:
        start = max(0, min(at - CARET_SPAN // 2, len(text) - CARET_SPAN))     # it never widens the notebook
        head, tail = ("…" if start > 0 else ""), ("…" if start + CARET_SPAN < len(text) else "")
        text, at = head + text[start:start + CARET_SPAN] + tail, at - start + len(head)
    esc = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return (f"<pre style='margin:0'>{esc}\n{' ' * at}<span style='color:{colour('error')}'>^</span></pre>")


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
        self.name.setToolTip("the op's name as the signature starts with it: lower case, digits and _ "
                             "(e.g. windowed_median); the form writes it into the signature text below")
        form.addRow("name", self.name)
        self.inputs = RowTable([("input", None), ("dtype", DTYPES), ("dims", None), ("domain", DOMAINS)],
                               defaults=["x", "f32", "n", "finite"], add_label="+ input", tips=INPUT_TIPS,
                               add_tip="add an input tensor (name, dtype, dims, domain) to the signature")
        self.params = RowTable([("param", None), ("dtype", ["u32", "i32", "f32"]), ("parity", ["", "odd", "even"]),
                                ("range lo, hi", None)], defaults=["k", "u32", "", ""], add_label="+ param",
                               tips=PARAM_TIPS, add_tip="add a scalar parameter (name, type, parity, range) after the ';'")
        self.relations = RowTable([("relation", None)], defaults=["k <= n"], add_label="+ relation", tips=[(
                                   "a constraint between sizes and params, compared with <=, <, >=, >, == or !=, "
                                   "e.g. w <= n; conformance only generates cases where it holds")],
                                  add_tip="add a relation (e.g. k <= n) the sizes and params must satisfy")
        self.outputs = RowTable([("output", None), ("dtype", DTYPES), ("dims (expressions)", None)],
                                defaults=["y", "f32", "n"], add_label="+ output", tips=OUTPUT_TIPS,
                                add_tip="add an output tensor (name, dtype, shape expressions); two or more "
                                        "outputs are written as a tuple")
        form.addRow("inputs", self.inputs)
        form.addRow("params", self.params)
        form.addRow("relations", self.relations)
        form.addRow("outputs", self.outputs)
        self.text = QLineEdit()
        self.text.setFont(mono_font())
        self.text.setObjectName("signature_text")
        self.text.setToolTip("the signature as text, the same as the form above: name(inputs; params, relations) "
                             "-> outputs, e.g. windowed_median(x: f32[n] finite; w: u32 odd in [1, 31], w <= n) "
                             "-> y: f32[n - w + 1]")
        form.addRow("signature", self.text)
        self.caret = ThemedLabel()
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
            self.caret.set_rendered(None)
            self.caret.setVisible(False)
            self.set_status("missing", "error")
            return None
        try:
            sig = parse_signature(text)
        except StudioError as e:
            self.message.show_error(e)
            col = e.col if (e.line or 1) == 1 else None
            self.caret.set_rendered(lambda: caret_html(text, col))
            self.caret.setVisible(bool(self.caret.text()))
            self.set_status("invalid", "error")
            return None
        self.caret.set_rendered(None)
        self.caret.setVisible(False)
        self.message.show_ok("well-formed")
        self.shape_class.setText(f"<b>{sig.shape_class}</b> — " + (
            "output sizes follow from shapes and parameters: memory is budgeted before anything runs"
            if sig.shape_class == "static" else "an output size depends on the data"))
        self.set_status(sig.shape_class, "ok")
        return sig
