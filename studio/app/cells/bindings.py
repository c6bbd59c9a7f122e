"""Bindings cell: the buffer binding descriptor as a table and as text, checked against the
signature by the engine (and, on re-check, against the WGSL by wgpu's own validator)."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel

from ...engine.contract.bindings import check_against_signature, parse_bindings
from ...engine.contract.signature import parse_signature
from ...engine.errors import StudioError
from ..widgets.editors import CodeEditor, Marker
from ..notebook.model import FIELD
from .base import Cell, InlineMessage
from .binding import Binder
from .tables import RowTable

KINDS = ["storage", "uniform"]
ACCESS = ["read", "read_write", ""]
DTYPES = ["f32", "i32", "u32", ""]
TIPS = [
    "the WGSL @group(…) number of this binding (usually 0)",
    "the WGSL @binding(…) number inside its group: unique per group, the same as in the kernel",
    "the binding's name: a signature tensor's name for a storage buffer (e.g. x, y), any name for a uniform block",
    "what the binding is: storage (a tensor's buffer) or uniform (a block of scalar fields)",
    "access mode of this binding: storage read (an input), storage read_write (an output); empty for a uniform",
    "element type of a storage buffer: f32, i32 or u32 (empty for a uniform)",
    ("storage: the buffer's dims as expressions of the signature's sizes, e.g. n - w + 1 (in place: n -> y_out, "
     "the output this input's buffer holds after the kernel); uniform: its fields, "
     "name: type = expression, comma-separated, e.g. n: u32 = n, w: u32 = w"),
]


def compose(rows: list[list[str]]) -> str:
    lines = []
    for g, b, name, kind, access, dtype, shape in rows:
        head = f"@group({g or 0}) @binding({b or 0}) {name} :"
        if kind == "uniform":
            lines.append(f"{head} uniform {{ {shape} }}")
        else:
            dims, _, out = shape.partition(" -> ")          # in place: "n -> y_out" (docs/package-format.md)
            lines.append(f"{head} storage {access or 'read'} {dtype or 'f32'}[{dims}]" + (f" -> {out}" if out else ""))
    return "\n".join(lines) + "\n"


def decompose(desc) -> list[list[str]]:
    rows = []
    for b in desc.bindings:
        if b.kind == "uniform":
            shape = ", ".join(f"{f.name}: {f.dtype} = {f.value}" for f in b.fields)
            rows.append([str(b.group), str(b.binding), b.name, "uniform", "", "", shape])
        else:
            rows.append([str(b.group), str(b.binding), b.name, "storage", b.access or "", b.dtype or "",
                         ", ".join(map(str, b.dims)) + (f" -> {b.writes}" if b.writes else "")])
    return rows


class BindingsCell(Cell):
    title = "Bindings"
    key = "bindings"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, parent)
        self.doc = doc
        self.binder = Binder(doc, on_error=lambda e: self.message.show_error(e))
        self.table = RowTable([("group", None), ("binding", None), ("name", None), ("kind", KINDS),
                               ("access", ACCESS), ("dtype", DTYPES), ("dims / uniform fields", None)],
                              defaults=["0", "3", "t", "storage", "read_write", "f32", "n"], add_label="+ binding",
                              tips=TIPS, add_tip="add a binding row (a buffer the kernel reads or writes, or a "
                                                 "uniform block); the descriptor text below follows")
        self.body_layout.addWidget(self.table)
        self.body_layout.addWidget(QLabel("descriptor text (the binding grammar; comments allowed here)"))
        self.editor = CodeEditor(None, min_lines=4, max_lines=14)
        self.editor.setObjectName("bindings_text")
        self.body_layout.addWidget(self.editor)
        self.message = InlineMessage()
        self.body_layout.addWidget(self.message)
        self.binder.plain(self.editor, "bindings.text")
        self.table.edited.connect(self._form_edited)
        self.binder.watch(FIELD + "bindings.text", self, self._from_model)
        self.binder.watch(FIELD + "bindings.text", self.editor, self._validate)
        self.binder.watch(FIELD + "signature", self, self._validate)
        self._from_model()
        self.table.setEnabled(not doc.read_only)
        self.editor.setReadOnly(doc.read_only)

    def _form_edited(self) -> None:
        self.binder.write(FIELD + "bindings.text", compose(self.table.rows()), self)
        self._validate()

    def _from_model(self) -> None:
        desc = self._validate()
        if desc is not None:
            self.table.set_rows(decompose(desc))

    def _validate(self):
        text = self.doc.field("bindings.text")
        if not isinstance(text, str):
            self.message.show_error(StudioError("op.toml has no [bindings] text", field="bindings.text"))
            self.set_status("missing", "error")
            return None
        try:
            desc = parse_bindings(text)
        except StudioError as e:
            self._show([e])
            return None
        try:
            sig = parse_signature(str(self.doc.field("signature") or ""))
        except StudioError:
            sig = None
        errs = check_against_signature(desc, sig) if sig is not None else []
        self._show(errs)
        return desc

    def _show(self, errs: list[StudioError]) -> None:
        self.editor.set_markers([Marker(e.line, e.col, e.message) for e in errs if e.line is not None], "local")
        self._local = list(errs)
        if errs:
            self.message.show_error(errs[0])
        else:
            self.message.show_ok("parses, and carries every tensor of the signature")
        self._chip()

    def set_check_problems(self, messages: list[str]) -> None:
        """The full check's problems on this cell's lines (wgpu's validator on the layout, …): the
        chip counts them too, so it never says "ok" beside a marked line."""
        self._checked = list(messages)
        self._chip()

    def _chip(self) -> None:
        n = len(getattr(self, "_local", [])) + len(getattr(self, "_checked", []))
        if n == 0:
            self.set_status("ok", "ok")
        elif n == 1 and getattr(self, "_local", []):
            self.set_status("invalid", "error")
        else:
            self.set_status(f"{n} problem" + ("s" if n > 1 else ""), "error")
        checked = getattr(self, "_checked", [])
        self.chip.setToolTip("\n".join(checked) if checked else "")
