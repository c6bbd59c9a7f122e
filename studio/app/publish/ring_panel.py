"""The Ring panel: the packages of every known ring; add a ring, fetch (verified against the
index), trust the fetched reference's exact content, and re-verify it here (conformance and
gradcheck in the device worker). What it shows is the engine's (services/publishing.py)."""
from __future__ import annotations

from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...engine.contract.package import load_package
from ...engine.errors import StudioError
from ...engine.services import publishing
from ...engine.services.requests import Kind

COLUMNS = ("ring", "id", "hash", "license", "visibility", "tolerance", "summary")


class RingPanel(QWidget):
    def __init__(self, ctx, *, workers=None, profile=lambda: "unknown", parent=None):
        super().__init__(parent)
        self.ctx, self.workers, self.profile = ctx, workers, profile
        self.rows: list[dict] = []
        self.fetched: dict | None = None         # the last fetch's result
        self.job = None
        self.query = QLineEdit()
        self.query.setPlaceholderText("filter: id, summary, license…")
        self.name, self.url = QLineEdit(), QLineEdit()
        self.name.setPlaceholderText("ring name")
        self.url.setPlaceholderText("git URL or folder")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.buttons = {}
        for name, slot in (("Add ring", self.add_ring), ("Refresh", self.refresh), ("Fetch", self.fetch),
                           ("Trust", self.trust), ("Re-verify", self.reverify)):
            b = QPushButton(name)
            b.clicked.connect(slot)
            self.buttons[name] = b
        add = QHBoxLayout()
        for w in (self.name, self.url, self.buttons["Add ring"]):
            add.addWidget(w)
        acts = QHBoxLayout()
        for n in ("Refresh", "Fetch", "Trust", "Re-verify"):
            acts.addWidget(self.buttons[n])
        lay = QVBoxLayout(self)
        lay.addLayout(add)
        lay.addWidget(self.query)
        lay.addWidget(self.table)
        lay.addLayout(acts)
        lay.addWidget(self.status)
        self.query.returnPressed.connect(self.refresh)

    def _say(self, text: str) -> None:
        self.status.setText(text)

    def add_ring(self) -> None:
        try:
            spec = publishing.ring_add(self.ctx, self.name.text().strip(), self.url.text().strip())
        except StudioError as e:
            return self._say(f"refused: {e.format()}")
        self._say(f"ring {self.name.text().strip()}: {spec['kind']} ring at {spec['url']}")
        self.refresh()

    def refresh(self) -> None:
        try:
            self.rows = publishing.ring_list(self.ctx, self.query.text().strip() or None)
        except StudioError as e:
            return self._say(f"refused: {e.format()}")
        self.table.setRowCount(len(self.rows))
        for r, row in enumerate(self.rows):
            for c, key in enumerate(COLUMNS):
                v = row.get(key)
                self.table.setItem(r, c, QTableWidgetItem(str(v)[:16] if key == "hash" else str(v or "")))
        if self.rows and not self.table.selectedItems():
            self.table.selectRow(0)

    def selected(self) -> dict | None:
        rows = sorted({i.row() for i in self.table.selectedItems()})
        return self.rows[rows[0]] if rows and rows[0] < len(self.rows) else None

    def fetch(self) -> None:
        row = self.selected()
        if row is None:
            return self._say("select a package first")
        try:
            self.fetched = publishing.ring_fetch(self.ctx, f"{row['id']}@{row['hash']}", ring=row["ring"])
        except StudioError as e:
            self.fetched = None
            return self._say(f"refused: {e.format()}")
        self._say("\n".join(self.fetched["lines"]))

    def trust(self) -> None:
        if self.fetched is None:
            return self._say("fetch a package first")
        pkg = load_package(self.fetched["path"])
        self.ctx.trust.trust(pkg)
        self._say(f"trusted {pkg.id} (content hash {pkg.hash[:16]}): its reference may now run, confined")

    def reverify(self) -> None:
        if self.fetched is None or self.workers is None:
            return self._say("fetch a package first")
        self._say("re-running conformance (and gradcheck) here…")
        self.job = self.workers.submit("proof", Kind.VERIFY_HERE, target=self.fetched["path"])
        self.job.succeeded.connect(lambda out: self._say("\n".join(out.text_lines())))
        self.job.failed.connect(lambda e: self._say(f"refused: {getattr(e, 'message', e)}"))
