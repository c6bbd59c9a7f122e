"""Op cell: identity and metadata — id, summary, license (SPDX, validated), visibility, authors: the
fields declared for the "op" form (studio/engine/contract/fields.py), laid out by cells/form.py."""
from __future__ import annotations

from PySide6.QtCore import QTimer

from ...engine.contract.catalog import origin_of
from ...engine.contract.contract import OpId
from ...engine.contract.fields import form_fields
from ...engine.errors import StudioError
from ..notebook.model import FIELD
from .base import Cell, InlineMessage
from .binding import Binder
from .form import Form


def license_problem(expr: str) -> StudioError | None:
    """The engine's SPDX check (license-expression); slow on first use, so run it off the GUI thread."""
    from ...engine.services.publishing import license_problems
    try:
        errs = license_problems(expr, file="op.toml")
    except Exception as e:  # noqa: BLE001 - license-expression raises odd types on some inputs
        return StudioError(f"license {expr!r} is not a valid SPDX expression ({type(e).__name__})",
                           field="license", hint="use an SPDX identifier such as Apache-2.0, MIT or GPL-3.0-or-later")
    return errs[0] if errs else None


class MetadataCell(Cell):
    title = "Op"
    key = "op"

    def __init__(self, number: int, doc, background=None, parent=None):
        super().__init__(number, parent)
        self.doc = doc
        self.background = background
        self.binder = Binder(doc, on_error=lambda e: self.message.show_error(e))
        self.id_message = InlineMessage()
        self.license_message = InlineMessage()
        # the fields, their widgets, placeholders, tooltips and bindings: from the declaration (fields.py)
        self.form = Form(self.binder, form_fields("op"), read_only=doc.read_only,
                         after={"id": self.id_message, "license": self.license_message})
        for path, widget in self.form.widgets.items():      # self.id, self.summary, self.license, ...
            name = path.replace(".", "_")
            if not hasattr(self, name):
                setattr(self, name, widget)
        self.message = InlineMessage()
        self.form.layout.addRow("", self.message)
        self.body_layout.addLayout(self.form.layout)

        b = self.binder
        b.watch(FIELD + "id", None, self._validate_id)
        doc.pathChanged.connect(self._validate_id)          # an untitled document saved, or Save As: its source
        self._license_timer = QTimer(self, singleShot=True, interval=250)
        self._license_timer.timeout.connect(self._validate_license)
        b.watch(FIELD + "license", None, self._license_timer.start)
        b.watch(FIELD + "visibility", None, self._license_timer.start)
        self._validate_id()
        self._license_timer.start()

    def _validate_id(self, *_) -> None:
        try:
            op = OpId.parse(str(self.doc.field("id") or ""))
        except StudioError as e:
            self.id_message.show_error(e)
            self.set_status("bad id", "error")
            return
        source = origin_of(self.doc.path) if self.doc.path is not None else "user"   # untitled: the user's
        self.id_message.show_ok(f"{op.name} v{op.version} by {op.author} — source: {source}")
        self.set_status(source, "idle")

    def _validate_license(self) -> None:
        expr = self.doc.field("license")
        vis = self.doc.field("visibility") or "private"
        if not expr:
            if vis != "private":
                self.license_message.show_error(StudioError(f"visibility '{vis}' needs a license", field="license",
                                                            hint='add an SPDX license such as "Apache-2.0"'))
            else:
                self.license_message.show_ok("private: no license needed until you share it")
            return
        if self.background is None:
            self._show_license(expr, license_problem(expr))
        else:
            self.background.run(lambda: license_problem(expr), lambda err: self._show_license(expr, err))

    def _show_license(self, expr, err) -> None:
        import shiboken6
        if not shiboken6.isValid(self.license_message):
            return  # the cell was closed while the check ran
        if expr != self.doc.field("license"):
            return  # a newer edit is being checked
        if err is None:
            self.license_message.show_ok(f"{expr} is valid SPDX")
        else:
            self.license_message.show_error(err)
