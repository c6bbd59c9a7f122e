"""Backward cell: the ladder (composite, declared VJP, nondifferentiable) and the subgradient
convention — metadata, written where the card shows it, not buried in a comment."""
from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPushButton,
)

from ...engine.contract.backward import check_against_signature, parse_backward
from ...engine.contract.signature import parse_signature
from ...engine.contract.toml_edit import set_values
from ...engine.errors import StudioError
from ..widgets.editors import CodeEditor, Marker
from ..notebook.model import FIELD, FILE
from .base import Cell, InlineMessage
from .binding import Binder
from .tables import RowTable

KINDS = ["vjp", "composite", "nondifferentiable"]
KIND_NOTES = {
    "composite": "autodiff derives the backward through the op's parts",
    "vjp": "the op's own VJP, verified by gradcheck against the author's forward",
    "nondifferentiable": "the honest floor: the engine refuses to train through the op",
}


# the vjp rules table's column tooltips
RULE_TIPS = [
    "the inputs this rule gives the gradient of: signature input names, comma-separated (e.g. x)",
    ("reference: a VJP function in reference.py computes it; route: the cotangent "
     "is routed to the elements the forward selected"),
    "reference: the VJP function's name in reference.py (e.g. vjp); route: the incoming cotangent (e.g. dy)",
    ("reference: optional WGSL file running the VJP on the device (e.g. backward.wgsl), empty for none; "
     "route: where the forward took each output from (e.g. argmedian)"),
]

# the device VJP's own fields in [backward]: shown whenever op.toml has any of them, so an error
# the checker finds in one never points at a hidden field
DEVICE_FIELDS = ("backward.invocations", "backward.bindings", "backward.kernel", "backward.tolerance",
                 "backward.workgroup_size")

# a composite declares its steps after the keyword; the checker flags this until one is written
COMPOSITE_TEMPLATE = "composite\n# one step per line: out = namespace/author/op@1(inputs; param = expr)\n"


REFERENCE_DEFAULTS = ("vjp", "")            # a reference row: its VJP function, no device kernel
RESERVED = {"vjp", "reference", "route", "to", "on", "device", "composite", "nondifferentiable"}


def route_defaults(doc) -> tuple[str, str]:
    """A route row's cotangent and index as the op suggests them: d<first output> (dy), and the
    reference.py function whose name starts with "arg" (argmedian, argmax), else argmedian."""
    import re
    try:
        outs = parse_signature(str(doc.field("signature") or "")).outputs
        cot = f"d{outs[0].name}" if outs else "dy"
    except StudioError:
        cot = "dy"
    m = re.search(r"^def (arg\w*)\(", doc.text("reference.py"), re.M)
    return cot, m.group(1) if m else "argmedian"


def compose(kind: str, rows: list[list[str]]) -> str:
    if kind != "vjp":
        return kind
    lines = []
    for inputs, form, a, b in rows:
        if form == "route":                  # (never a word the notation reserves: 'vjp' left from a reference row)
            a = "dy" if not a or a in RESERVED else a
            b = "argmedian" if not b or b in RESERVED else b
            lines.append(f"vjp {inputs}: route({a}, to = {b})")
        else:
            lines.append(f"vjp {inputs}: reference({a or 'vjp'})" + (f' on device("{b}")' if b else ""))
    return "\n".join(lines)


def decompose(bw) -> tuple[str, list[list[str]]]:
    rows = []
    for r in bw.rules:
        if r.form == "route":
            rows.append([", ".join(r.inputs), "route", r.cotangent or "", r.index or ""])
        else:
            rows.append([", ".join(r.inputs), "reference", r.function or "", r.device_kernel or ""])
    return bw.kind, rows


class BackwardCell(Cell):
    title = "Backward"
    key = "backward"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, parent)
        self.doc = doc
        self.binder = Binder(doc, on_error=lambda e: self.message.show_error(e))
        self._kept: dict[tuple[int, str], tuple[str, str]] = {}      # (row, form) → its last two columns
        form = QFormLayout()
        self.kind = QComboBox()
        self.kind.addItems(KINDS)
        self.kind.setToolTip("how gradients flow through the op: vjp (its own VJP rules, verified by gradcheck), "
                             "composite (autodiff through its steps) or nondifferentiable (training refuses it)")
        form.addRow("gradients", self.kind)
        self.note = QLabel()
        self.note.setProperty("note", True)          # the muted colour, from the app style sheet
        form.addRow("", self.note)
        self.rules = RowTable([("inputs", None), ("form", ["reference", "route"]),
                               ("function / cotangent", None), ("device kernel / index", None)],
                              defaults=["x", "reference", "vjp", ""], add_label="+ vjp rule", tips=RULE_TIPS,
                              add_tip="add a VJP rule: vjp <inputs>: reference(<function>) or "
                                      "route(<cotangent>, to = <index>)")
        form.addRow("vjp rules", self.rules)
        self.editor = CodeEditor(None, min_lines=2, max_lines=8)
        self.editor.setObjectName("backward_text")
        form.addRow("notation", self.editor)
        self.subgradient = QLineEdit()
        self.subgradient.setPlaceholderText("where the cotangent goes at a kink, e.g. to the element the forward selected")
        self.subgradient.setToolTip("the subgradient convention, in words: where the cotangent goes at a kink or "
                                    "tie; a declared VJP through kinks needs it (the card shows it)")
        form.addRow("subgradient convention", self.subgradient)
        self.kinks = QLineEdit()
        self.kinks.setPlaceholderText("optional: a reference function saying where the kinks are (gradcheck skips "
                                      "probes there)")
        self.kinks.setToolTip("optional: the name of a reference.py function kinks(<inputs>, *, <params>, h) "
                              "returning True per output element near a kink; gradcheck skips those probes")
        form.addRow("kink predicate", self.kinks)
        self.gradient_tolerance = QLineEdit()
        self.gradient_tolerance.setPlaceholderText("max |analytic - numeric| gradcheck accepts, e.g. 1e-9")
        self.gradient_tolerance.setToolTip("a number, e.g. 1e-9: the largest |analytic − numeric| / max(1, "
                                           "|analytic|) gradcheck accepts; empty for the default 1e-6")
        form.addRow("gradient tolerance", self.gradient_tolerance)
        self.message = InlineMessage()
        form.addRow("", self.message)
        self.body_layout.addLayout(form)
        # the declared VJP on the device: its launch, its bindings, its WGSL
        self.device_box = QGroupBox("device VJP kernel")
        dev = QFormLayout(self.device_box)
        self.device_unused = QLabel("No VJP rule runs on the device now: these fields are unused. Remove them, "
                                    "or write a rule `reference(vjp) on device(\"backward.wgsl\")`.")
        self.device_unused.setWordWrap(True)
        self.device_unused.setProperty("warn", True)     # the warning colour, from the app style sheet
        self.device_remove = QPushButton("remove the device VJP fields")
        self.device_remove.setObjectName("backward_remove_device")
        self.device_remove.setToolTip("delete the device VJP's fields (invocations, bindings, kernel, tolerance, "
                                      "workgroup size) from op.toml in one edit; Edit ▸ Undo brings them back")
        self.device_remove.clicked.connect(self.remove_device_fields)
        dev.addRow(self.device_unused)
        dev.addRow(self.device_remove)
        self.device_invocations = QLineEdit()
        self.device_invocations.setToolTip("how many invocations the device VJP launches: an expression of the "
                                           "signature's sizes and params, e.g. n")
        dev.addRow("invocations", self.device_invocations)
        self.device_bindings = CodeEditor(None, min_lines=3, max_lines=10)
        self.device_bindings.setObjectName("backward_bindings")
        dev.addRow("bindings", self.device_bindings)
        self.device_editor = CodeEditor("wgsl", min_lines=10, max_lines=30)
        self.device_editor.setObjectName("backward_kernel_editor")
        dev.addRow("kernel", self.device_editor)
        self.body_layout.addWidget(self.device_box)

        self.binder.plain(self.editor, "backward.text")
        self.binder.line(self.subgradient, "backward.subgradient")
        self.binder.line(self.kinks, "backward.kinks")
        self.binder.line(self.gradient_tolerance, "backward.gradient_tolerance", to_value=_tolerance_value,
                         to_text=lambda v: f"{v:g}" if isinstance(v, (int, float)) else str(v))
        self.binder.line(self.device_invocations, "backward.invocations")
        self.binder.plain(self.device_bindings, "backward.bindings")
        self.binder.file(self.device_editor, self.device_kernel)
        self.binder.watch(FIELD + "backward.text", None, self._device_visible)
        for k in DEVICE_FIELDS:
            self.binder.watch(FIELD + k, None, self._device_visible)
        self.kind.currentTextChanged.connect(lambda _t: self._form_edited())
        self.rules.edited.connect(self._form_edited)
        self.binder.watch(FIELD + "backward.text", self, self._from_model)
        self.binder.watch(FIELD + "backward.text", self.editor, self._validate)
        self.binder.watch(FIELD + "backward.subgradient", None, self._validate)
        self.binder.watch(FIELD + "signature", None, self._validate)
        self._from_model()
        for w in (self.kind, self.rules):
            w.setEnabled(not doc.read_only)
        for w in (self.editor, self.subgradient, self.kinks, self.gradient_tolerance, self.device_invocations,
                  self.device_bindings, self.device_editor):
            w.setReadOnly(doc.read_only)
        self._device_visible()

    def device_kernel(self) -> str:
        """The device VJP's WGSL file, as the backward text names it (or [backward] kernel)."""
        named = self.doc.field("backward.kernel")
        if isinstance(named, str) and named:
            return named
        try:
            bw = parse_backward(str(self.doc.field("backward.text") or ""))
        except StudioError:
            return "backward.wgsl"
        return next((r.device_kernel for r in bw.rules if r.device_kernel), "backward.wgsl")

    def uses_device(self) -> bool:
        return 'on device(' in str(self.doc.field("backward.text") or "")

    def _device_visible(self) -> None:
        used = self.uses_device()
        present = [k for k in DEVICE_FIELDS if self.doc.field(k) is not None]
        on = used or bool(present)
        self.device_box.setVisible(on)
        self.device_unused.setVisible(on and not used)
        self.device_remove.setVisible(on and not used and not self.doc.read_only)
        if on:
            self.device_editor.set_text(self.doc.text(self.device_kernel()))

    def remove_device_fields(self) -> None:
        """Delete the device VJP's fields from op.toml in one edit (one undo step)."""
        text = set_values(self.doc.manifest_text, {k: None for k in DEVICE_FIELDS if self.doc.field(k) is not None})
        self.binder.write(FILE + "op.toml", text, None)

    def _form_switched(self) -> None:
        """A row whose form was switched (reference ↔ route) takes the new form's own defaults in
        its two last columns: a reference's function name is no route cotangent."""
        rows = self.rules.rows()
        before = getattr(self, "_rows_before", [])
        table = self.rules.table
        for r, row in enumerate(rows):
            if r >= len(before) or before[r][1] == row[1] or row[1] not in ("reference", "route"):
                continue
            # what this row held in the form switched to (switching back restores it), else its defaults
            self._kept[(r, before[r][1])] = tuple(before[r][2:4])
            a, b = self._kept.get((r, row[1])) or (route_defaults(self.doc) if row[1] == "route"
                                                    else REFERENCE_DEFAULTS)
            table.blockSignals(True)
            try:
                for c, v in ((2, a), (3, b)):
                    item = table.item(r, c)
                    if item is not None:
                        item.setText(v)
            finally:
                table.blockSignals(False)

    def _form_edited(self) -> None:
        self._form_switched()
        kind = self.kind.currentText()
        self.rules.setVisible(kind == "vjp")
        current = str(self.doc.field("backward.text") or "")
        if current.lstrip().startswith("composite"):
            self._last_composite = current          # switching away and back keeps the steps
        if kind == "composite":
            text = getattr(self, "_last_composite", None) or COMPOSITE_TEMPLATE
        else:
            text = compose(kind, self.rules.rows() or [list(self.rules.defaults)])
        self._rows_before = self.rules.rows()
        self.binder.write(FIELD + "backward.text", text, self)
        self._validate()

    def _from_model(self) -> None:
        bw = self._validate()
        if bw is None:
            return
        kind, rows = decompose(bw)
        self.kind.blockSignals(True)
        self.kind.setCurrentText(kind)
        self.kind.blockSignals(False)
        self.rules.setVisible(kind == "vjp")
        self.rules.set_rows(rows)
        self._rows_before = self.rules.rows()

    def _validate(self):
        text = self.doc.field("backward.text")
        self.note.setText(KIND_NOTES.get(self.kind.currentText(), ""))
        if not isinstance(text, str):
            self.message.show_error(StudioError("op.toml has no [backward] text", field="backward.text",
                                                hint="choose one of the ladder's rungs above"))
            self.set_status("missing", "error")
            return None
        try:
            bw = parse_backward(text)
        except StudioError as e:
            self._show([e])
            return None
        try:
            errs = check_against_signature(bw, parse_signature(str(self.doc.field("signature") or "")))
        except StudioError:
            errs = []
        if not errs and bw.kind == "vjp" and not self.doc.field("backward.subgradient"):
            errs = [StudioError("a declared VJP through kinks needs its subgradient convention written down",
                                field="backward.subgradient",
                                hint="say where the cotangent goes at a tie, e.g. to the element the forward selected")]
            self._show(errs, severity="warning")
            return bw
        self._show(errs)
        return bw

    def _show(self, errs: list[StudioError], severity: str = "error") -> None:
        self.editor.set_markers([Marker(e.line, e.col, e.message) for e in errs if e.line is not None], "local")
        if errs:
            self.message.show_error(errs[0])
            self.set_status("warning" if severity == "warning" else "invalid", "warn" if severity == "warning" else "error")
        else:
            self.message.show_ok(KIND_NOTES.get(self.kind.currentText(), "ok"))
            self.set_status(self.kind.currentText(), "ok")


def _tolerance_value(text: str):
    text = text.strip()
    if not text:
        return ""
    try:
        return float(text)
    except ValueError:
        raise StudioError(f"gradient tolerance {text!r} is not a number", field="backward.gradient_tolerance",
                          hint="e.g. 1e-9") from None
