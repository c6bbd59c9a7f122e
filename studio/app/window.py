"""The Studio's main window."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QMainWindow, QListWidget, QSplitter

from ..engine.catalog import Catalog


class MainWindow(QMainWindow):
    def __init__(self, catalog: Catalog | None = None):
        super().__init__()
        self.setWindowTitle("Scellis Studio")
        self.catalog = catalog or Catalog.default()
        split = QSplitter()
        self.ops = QListWidget()
        for pkg in self.catalog.list():
            self.ops.addItem(f"{pkg.id}    [{pkg.contract.tolerance}]")
        split.addWidget(self.ops)
        self.detail = QLabel("Pick an op to see its contract.")
        split.addWidget(self.detail)
        self.ops.currentRowChanged.connect(self._show)
        self.setCentralWidget(split)
        self.resize(1100, 700)

    def _show(self, row: int) -> None:
        pkg = self.catalog.list()[row]
        c = pkg.contract
        self.detail.setText(f"<b>{pkg.id}</b><br>{c.summary}<br><tt>{c.signature.text}</tt><br>"
                            f"tolerance {c.tolerance} ({c.tolerance.category})<br>hash {pkg.hash[:16]}")
