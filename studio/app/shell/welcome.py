"""The Welcome page: what the central area shows when no tab is open — the story's op one click
away, a new op from a template, open a package or a workflow, and the recently opened packages."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.resources import EXAMPLES

STORY_OP = EXAMPLES / "windowed_median"
FIRST_DRAFT = EXAMPLES / "windowed_median_first_draft"      # the story's start: it fails at n = w


class WelcomePage(QWidget):
    storyRequested = Signal()
    firstDraftRequested = Signal()
    newRequested = Signal()
    openRequested = Signal()
    openWorkflowRequested = Signal()
    recentRequested = Signal(str)          # a package folder

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("welcome")
        outer = QHBoxLayout(self)
        outer.addStretch(1)
        col = QVBoxLayout()
        outer.addLayout(col, 3)
        outer.addStretch(1)
        col.addStretch(1)
        title = QLabel("<h1>Scellis Studio</h1>")
        col.addWidget(title)
        intro = QLabel("Write a GPU op as content — a contract, a Python reference, a WGSL kernel — and prove it "
                       "right on this machine's GPU.")
        intro.setWordWrap(True)
        intro.setProperty("note", True)
        col.addWidget(intro)
        col.addSpacing(12)
        self.story = QPushButton("▶ Open the story's op: the windowed median")
        self.story.setObjectName("welcome_story")
        self.story.setToolTip(f"open {STORY_OP}: the op the tutorial follows, already proven here")
        self.first_draft = QPushButton("Open the first draft: the same op, failing conformance at n = w")
        self.first_draft.setObjectName("welcome_first_draft")
        self.first_draft.setToolTip(f"open {FIRST_DRAFT}: where the story starts — run Conformance, read the "
                                    "failing case, fix the kernel (saved as your copy; the shipped one stays)")
        self.new = QPushButton("New op from template…")
        self.new.setToolTip("start a new op from a template: elementwise, windowed selection, reduction, stencil "
                            "(Ctrl+N)")
        self.open = QPushButton("Open package…")
        self.open.setToolTip("open an op package: a folder with op.toml (Ctrl+O)")
        self.open_wf = QPushButton("Open workflow…")
        self.open_wf.setToolTip("open a workflow file (.toml) as a notebook of steps")
        for b, sig in ((self.story, self.storyRequested), (self.first_draft, self.firstDraftRequested),
                       (self.new, self.newRequested),
                       (self.open, self.openRequested), (self.open_wf, self.openWorkflowRequested)):
            b.setMinimumHeight(32)
            b.clicked.connect(sig.emit)
            col.addWidget(b)
        col.addSpacing(16)
        col.addWidget(QLabel("<b>Recent</b>"))
        self.recent = QListWidget()
        self.recent.setObjectName("welcome_recent")
        self.recent.setToolTip("packages opened or created here, newest first: double-click (or Enter) to open")
        self.recent.setMaximumHeight(220)
        self.recent.itemActivated.connect(lambda it: self.recentRequested.emit(it.data(Qt.ItemDataRole.UserRole)))
        col.addWidget(self.recent)
        self.no_recent = QLabel("nothing opened yet")
        self.no_recent.setProperty("note", True)
        col.addWidget(self.no_recent)
        col.addStretch(2)


    def show_in(self, tabs) -> None:
        """Take the central area (``tabs``) when no tab is open; the Recent list read again either
        way (the recent file is written off the GUI thread: a page already shown would keep a list
        from before the last package opened)."""
        from .paths import recent_packages
        self.set_recent(recent_packages())
        if tabs.count() == 0 and tabs.indexOf(self) < 0:
            i = tabs.addTab(self, "Welcome")
            tabs.tabBar().setTabButton(i, tabs.tabBar().ButtonPosition.RightSide, None)
            tabs.setTabToolTip(i, "start here: the story's op, a new op, recent packages")

    def leave(self, tabs) -> None:
        if (i := tabs.indexOf(self)) >= 0:
            tabs.removeTab(i)
    def set_recent(self, folders: list[Path]) -> None:
        self.recent.clear()
        for f in folders:
            it = QListWidgetItem(f"{Path(f).name}  —  {f}")
            it.setData(Qt.ItemDataRole.UserRole, str(f))
            it.setToolTip(str(f))
            self.recent.addItem(it)
        self.recent.setVisible(bool(folders))
        self.no_recent.setVisible(not folders)
