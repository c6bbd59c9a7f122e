"""Tolerance & category cell: the class the op claims, the category it belongs to, why — and the
checker's rule between them, applied as you choose."""
from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QSpinBox

from ...engine.contract.fields import field, form_fields
from ...engine.contract.tolerance import (
    BOUND_CATEGORIES,
    NON_ARITHMETIC,
    STANDARD_ULP,
    check_class_fits_category,
    parse_tolerance,
)
from ...engine.errors import StudioError
from ..notebook.model import FIELD
from .base import Cell, InlineMessage
from .binding import Binder
from .form import Form

KINDS = ["exact", "ulp", "bound"]
CATEGORY_NOTES = {
    **{c: "does no arithmetic on values: may claim exact, with a written justification" for c in NON_ARITHMETIC},
    **{c: f"rounds: at most ulp({k})" for c, k in STANDARD_ULP.items()},
    **{c: "accumulates: bound (the standard γ·Σ|terms| bound) or tighter" for c in BOUND_CATEGORIES},
}


def class_text(kind: str, ulps: int, factor: float) -> str:
    if kind == "ulp":
        return f"ulp({ulps})"
    if kind == "bound":
        return "bound" if factor == 1.0 else f"bound({factor:g})"
    return "exact"


class ToleranceCell(Cell):
    title = "Tolerance & category"
    key = "tolerance"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, parent)
        self.doc = doc
        self.binder = Binder(doc, on_error=lambda e: self.message.show_error(e))
        row = QHBoxLayout()
        self.kind = QComboBox()
        self.kind.addItems(KINDS)
        self.ulps = QSpinBox()
        self.ulps.setRange(0, 64)
        self.ulps.setPrefix("K = ")
        self.factor = QDoubleSpinBox()
        self.factor.setRange(0.01, 100.0)
        self.factor.setSingleStep(0.1)
        self.factor.setPrefix("C = ")
        self.kind.setToolTip(field("tolerance.class").help)
        self.ulps.setToolTip("K of ulp(K): how many units in the last place an output may differ from the reference")
        self.factor.setToolTip("C of bound(C): the factor on the standard accumulation bound (1 is plain bound; "
                               "above 1 is looser than the category allows)")
        row.addWidget(self.kind)
        row.addWidget(self.ulps)
        row.addWidget(self.factor)
        row.addStretch(1)
        self.note = QLabel()
        self.note.setProperty("note", True)          # the muted colour, from the app style sheet
        # category and justification: widget, tooltip, placeholder and binding from the declaration
        # (fields.py); the class is this cell's own three controls, bound below
        self.form = Form(self.binder, form_fields("tolerance"), read_only=doc.read_only,
                         own={"tolerance.class": row}, after={"tolerance.category": self.note})
        self.category = self.form.widgets["tolerance.category"]
        self.justification = self.form.widgets["tolerance.justification"]
        self.justification.setFixedHeight(64)
        self.message = InlineMessage()
        self.form.layout.addRow("", self.message)
        self.body_layout.addLayout(self.form.layout)

        for w in (self.kind, self.ulps, self.factor):
            (w.currentTextChanged if isinstance(w, QComboBox) else w.valueChanged).connect(self._class_edited)
        self.binder.watch(FIELD + "tolerance.class", self, self._from_model)
        for k in ("tolerance.class", "tolerance.category", "tolerance.justification"):
            self.binder.watch(FIELD + k, None, self._validate)
        self._from_model()
        for w in (self.kind, self.ulps, self.factor):
            w.setEnabled(not doc.read_only)

    def _class_edited(self, *_):
        kind = self.kind.currentText()
        self.ulps.setVisible(kind == "ulp")
        self.factor.setVisible(kind == "bound")
        self.binder.write(FIELD + "tolerance.class", class_text(kind, self.ulps.value(), self.factor.value()), self)

    def _from_model(self) -> None:
        text = str(self.doc.field("tolerance.class") or "exact")
        widgets = (self.kind, self.ulps, self.factor)
        for w in widgets:
            w.blockSignals(True)
        try:
            tol = parse_tolerance(text, "selection")
            self.kind.setCurrentText(tol.kind)
            self.ulps.setValue(tol.ulps if tol.kind == "ulp" else 4)
            self.factor.setValue(tol.factor)
        except StudioError:
            pass
        finally:
            for w in widgets:
                w.blockSignals(False)
        self.ulps.setVisible(self.kind.currentText() == "ulp")
        self.factor.setVisible(self.kind.currentText() == "bound")
        self._validate()

    def _validate(self) -> None:
        cat = str(self.doc.field("tolerance.category") or "")
        self.note.setText(f"{cat}: {CATEGORY_NOTES.get(cat, 'unknown category')}")
        try:
            tol = parse_tolerance(str(self.doc.field("tolerance.class") or ""), cat,
                                  str(self.doc.field("tolerance.justification") or ""))
        except StudioError as e:
            self.message.show_error(e)
            self.set_status("invalid", "error")
            return
        errs = check_class_fits_category(tol)
        if errs:
            self.message.show_error(errs[0])
            self.set_status("class does not fit", "error")
        else:
            self.message.show_ok(f"{tol} fits '{cat}'")
            self.set_status(str(tol), "ok")
