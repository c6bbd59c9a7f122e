"""The "new op from template" dialog: the template kind (the story's op, or a blank start:
elementwise, selection (windowed), reduction, stencil), the op name, author, license,
visibility, and the folder to create it in. Everything typed here lands in the document:
the id ``user/<author>/<name>@1``, ``authors = [author]``, ``license``, ``visibility``."""
from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
)

from .documents import AUTHOR_RE, NAME_RE, VISIBILITY_CHOICES, template_infos
from ..bridge.latest_check import LatestCheck


def judge(f: dict) -> tuple[bool, str]:
    """(OK allowed, the line under the form) for the fields as typed (any thread)."""
    name, author, folder = f["name"], f["author"], f["folder"]
    if f["visibility"] != "private" and not f["license"]:
        return False, f"visibility '{f['visibility']}' needs a license (SPDX, e.g. Apache-2.0)"
    if NAME_RE.match(name) and AUTHOR_RE.match(author) and folder:
        return True, f"id user/{author}/{name}@1 in {os.path.join(folder, name)}"
    return False, "op name: lower case, digits and _; author: lower case, digits, '.', '_' or '-'"


class NewOpDialog(QDialog):
    def __init__(self, parent=None, folder: str | None = None):
        super().__init__(parent)
        self.setWindowTitle("New op from template")
        form = QFormLayout(self)
        self.template = QComboBox()
        self.infos = template_infos()
        for t in self.infos:
            self.template.addItem(t["title"], t["name"])
            self.template.setItemData(self.template.count() - 1, t["summary"], Qt.ItemDataRole.ToolTipRole)
        self.template.setToolTip("what the new op starts from: the story's op, or a blank start of a kind "
                                 "(elementwise, selection, reduction, stencil); hover an entry for its summary")
        form.addRow("template", self.template)
        self.template_summary = QLabel()
        self.template_summary.setWordWrap(True)
        form.addRow("", self.template_summary)
        self.name = QLineEdit("windowed_median")
        self.name.setToolTip("the op's name: lower case, digits and _ (e.g. windowed_median); it names the "
                             "package folder and the id user/<author>/<name>@1")
        form.addRow("op name", self.name)
        self.author = QLineEdit(_default_author())
        self.author.setToolTip("you, as the id's author part: lower case, digits, '.', '_' or '-'; also "
                               "written to authors")
        form.addRow("author", self.author)
        self.license = QLineEdit()
        self.license.setPlaceholderText("none: the op stays private (SPDX, e.g. Apache-2.0, to share it)")
        self.license.setToolTip("an SPDX license expression, e.g. Apache-2.0 or MIT OR Apache-2.0: what the new "
                                "op.toml says, the template's own filled in; empty: no license, and the op stays "
                                "private (workspace or public need one)")
        form.addRow("license", self.license)
        self.visibility = QComboBox()
        self.visibility.addItems(list(VISIBILITY_CHOICES))
        self.visibility.setToolTip("who may see the op: private (only you), workspace or public; leaving private "
                                   "needs a license")
        form.addRow("visibility", self.visibility)
        row = QHBoxLayout()
        self.folder = QLineEdit(folder or os.path.expanduser("~"))
        self.folder.setToolTip("the folder the op's package folder (named after the op) is created in")
        browse = QPushButton("…")
        browse.setToolTip("choose the folder in a file dialog")
        browse.clicked.connect(self._browse)
        row.addWidget(self.folder)
        row.addWidget(browse)
        form.addRow("create in folder", row)
        self.preview = QLabel()
        self.preview.setProperty("note", True)       # the muted colour, from the app style sheet
        form.addRow("", self.preview)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setToolTip(
            "create the package from the template and open it (enabled once name, author and folder are valid)")
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setToolTip("close without creating anything")
        form.addRow(self.buttons)
        # the fields are judged off the GUI thread, the newest text only (latest_check.py): OK pressed
        # before the verdict on what is typed now waits for it
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.accept_when_checked = False
        self.checker = LatestCheck(judge, self._show, parent=self)
        self.finished.connect(lambda _=0: self.checker.close())
        for w in (self.name, self.author, self.folder, self.license):
            w.textChanged.connect(lambda _=None: self._update())
        self.visibility.currentTextChanged.connect(lambda _=None: self._update(at_once=True))
        self.template.currentIndexChanged.connect(self._template_chosen)
        self._template_chosen()
        self._update(at_once=True)

    def _template_chosen(self, *_):
        i = self.template.currentIndex()
        info = self.infos[i] if 0 <= i < len(self.infos) else None
        self.template_summary.setText(info["summary"] if info else "")
        # a name still at another template's default follows the template (the user's own name stays)
        defaults = {t["op_name"] for t in self.infos}
        if info is not None and self.name.text().strip() in defaults:
            self.name.setText(info["op_name"])
        # the license field shows what the new op.toml will say: the template's own, unless typed over
        licenses = {t.get("license", "") for t in self.infos}
        if info is not None and self.license.text().strip() in licenses:
            self.license.setText(info.get("license", ""))

    def _browse(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Create the op package in", self.folder.text())
        if d:
            self.folder.setText(d)

    def snapshot(self) -> dict:
        return {"name": self.name.text().strip(), "author": self.author.text().strip(),
                "folder": self.folder.text().strip(), "license": self.license.text().strip(),
                "visibility": self.visibility.currentText()}

    def _update(self, at_once: bool = False) -> None:
        (self.checker.now if at_once else self.checker.changed)(self.snapshot())

    def _show(self, verdict: tuple[bool, str]) -> None:
        ok, text = verdict
        self.ok_button.setEnabled(ok)
        self.preview.setText(text)
        if self.accept_when_checked:
            self.accept_when_checked = False
            if ok:
                super().accept()

    def accept(self) -> None:
        """OK pressed while the check of the latest text runs: accepted once it allows it."""
        if self.checker.pending:
            self.accept_when_checked = True
            return
        super().accept()

    def values(self) -> tuple[str, str, str, str]:
        """(template, folder, name, author) — ``create_from_template``'s positional arguments."""
        return (self.template.currentData(), self.folder.text().strip(), self.name.text().strip(),
                self.author.text().strip())

    def options(self) -> dict:
        """The rest of what was typed, as ``create_from_template``'s keywords."""
        return {"license": self.license.text().strip(), "visibility": self.visibility.currentText()}

    def choose_template(self, name: str) -> None:
        i = self.template.findData(name)
        if i < 0:
            raise KeyError(name)
        self.template.setCurrentIndex(i)


def _default_author() -> str:
    import getpass
    import re
    try:
        user = getpass.getuser().lower()
    except (KeyError, OSError):
        user = "you"
    user = re.sub(r"[^a-z0-9_.-]", "", user)
    return user if AUTHOR_RE.match(user or "") else "you"
