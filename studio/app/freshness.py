"""Proof freshness: whether the conformance and gradcheck results on screen are about the
content the user sees *now*. A result is bound to the package hash it was run on (the hash its
receipt names); the moment an edit changes the content, the result is stale — and fresh again
if an undo brings that exact content back.

``ProofFreshness.staleChanged(kind, stale)`` (kind: ``conformance`` | ``gradcheck``) is the model
state any view may read (``stale(kind)``, ``proven_hash(kind)``); the document view marks its
panels' chips with it (``mark_panel``)."""
from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

KINDS = ("conformance", "gradcheck")
STALE_NOTE = "stale: edited since"


class ProofFreshness(QObject):
    staleChanged = Signal(str, bool)

    def __init__(self, doc, parent=None):
        super().__init__(parent)
        self.doc = doc
        self._proven: dict[str, str] = {}        # kind -> package hash the shown result is about
        self._stale: dict[str, bool] = {}
        self._timer = QTimer(self, singleShot=True, interval=0)     # one hash per burst of change events
        self._timer.timeout.connect(self.update)
        doc.changed.connect(lambda *_: self._timer.start())

    def proven(self, kind: str, package_hash: str) -> None:
        """A result for ``kind`` is now shown, about the content with ``package_hash``."""
        self._proven[kind] = package_hash
        self.update()

    def proven_hash(self, kind: str) -> str | None:
        return self._proven.get(kind)

    def stale(self, kind: str) -> bool:
        return self._stale.get(kind, False)

    def update(self) -> None:
        if not self._proven:
            return
        now = self.doc.content_hash()
        for kind, h in self._proven.items():
            stale = h != now
            if stale != self._stale.get(kind, False):
                self._stale[kind] = stale
                self.staleChanged.emit(kind, stale)


class PanelMark:
    """Shows a panel's result chips as stale and puts them back when the content is fresh again."""

    def __init__(self, chips):
        self.chips = [c for c in chips if c is not None]
        self.saved: list[tuple[str, str]] | None = None

    def remember(self) -> None:
        self.saved = [(c.text(), c.kind) for c in self.chips]

    def set_stale(self, stale: bool) -> None:
        if self.saved is None:
            return
        for chip, (text, kind) in zip(self.chips, self.saved):
            if not text:
                continue
            if stale:
                chip.set(f"{text} — {STALE_NOTE}", "warn")
                chip.setToolTip("this result is about content you have changed since; run it again")
            else:
                chip.set(text, kind)
                chip.setToolTip("")
