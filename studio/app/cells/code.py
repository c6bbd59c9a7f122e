"""Code cells: the Reference (Python), the Kernel (WGSL), and op.toml as text for power users.
Each is an editor on one package file of the model, with problems marked at line:col."""
from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
)

from ...engine.contract.package import MANIFEST
from ...engine.errors import StudioError
from ..widgets.editors import CodeEditor, Marker
from ..notebook.model import FIELD, FILE
from .base import Cell, InlineMessage
from .binding import Binder


class CodeCell(Cell):
    language = "text"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, parent)
        self.doc = doc
        self.binder = Binder(doc, on_error=lambda e: self.message.show_error(e))
        self.fields = QFormLayout()
        self.body_layout.addLayout(self.fields)
        self.where = QLabel()
        self.where.setProperty("note", True)         # the muted colour, from the app style sheet
        self.where.setStyleSheet("font-size: 11px")  # (a size only: the colour stays the palette's)
        self.editor = CodeEditor(self.language, min_lines=10, max_lines=36)
        self.editor.setObjectName(f"{self.key}_editor")
        self.editor.setReadOnly(doc.read_only)
        self.body_layout.addWidget(self.where)
        self.body_layout.addWidget(self.editor)
        self.message = InlineMessage()
        self.body_layout.addWidget(self.message)
        self.binder.file(self.editor, self.rel)
        self.editor.cursorPositionChanged.connect(self._show_where)
        self._show_where()

    def rel(self) -> str:
        raise NotImplementedError

    def _show_where(self) -> None:
        line, col = self.editor.cursor_line_col()
        self.where.setText(f"{self.rel()}    line {line}, col {col}")

    def set_problems(self, errs: list[StudioError]) -> None:
        """Problems the checker/compiler found in this file (positions are the file's own)."""
        self.editor.set_markers([Marker(e.line, e.col, e.message + (f"\nhint: {e.hint}" if e.hint else ""))
                                 for e in errs if e.line is not None])
        if errs:
            self.message.show_error(errs[0])
            self.set_status(f"{len(errs)} problem" + ("s" if len(errs) > 1 else ""), "error")
        else:
            self.message.show_error(None)
            self.set_status("ok", "ok")


class ReferenceCell(CodeCell):
    title = "Reference (Python)"
    key = "reference"
    language = "python"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, doc, parent)
        row = QHBoxLayout()
        self.forward = QLineEdit()
        self.forward.setToolTip("the name of the forward function in the reference file, called as "
                                "forward(<inputs>, *, <params>) with numpy arrays (default: forward)")
        self.precision = QComboBox()
        self.precision.addItems(["f64", "f32"])
        self.precision.setToolTip("f64: inputs are widened to f64 before the reference runs and its result is "
                                  "rounded once to the output dtype; f32: it gets the inputs in their signature dtype")
        row.addWidget(QLabel("forward function"))
        row.addWidget(self.forward)
        row.addWidget(QLabel("precision"))
        row.addWidget(self.precision)
        self.fields.addRow(row)
        self.binder.line(self.forward, "reference.forward")
        self.binder.combo(self.precision, "reference.precision", default="f64")
        note = QLabel("The reference path is the contract itself: the kernel is correct only as far as it matches "
                      "this, on cases the engine generates. It runs in the worker process, never in the Studio.")
        note.setWordWrap(True)
        note.setProperty("note", True)
        self.fields.addRow(note)

    def rel(self) -> str:
        return self.doc.reference_file


class KernelCell(CodeCell):
    title = "Kernel (WGSL)"
    key = "kernel"
    language = "wgsl"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, doc, parent)
        row = QHBoxLayout()
        self.entry = QLineEdit()
        self.entry.setToolTip("the kernel's entry point: the name of its @compute function in the WGSL (default: main)")
        self.workgroup = QSpinBox()
        self.workgroup.setRange(1, 256)
        self.workgroup.setToolTip("invocations per workgroup, 1 to 256: must equal the kernel's @workgroup_size")
        self.invocations = QLineEdit()
        self.invocations.setObjectName("kernel_invocations")
        self.invocations.setToolTip("how many invocations to launch: an expression of the signature's sizes and "
                                    "params, e.g. n - w + 1; workgroups = ceil(invocations / workgroup size)")
        row.addWidget(QLabel("entry"))
        row.addWidget(self.entry)
        row.addWidget(QLabel("workgroup size"))
        row.addWidget(self.workgroup)
        row.addWidget(QLabel("invocations"))
        row.addWidget(self.invocations, 2)
        self.fields.addRow(row)
        self.invocations_message = InlineMessage()
        self.fields.addRow(self.invocations_message)
        self.binder.line(self.entry, "kernel.entry")
        self.binder.spin(self.workgroup, "kernel.workgroup_size", default=64)
        self.binder.line(self.invocations, "kernel.invocations")
        self.binder.watch(FIELD + "kernel.invocations", None, self._validate_invocations)
        self._validate_invocations()

    def rel(self) -> str:
        return self.doc.kernel_file

    def _validate_invocations(self) -> None:
        from ...engine.contract.expr import parse_expr
        text = self.doc.field("kernel.invocations")
        try:
            parse_expr(str(text or ""))
        except StudioError as e:
            self.invocations_message.show_error(e)
            return
        self.invocations_message.show_error(None)


class ManifestCell(CodeCell):
    """op.toml as text: the same model the forms edit."""
    title = "op.toml (text)"
    key = "manifest"
    language = "toml"

    def __init__(self, number: int, doc, parent=None):
        super().__init__(number, doc, parent)
        note = QLabel("The manifest as text, for power users. The forms above and this text edit the same "
                      "model; a form edit changes only its own value here, comments included.")
        note.setWordWrap(True)
        note.setProperty("note", True)
        self.fields.addRow(note)
        self._check: list[StudioError] = []
        self.binder.watch(FILE + MANIFEST, None, self._validate)
        self._validate()

    def rel(self) -> str:
        return MANIFEST

    def set_check_problems(self, errs: list[StudioError]) -> None:
        self._check = list(errs)
        self._validate()

    def _validate(self) -> None:
        errs = [self.doc.toml_problem] if self.doc.toml_problem is not None else []
        seen = {(e.line, e.col, e.message) for e in errs}
        errs += [e for e in self._check if (e.line, e.col, e.message) not in seen]
        self.set_problems(errs)
        if not errs:
            self.message.show_ok("valid manifest")
