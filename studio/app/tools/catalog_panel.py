"""The catalog panel: builtins, my ops and the shipped examples from the engine's one catalog,
each op as a card — source, tolerance class, category, and the receipt's status on this machine's
GPU profile. The examples that fail on purpose (the story's first draft, the negative-control
medians) sit in their own group under Examples, never among the user's ops."""
from __future__ import annotations

import shiboken6
from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication
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

from ..cells.base import Chip
from ..widgets.fitting import ElidedLabel

RECEIPT_CHIP = {"valid": ("receipt ✔", "ok"), "none": ("no receipt", "idle"), "stale": ("receipt stale", "warn"),
                "foreign": ("receipt from elsewhere", "warn"), "failed": ("receipt: fail", "error"),
                "malformed": ("receipt unreadable", "error"), None: ("receipt …", "idle")}
# group key → title; "broken" is a child of "example"
GROUP_TITLES = {"builtin": "Builtins", "user": "My ops", "example": "Examples", "broken": "Broken on purpose"}


class Card(QFrame):
    """One op. A double-click anywhere on it — its title included — opens it (``activated``)."""
    activated = Signal(str)          # package folder

    def __init__(self, d: dict, parent=None):
        super().__init__(parent)
        self.data = d
        self.setObjectName("card")
        self.setProperty("card", True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 5, 8, 6)
        lay.setSpacing(2)
        top = QHBoxLayout()
        self.title = ElidedLabel(d["id"], bold=True)          # "…" and a tooltip when the dock is narrow
        self.title.setObjectName("card_title")
        top.addWidget(self.title, 1)
        source = "example" if d.get("group") == "example" else d["source"]
        top.addWidget(Chip(source, "idle" if source == "builtin" else "busy"))
        lay.addLayout(top)
        summary = QLabel(d["summary"])
        summary.setWordWrap(True)
        summary.setProperty("note", True)
        lay.addWidget(summary)
        chips = QHBoxLayout()
        chips.addWidget(Chip(d["tolerance"], "ok" if d["tolerance"] == "exact" else "idle"))
        chips.addWidget(Chip(d["category"], "idle"))
        if d.get("broken"):
            chips.addWidget(Chip("fails on purpose", "warn"))
        self.receipt = Chip(*RECEIPT_CHIP.get(d.get("receipt"), RECEIPT_CHIP[None]))
        self.receipt.setObjectName("receipt_chip")
        self.receipt.setToolTip("this op's conformance receipt for this GPU profile: one from elsewhere (another GPU "
                                "profile, or sealed by another machine or user folder) never counts here; open the "
                                "op and run its Conformance cell to earn one")
        chips.addWidget(self.receipt)
        chips.addStretch(1)
        lay.addLayout(chips)
        copy = QAction("Copy op id", self)
        copy.triggered.connect(lambda: QGuiApplication.clipboard().setText(self.data["id"]))
        open_ = QAction("Open", self)
        open_.triggered.connect(lambda: self.activated.emit(self.data["path"]))
        self.addActions([open_, copy])
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.update_data(d)

    def update_data(self, d: dict) -> None:
        """Same card, new facts (a new hash after a save, a receipt issued)."""
        self.data = d
        self.receipt.set(*RECEIPT_CHIP.get(d.get("receipt"), RECEIPT_CHIP[None]))
        why = "\nthis example fails conformance on purpose (for learning)" if d.get("broken") else ""
        self.setToolTip(f"{d['id']} — double-click to open\n{d['path']}\nhash {d['hash'][:16]}\n"
                        f"backward: {d['backward']}\nvisibility: {d['visibility']}{why}")

    def mouseDoubleClickEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.activated.emit(self.data["path"])
            event.accept()
            return
        super().mouseDoubleClickEvent(event)


class CatalogPanel(QWidget):
    openRequested = Signal(str)          # package folder

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("catalog")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter ops…")
        self.filter.setToolTip("show only the ops whose id or summary contains this text")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)
        lay.addWidget(self.filter)
        self.tree = QTreeWidget()
        self.tree.setObjectName("catalog_tree")
        self.tree.setHeaderHidden(True)
        self.tree.setIndentation(8)
        self.tree.setToolTip("every op the engine knows; double-click one to open it")
        lay.addWidget(self.tree)
        self.status = QLabel("reading the catalog…")
        self.status.setProperty("note", True)
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.groups: dict[str, QTreeWidgetItem] = {}
        for key in ("builtin", "user", "example", "broken"):
            it = QTreeWidgetItem([GROUP_TITLES[key]])
            f = it.font(0)
            f.setBold(True)
            it.setFont(0, f)
            if key == "broken":
                self.groups["example"].addChild(it)
                it.setToolTip(0, "examples that fail conformance on purpose: the story's first draft and the "
                                 "negative-control medians")
            else:
                self.tree.addTopLevelItem(it)
            it.setExpanded(key != "broken")
            self.groups[key] = it
        self.cards: dict[str, Card] = {}
        self.tree.itemDoubleClicked.connect(self._open)
        self.setMinimumWidth(220)
        self._fit_timer = QTimer(self, singleShot=True, interval=0)
        self._fit_timer.timeout.connect(self._fit_cards)
        self.tree.viewport().installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.tree.viewport() and event.type() == event.Type.Resize:
            self._fit_timer.start()
        return False

    def card_items(self) -> list[QTreeWidgetItem]:
        return [g.child(i) for g in self.groups.values() for i in range(g.childCount())
                if self.tree.itemWidget(g.child(i), 0) is not None]

    def group_of_card(self, op_id: str) -> str | None:
        """The group key ("builtin", "user", "example", "broken") a card is shown under."""
        for key, g in self.groups.items():
            for i in range(g.childCount()):
                card = self.tree.itemWidget(g.child(i), 0)
                if card is not None and card.data["id"] == op_id:
                    return key
        return None

    def _fit_cards(self) -> None:
        """Word-wrapped cards need their height for the width they really get."""
        for it in self.card_items():
            card = self.tree.itemWidget(it, 0)
            depth = 2 if it.parent() is self.groups["broken"] else 1
            width = self.tree.viewport().width() - depth * self.tree.indentation() - 4
            if width > 50:
                it.setSizeHint(0, QSize(width, card.layout().totalHeightForWidth(width)))

    def set_cards(self, report, profile: str | None = None) -> None:
        """Show the catalog (the worker's ``catalog`` report: catalog_scan.CatalogReport). When only
        receipt statuses changed, only those chips are touched. A scan that lands after the panel was
        deleted (its window closed) is dropped."""
        if not shiboken6.isValid(self):
            return
        ops = report.card_dicts()
        same = (len(ops) == len(self.cards) and
                all(d["id"] in self.cards and _layout(self.cards[d["id"]].data) == _layout(d) for d in ops))
        if same:
            for d in ops:
                self.cards[d["id"]].update_data(d)
            self._status(report, profile)
            return
        for g in self.groups.values():
            for it in [g.child(i) for i in range(g.childCount())]:
                if self.tree.itemWidget(it, 0) is not None:
                    g.removeChild(it)
        self.cards = {}
        for d in ops:
            key = d.get("group", d["source"])
            if key == "example" and d.get("broken"):
                key = "broken"
            it = QTreeWidgetItem()
            self.groups[key].addChild(it)
            it.setData(0, Qt.ItemDataRole.UserRole, d["path"])
            card = Card(d)
            card.activated.connect(self.openRequested.emit)
            it.setSizeHint(0, card.sizeHint())
            self.tree.setItemWidget(it, 0, card)
            self.cards[d["id"]] = card
        for key, g in self.groups.items():
            n = sum(1 for i in range(g.childCount()) if self.tree.itemWidget(g.child(i), 0) is not None)
            if key == "example":
                n += self._count("broken")
            g.setText(0, f"{GROUP_TITLES[key]} ({n})")
        self.groups["broken"].setHidden(self._count("broken") == 0)
        self._status(report, profile)
        self._apply_filter(self.filter.text())
        self._fit_cards()

    def _count(self, key: str) -> int:
        g = self.groups[key]
        return sum(1 for i in range(g.childCount()) if self.tree.itemWidget(g.child(i), 0) is not None)

    def scan_failed(self, err) -> None:
        if shiboken6.isValid(self):
            self.status.setText(f"catalog: {getattr(err, 'message', err)}")

    def _status(self, report, profile: str | None) -> None:
        from ..widgets.style import colour
        problems = report.problems
        text = report.summary(profile)
        if problems:
            text += f"<br><span style='color:{colour('error')}'>{len(problems)} package(s) could not be read</span>"
            self.status.setToolTip("\n\n".join(problems))
        else:
            self.status.setToolTip("how many ops the catalog holds, and the GPU profile their receipts are judged for")
        self.status.setText(text)

    def _apply_filter(self, text: str) -> None:
        """Hide the cards that do not match; a group holding a match is opened (a collapsed group
        — Broken on purpose — would hide it), and a group with none is hidden while filtering.
        Clearing the filter puts every group back as the user left it."""
        t = text.strip().lower()
        if t and not getattr(self, "_expanded_before", None):
            self._expanded_before = {k: g.isExpanded() for k, g in self.groups.items()}
        for it in self.card_items():
            card = self.tree.itemWidget(it, 0)
            it.setHidden(bool(t) and t not in (card.data["id"] + card.data["summary"]).lower())
        if not t:
            for k, was in (getattr(self, "_expanded_before", None) or {}).items():
                self.groups[k].setExpanded(was)
            self._expanded_before = None
            for k, g in self.groups.items():
                g.setHidden(k == "broken" and self._count("broken") == 0)
            return
        for key in ("broken", "builtin", "user", "example"):       # (inner group first: it counts for its parent)
            g = self.groups[key]
            hits = any(not g.child(i).isHidden() and self.tree.itemWidget(g.child(i), 0) is not None
                       for i in range(g.childCount()))
            if key == "example":
                hits = hits or not self.groups["broken"].isHidden()
            g.setHidden(not hits)
            if hits:
                g.setExpanded(True)

    def _open(self, item, _col) -> None:
        path = item.data(0, Qt.ItemDataRole.UserRole)
        if path:
            self.openRequested.emit(path)


def _layout(d: dict) -> tuple:
    """What a card shows besides its receipt chip and tooltip."""
    return d["id"], d["source"], d.get("group"), d.get("broken"), d["summary"], d["tolerance"], d["category"]
