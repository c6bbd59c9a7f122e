"""A document's session: where its content lives for the worker (its folder when saved, else a
content-addressed snapshot), whose code it is (trust), its autosave, and its receipts."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import QObject, QTimer, Signal

from ..engine import trust
from ..engine.atomic import write_text
from ..engine.contract.package import content_hash
from . import snapshots
from .autosave import AutosaveStore
from .documents import save_document
from .model import OpDocument

AUTOSAVE_MS = 800


def trust_status(doc: OpDocument) -> trust.TrustStatus:
    """The engine's trust judgement of the document's *current* content at its folder."""
    files = doc.content_bytes()
    pkg = SimpleNamespace(root=doc.path or Path("/nonexistent"), hash=content_hash(files),
                          id=str(doc.field("id") or "untitled"))
    return trust.status(pkg)


class DocumentSession(QObject):
    """Owns nothing visual. ``trustChanged`` when the document's code becomes runnable (or not)."""
    trustChanged = Signal(bool)
    autosaved = Signal(str)

    def __init__(self, doc: OpDocument, background, store: AutosaveStore | None = None, *, authored: bool | None = None):
        super().__init__()
        self.doc = doc
        self.background = background
        self.store = store or AutosaveStore()
        # Code typed here is authored here — but only on top of content that was runnable to begin with:
        # editing a package someone sent you does not launder its reference into "authored".
        self.authored_base = trust_status(doc).ok if authored is None else authored
        self._timer = QTimer(self, singleShot=True, interval=AUTOSAVE_MS)
        self._timer.timeout.connect(self.autosave_now)
        doc.changed.connect(lambda *_: self._timer.start())
        if doc.dirty:
            self._timer.start()

    # ------------------------------------------------------------------ trust
    @property
    def runnable(self) -> bool:
        return self.authored_base or trust_status(self.doc).ok

    def trust_now(self) -> None:
        """The user read the code and trusts this exact content."""
        files = self.doc.content_bytes()
        pkg = SimpleNamespace(root=(self.doc.path or Path("/nonexistent")).resolve(), hash=content_hash(files),
                              id=str(self.doc.field("id") or "untitled"))
        trust.trust(pkg)
        self.authored_base = True
        self.trustChanged.emit(True)

    # ------------------------------------------------------------------ the worker's view
    def target(self):
        """A ``prepare`` callable for a worker job: makes sure the content the user sees now is on disk
        (off the GUI thread) and returns ``{"target": folder}``. Taken now, so later typing can't race it."""
        files = self.doc.content_bytes()
        h = content_hash(files)
        clean_folder = self.doc.path if (self.doc.path and not self.doc.dirty) else None
        op = str(self.doc.field("id") or "untitled")
        authored = self.authored_base

        def prepare() -> dict:
            folder = clean_folder or snapshots.snapshot(files, h)
            if authored:
                trust.record_authored(h, op=op, path=Path(folder).resolve())
            return {"target": str(folder)}

        prepare.package_hash = h
        return prepare

    # ------------------------------------------------------------------ receipts
    def keep_receipt(self, receipt: dict, target: str) -> str | None:
        """Where the receipt of a passing run on ``target`` lives (the worker wrote it beside the package
        it proved); carried into the document's own folder when the document on disk has exactly the
        proven content. Returns the path shown to the user."""
        if not receipt:
            return None
        name = f"{receipt.get('gpu_profile', {}).get('id', 'profile')}.json"
        where = Path(target) / "receipts" / name
        if not where.is_file():
            write_text(where, json.dumps(receipt, indent=2, sort_keys=True) + "\n")
        pkg_hash = receipt.get("hashes", {}).get("package")
        if self.doc.path and not self.doc.dirty and self.doc.content_hash() == pkg_hash:
            dest = self.doc.path / "receipts" / name
            if dest.resolve() != where.resolve():
                write_text(dest, where.read_text("utf-8"))
            return str(dest)
        return str(where)

    def carry_receipts(self) -> None:
        """Receipts proven on a snapshot belong to the saved package too when its content is the same."""
        if self.doc.path and not self.doc.dirty:
            snapshots.carry_receipts(self.doc.content_hash(), self.doc.path)

    # ------------------------------------------------------------------ saving
    def save(self, folder: Path | None = None) -> Path:
        path = save_document(self.doc, folder)
        h = self.doc.content_hash()
        if self.authored_base:
            trust.record_authored(h, op=str(self.doc.field("id") or ""), path=path.resolve())
        snapshots.carry_receipts(h, path)
        self.store.discard(self.doc.doc_id)
        return path

    def autosave_now(self) -> None:
        if not self.doc.dirty:
            self.store.discard(self.doc.doc_id)
            return
        state = self.store.state(self.doc)
        self.background.run(lambda: self.store.write(state), lambda p: self.autosaved.emit(str(p)), ordered=True)

    def close(self, keep_autosave: bool = False) -> None:
        self._timer.stop()
        if not keep_autosave:
            self.background.run(lambda: self.store.discard(self.doc.doc_id), ordered=True)
