"""The "new op from template" dialog: template, op name, author, and the folder to create it in."""
from __future__ import annotations

import os

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

from .documents import AUTHOR_RE, NAME_RE, templates


class NewOpDialog(QDialog):
    def __init__(self, parent=None, folder: str | None = None):
        super().__init__(parent)
        self.setWindowTitle("New op from template")
        form = QFormLayout(self)
        self.template = QComboBox()
        for name, summary in templates():
            self.template.addItem(f"{name} — {summary}", name)
        form.addRow("template", self.template)
        self.name = QLineEdit("windowed_median")
        form.addRow("op name", self.name)
        self.author = QLineEdit(_default_author())
        form.addRow("author", self.author)
        row = QHBoxLayout()
        self.folder = QLineEdit(folder or os.path.expanduser("~"))
        browse = QPushButton("…")
        browse.clicked.connect(self._browse)
        row.addWidget(self.folder)
        row.addWidget(browse)
        form.addRow("create in folder", row)
        self.preview = QLabel()
        self.preview.setStyleSheet("color: #555")
        form.addRow("", self.preview)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)
        for w in (self.name, self.author, self.folder):
            w.textChanged.connect(self._update)
        self._update()

    def _browse(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Create the op package in", self.folder.text())
        if d:
            self.folder.setText(d)

    def _update(self) -> None:
        name, author = self.name.text().strip(), self.author.text().strip()
        ok = bool(NAME_RE.match(name) and AUTHOR_RE.match(author) and self.folder.text().strip())
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(ok)
        self.preview.setText(f"id user/{author}/{name}@1 in {os.path.join(self.folder.text().strip(), name)}" if ok
                             else "op name: lower case, digits and _; author: lower case, digits, '.', '_' or '-'")

    def values(self) -> tuple[str, str, str, str]:
        return (self.template.currentData(), self.folder.text().strip(), self.name.text().strip(),
                self.author.text().strip())


def _default_author() -> str:
    import getpass
    import re
    try:
        user = getpass.getuser().lower()
    except (KeyError, OSError):
        user = "you"
    user = re.sub(r"[^a-z0-9_.-]", "", user)
    return user if AUTHOR_RE.match(user or "") else "you"
