"""The catalog panel: builtins and my ops from the engine's one catalog, each as a card — source,
tolerance class, category, and the receipt's status on this machine's GPU profile."""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from .cells.base import Chip

RECEIPT_CHIP = {"valid": ("receipt ✔", "ok"), "none": ("no receipt", "idle"), "stale": ("receipt stale", "warn"),
                "foreign": ("receipt from another GPU", "warn"), "failed": ("receipt: fail", "error"),
                "malformed": ("receipt unreadable", "error"), None: ("receipt …", "idle")}


class Card(QFrame):
    def __init__(self, d: dict, parent=None):
        super().__init__(parent)
        self.data = d
        self.setObjectName("card")
        self.setProperty("card", True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 5, 8, 6)
        lay.setSpacing(2)
        top = QHBoxLayout()
        name = QLabel(f"<b>{d['id']}</b>")
        name.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        top.addWidget(name, 1)
        top.addWidget(Chip(d["source"], "idle" if d["source"] == "builtin" else "busy"))
        lay.addLayout(top)
        summary = QLabel(d["summary"])
        summary.setWordWrap(True)
        summary.setProperty("note", True)
        lay.addWidget(summary)
        chips = QHBoxLayout()
        chips.addWidget(Chip(d["tolerance"], "ok" if d["tolerance"] == "exact" else "idle"))
        chips.addWidget(Chip(d["category"], "idle"))
        self.receipt = Chip(*RECEIPT_CHIP.get(d.get("receipt"), RECEIPT_CHIP[None]))
        self.receipt.setObjectName("receipt_chip")
        chips.addWidget(self.receipt)
        chips.addStretch(1)
        lay.addLayout(chips)
        self.update_data(d)

    def update_data(self, d: dict) -> None:
        """Same card, new facts (a new hash after a save, a receipt issued)."""
        self.data = d
        self.receipt.set(*RECEIPT_CHIP.get(d.get("receipt"), RECEIPT_CHIP[None]))
        self.setToolTip(f"{d['path']}\nhash {d['hash'][:16]}\nbackward: {d['backward']}\nvisibility: {d['visibility']}")


class CatalogPanel(QWidget):
    openRequested = Signal(str)          # package folder

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("catalog")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter ops…")
        self.filter.textChanged.connect(self._apply_filter)
        lay.addWidget(self.filter)
        self.tree = QTreeWidget()
        self.tree.setHeaderHidden(True)
        self.tree.setIndentation(8)
        self.tree.setStyleSheet("QTreeWidget { background: #f4f5f7; border: none; }")
        lay.addWidget(self.tree)
        self.status = QLabel("reading the catalog…")
        self.status.setStyleSheet("color: #666")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.groups = {}
        for key, title in (("builtin", "Builtins"), ("user", "My ops")):
            it = QTreeWidgetItem([title])
            f = it.font(0)
            f.setBold(True)
            it.setFont(0, f)
            self.tree.addTopLevelItem(it)
            it.setExpanded(True)
            self.groups[key] = it
        self.cards: dict[str, Card] = {}
        self.tree.itemDoubleClicked.connect(self._open)
        self.setMinimumWidth(330)
        self._fit_timer = QTimer(self, singleShot=True, interval=0)
        self._fit_timer.timeout.connect(self._fit_cards)
        self.tree.viewport().installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
        if obj is self.tree.viewport() and event.type() == event.Type.Resize:
            self._fit_timer.start()
        return False

    def _fit_cards(self) -> None:
        """Word-wrapped cards need their height for the width they really get."""
        width = self.tree.viewport().width() - self.tree.indentation() - 4
        for g in self.groups.values():
            for i in range(g.childCount()):
                it = g.child(i)
                card = self.tree.itemWidget(it, 0)
                if card is not None and width > 50:
                    it.setSizeHint(0, QSize(width, card.layout().totalHeightForWidth(width)))

    def set_cards(self, cards: list[dict], profile: str | None = None) -> None:
        """Show the catalog. When only receipt statuses changed, only those chips are touched."""
        ops = [c for c in cards if "problem" not in c]
        same = (len(ops) == len(self.cards) and
                all(d["id"] in self.cards and _layout(self.cards[d["id"]].data) == _layout(d) for d in ops))
        if same:
            for d in ops:
                self.cards[d["id"]].update_data(d)
            self._status(cards, profile)
            return
        for g in self.groups.values():
            g.takeChildren()
        self.cards = {}
        for d in ops:
            it = QTreeWidgetItem(self.groups[d["source"]])
            it.setData(0, Qt.ItemDataRole.UserRole, d["path"])
            card = Card(d)
            it.setSizeHint(0, card.sizeHint())
            self.tree.setItemWidget(it, 0, card)
            self.cards[d["id"]] = card
        self.groups["builtin"].setText(0, f"Builtins ({self.groups['builtin'].childCount()})")
        self.groups["user"].setText(0, f"My ops ({self.groups['user'].childCount()})")
        self._status(cards, profile)
        self._apply_filter(self.filter.text())
        self._fit_cards()

    def _status(self, cards: list[dict], profile: str | None) -> None:
        problems = [c["problem"] for c in cards if "problem" in c]
        text = f"{len(self.cards)} ops" + (f" · receipts judged for GPU profile {profile}" if profile else "")
        if problems:
            text += f"<br><span style='color:#b3261e'>{len(problems)} package(s) could not be read</span>"
            self.status.setToolTip("\n\n".join(problems))
        self.status.setText(text)

    def _apply_filter(self, text: str) -> None:
        t = text.strip().lower()
        for g in self.groups.values():
            for i in range(g.childCount()):
                it = g.child(i)
                card = self.tree.itemWidget(it, 0)
                it.setHidden(bool(t) and card is not None and t not in (card.data["id"] + card.data["summary"]).lower())

    def _open(self, item, _col) -> None:
        path = item.data(0, Qt.ItemDataRole.UserRole)
        if path:
            self.openRequested.emit(path)


def _layout(d: dict) -> tuple:
    """What a card shows besides its receipt chip and tooltip."""
    return d["id"], d["source"], d["summary"], d["tolerance"], d["category"]
