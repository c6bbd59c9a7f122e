"""The Studio's document: the Qt face of the document model (studio/document/model.py).

``OpDocument`` holds one ``Document`` — the Qt-free model of an op package being edited, with its
one setter ``set(key, value, origin)`` — and re-emits its callbacks as Qt signals, so widgets
connect to ``changed(key, origin)``, ``dirtyChanged``, ``pathChanged`` and ``contentEdited`` as
they always did, and write back through the one setter. Everything else is the model's: reading,
editing, saving and reloading happen there, and nothing here decides anything."""
from __future__ import annotations

import weakref
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ...document.model import FIELD, FILE, Document

__all__ = ["FIELD", "FILE", "OpDocument"]        # FIELD, FILE: the key prefixes the views write with


class OpDocument(QObject):
    changed = Signal(str, object)        # key, origin (the view that wrote, or None)
    dirtyChanged = Signal(bool)
    pathChanged = Signal(object)
    # one edit through the setter: key, the files before it, origin (the document's undo, studio/app/notebook/undo.py)
    contentEdited = Signal(str, object, object)

    def __init__(self, files: dict[str, str] | None = None, path: Path | None = None, *, doc_id: str | None = None,
                 binary: dict[str, bytes] | None = None, saved: dict[str, str] | None = None,
                 read_only: bool = False, model: Document | None = None):
        super().__init__()
        self.model = model if model is not None else Document(files or {}, path, doc_id=doc_id, binary=binary,
                                                              saved=saved, read_only=read_only)
        me = weakref.ref(self)       # the model holds no reference back: no cycle for the collector

        def relay(signal: str):
            def emit(*args):
                doc = me()
                if doc is not None:
                    getattr(doc, signal).emit(*args)
            return emit
        for event, signal in (("changed", "changed"), ("dirty", "dirtyChanged"), ("path", "pathChanged"),
                              ("edited", "contentEdited")):
            self.model.subscribe(event, relay(signal))

    # ------------------------------------------------------------------ the model's state
    doc_id = property(lambda self: self.model.doc_id)
    binary = property(lambda self: self.model.binary)
    data = property(lambda self: self.model.data)
    toml_problem = property(lambda self: self.model.toml_problem)
    title = property(lambda self: self.model.title)
    manifest_text = property(lambda self: self.model.manifest_text)
    kernel_file = property(lambda self: self.model.kernel_file)
    reference_file = property(lambda self: self.model.reference_file)
    dirty = property(lambda self: self.model.dirty)
    path = property(lambda self: self.model.path)
    read_only = property(lambda self: self.model.read_only)

    def text(self, rel: str) -> str:
        return self.model.text(rel)

    def files(self) -> dict[str, str]:
        return self.model.files()

    def field(self, dotted: str, default=None):
        return self.model.field(dotted, default)

    def position(self, dotted: str) -> tuple[int | None, int | None]:
        return self.model.position(dotted)

    def content_bytes(self) -> dict[str, bytes]:
        return self.model.content_bytes()

    def content_hash(self) -> str:
        return self.model.content_hash()

    # ------------------------------------------------------------------ writing (the model's; signals follow)
    def set(self, key: str, value, origin=None) -> None:
        self.model.set(key, value, origin)

    def restore(self, files: dict[str, str], origin=None) -> None:
        self.model.restore(files, origin)

    def save(self, folder=None, **kw) -> Path:
        return self.model.save(folder, **kw)

    def reload(self, origin=None) -> None:
        self.model.reload(origin)

    def mark_saved(self, path: Path) -> None:
        self.model.mark_saved(path)
