"""A document's session: where its content lives for the worker (its folder when saved, else a
content-addressed snapshot), whose code it is (trust, judged by the window's Context's trust
store), its autosave, and its receipts."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from ...engine.context import Context
from ...engine.contract.package import OpPackage, content_hash, load_package
from ...engine.errors import StudioError
from ...engine.services.standing import draft_trust
from . import snapshots
from ..shell.autosave import AutosaveStore
from ..notebook.documents import save_document
from ..notebook.model import OpDocument
from ..notebook.shipped import shipped_path

AUTOSAVE_MS = 800


def trust_status(doc: OpDocument, store):
    """The engine's trust judgement of the document's *current* content at its folder (its Python's
    reference hash too: a kernel-only edit keeps trust, studio/engine/trust/code.py); ``store``: the
    context's trust store."""
    return draft_trust(store, doc.path, doc.content_hash(), doc.content_bytes())


class DocumentSession(QObject):
    """Owns nothing visual. ``trustChanged`` when the document's code becomes runnable (or not)."""
    trustChanged = Signal(bool)
    autosaved = Signal(str)

    def __init__(self, doc: OpDocument, background, store: AutosaveStore | None = None, *, ctx: Context,
                 authored: bool | None = None):
        super().__init__()
        self.doc = doc
        self.background = background
        self.ctx = ctx
        self.store = store or AutosaveStore()
        # Code typed here is authored here — but only on top of content that was runnable to begin with:
        # editing a package someone sent you does not launder its reference into "authored".
        self.authored_base = trust_status(doc, ctx.trust).ok if authored is None else authored
        self._timer = QTimer(self, singleShot=True, interval=AUTOSAVE_MS)
        self._timer.timeout.connect(self.autosave_now)
        doc.changed.connect(lambda *_: self._timer.start())
        if doc.dirty:
            self._timer.start()

    # ------------------------------------------------------------------ trust
    @property
    def runnable(self) -> bool:
        return self.authored_base or trust_status(self.doc, self.ctx.trust).ok

    def trust_now(self) -> None:
        """The user read the code and trusts this exact content; the trust store records its hash
        (a draft that does not load yet too)."""
        pkg = self._current_package()
        if pkg is not None:
            self.ctx.trust.trust(pkg)
        else:
            self.ctx.trust.trust_content(self.doc.path, self.doc.content_hash(), op=str(self.doc.field("id") or ""))
        self.authored_base = True
        self.trustChanged.emit(True)

    def _current_package(self) -> OpPackage | None:
        """The document's current content, loaded: from its folder when that holds exactly it, else
        from its snapshot; None for a draft that does not load."""
        files = self.doc.content_bytes()
        h = content_hash(files)
        try:
            if self.doc.path and not self.doc.dirty:
                pkg = load_package(self.doc.path)
                if pkg.hash == h:
                    return pkg
            return load_package(snapshots.snapshot(files, h))
        except StudioError:
            return None

    # ------------------------------------------------------------------ the worker's view
    def target(self):
        """A ``prepare`` callable for a worker job: makes sure the content the user sees now is on disk
        (off the GUI thread) and returns ``{"target": folder}``. Taken now, so later typing can't race it."""
        files = self.doc.content_bytes()
        h = content_hash(files)
        clean_folder = self.doc.path if (self.doc.path and not self.doc.dirty) else None
        op = str(self.doc.field("id") or "untitled")
        trust = self.ctx.trust if self.authored_base else None

        def prepare() -> dict:
            folder = clean_folder or snapshots.snapshot(files, h)
            if trust is not None:
                trust.record_authored(h, op=op, path=Path(folder).resolve())
            return {"target": str(folder)}

        prepare.package_hash = h
        return prepare

    # ------------------------------------------------------------------ receipts
    # ------------------------------------------------------------------ saving
    def save(self, folder: Path | None = None) -> Path:
        """Through the engine's save (crash-safe; recorded as authored when the code was runnable here).
        Never into the product's install: a shipped package is saved as the user's copy."""
        target = Path(folder) if folder is not None else self.doc.path
        if target is not None and shipped_path(target) is not None:
            raise StudioError(f"{target} is part of the Scellis Studio install; it is never written",
                              file=str(target), hint="use File ▸ Save As to keep your version in a folder of yours")
        path = save_document(self.doc, folder, ctx=self.ctx if self.authored_base else None)
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
