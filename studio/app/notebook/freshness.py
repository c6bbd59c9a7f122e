"""Proof freshness: whether the conformance and gradcheck results on screen are about the
content the user sees *now*. A result is bound to the package hash it was run on (the hash its
receipt names); the moment an edit changes the content, the result is stale — and fresh again
if an undo brings that exact content back.

``ProofFreshness.staleChanged(kind, stale)`` (kind: ``conformance`` | ``gradcheck``) is the model
state any view may read (``stale(kind)``, ``proven_hash(kind)``); the document view marks its
panels' chips with it (``mark_panel``).

A result is also fresh for saved content that a valid receipt on disk vouches for: publishing
rewrites op.toml (a new content hash) and earns the receipts again for it, so the notebook does
not call a result "stale" that the card calls valid (``vouch``: judged off the GUI thread, for
saved content only)."""
from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

KINDS = ("conformance", "gradcheck")
STALE_NOTE = "stale: edited since"


def vouched(root, seal, profile_id: str | None) -> tuple[str, set[str]]:
    """(the content hash on disk at ``root``, the kinds a valid receipt there vouches for): a
    conformance receipt valid for ``profile_id``, a passing gradcheck receipt. Reads files only."""
    from ...engine.contract.package import load_package
    from ...engine.services.trial import vouched_kinds
    pkg = load_package(root)
    return pkg.hash, vouched_kinds(pkg, profile_id or "", seal)


class ProofFreshness(QObject):
    staleChanged = Signal(str, bool)
    vouchedChanged = Signal(str, str)     # kind, the content hash a receipt on disk vouched for

    def __init__(self, doc, parent=None, *, background=None, vouch=None):
        """``vouch(root)``: a function that returns ``(hash, kinds)`` (``vouched`` with the window's
        seal and GPU profile), run on ``background`` when saved content is stale: a receipt for it
        makes it fresh."""
        super().__init__(parent)
        self.doc = doc
        self.background, self.vouch = background, vouch
        self._proven: dict[str, str] = {}        # kind -> package hash the shown result is about
        self._stale: dict[str, bool] = {}
        self._passed: dict[str, bool] = {}
        self._asked: str | None = None           # the content hash a vouch was last asked for
        self._timer = QTimer(self, singleShot=True, interval=0)     # one hash per burst of change events
        self._timer.timeout.connect(self.update)
        doc.changed.connect(lambda *_: self._timer.start())

    def proven(self, kind: str, package_hash: str, passed: bool = False) -> None:
        """A result for ``kind`` is now shown, about the content with ``package_hash``; ``passed``: it
        is a pass (only a pass is carried over to content a valid receipt vouches for)."""
        self._proven[kind] = package_hash
        self._passed[kind] = bool(passed)
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
        if any(self._stale.values()):
            self._ask_vouch(now)

    def _ask_vouch(self, now: str) -> None:
        """Saved content that is stale here: is there a valid receipt for it on disk (published)?"""
        if self.vouch is None or self.background is None or self.doc.dirty or self.doc.path is None \
                or self._asked == now:
            return
        self._asked = now
        self.background.run(self.vouch(self.doc.path), self._vouched, lambda _e: None)

    def _vouched(self, found) -> None:
        h, kinds = found
        if h != self.doc.content_hash() or self.doc.dirty:
            return                               # the content moved on meanwhile
        for kind in kinds:
            if kind in self._proven and self._stale.get(kind) and self._passed.get(kind):
                self._proven[kind] = h
                self.vouchedChanged.emit(kind, h)
        self.update()


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
