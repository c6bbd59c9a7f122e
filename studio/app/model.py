"""The document model: one op package being edited. One setter, one change signal.

Views never talk to each other. A form field, the op.toml text view and the code editors all
write through ``OpDocument.set(key, value, origin)`` and all listen to ``changed(key, origin)``
(napari's model events; pyqtgraph parametertree's model/view split). Keys:

- ``file:<rel>``   the text of one package file (``file:op.toml``, ``file:forward.wgsl``, ...)
- ``field:<dotted>`` one manifest field (``field:signature``, ``field:tolerance.class``)

Setting a field rewrites op.toml through a targeted text edit (comments survive) and emits the
field key and ``file:op.toml``; setting op.toml re-parses it and emits every field whose value
changed. A view ignores events whose origin is itself, so the cursor never jumps while typing.
"""
from __future__ import annotations

import tomllib
import uuid
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..engine.contract.contract import DEFAULT_KERNEL_FILE, DEFAULT_REFERENCE_FILE
from ..engine.contract.package import MANIFEST, content_hash
from ..engine.errors import StudioError
from . import toml_edit

FIELD, FILE = "field:", "file:"


def _leaves(data: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_leaves(v, key + "."))
        else:
            out[key] = v
    return out


def toml_error(text: str, file: str = MANIFEST) -> StudioError | None:
    from ..engine.contract.manifest import read_manifest
    try:
        read_manifest(text.encode("utf-8"), file)
    except StudioError as e:
        return e
    return None


class OpDocument(QObject):
    changed = Signal(str, object)        # key, origin (the view that wrote, or None)
    dirtyChanged = Signal(bool)
    pathChanged = Signal(object)
    # one edit through the setter: key, the files before it, origin (the document's undo, studio/app/undo.py)
    contentEdited = Signal(str, object, object)

    def __init__(self, files: dict[str, str], path: Path | None = None, *, doc_id: str | None = None,
                 binary: dict[str, bytes] | None = None, saved: dict[str, str] | None = None,
                 read_only: bool = False):
        super().__init__()
        if MANIFEST not in files:
            raise StudioError(f"a document needs {MANIFEST}", hint="start from a template")
        self.doc_id = doc_id or uuid.uuid4().hex[:12]
        self._files = dict(files)
        self.binary = dict(binary or {})      # non-text package files, carried untouched
        self.path = Path(path) if path else None
        self.read_only = read_only
        self._saved = dict(files) if saved is None else dict(saved)
        self.data: dict = {}
        self.toml_problem: StudioError | None = None
        self._parse()

    # ------------------------------------------------------------------ reading
    @property
    def title(self) -> str:
        name = self.field("id") or "untitled"
        return str(name) + ("" if self.path else " (untitled)")

    @property
    def manifest_text(self) -> str:
        return self._files[MANIFEST]

    def text(self, rel: str) -> str:
        return self._files.get(rel, "")

    def files(self) -> dict[str, str]:
        return dict(self._files)

    def field(self, dotted: str, default=None):
        node = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def kernel_file(self) -> str:
        return str(self.field("kernel.file") or DEFAULT_KERNEL_FILE)

    @property
    def reference_file(self) -> str:
        return str(self.field("reference.file") or DEFAULT_REFERENCE_FILE)

    @property
    def dirty(self) -> bool:
        return self._files != self._saved or self.path is None

    def content_bytes(self) -> dict[str, bytes]:
        out = {rel: t.encode("utf-8") for rel, t in self._files.items()}
        out.update(self.binary)
        return out

    def content_hash(self) -> str:
        """The package hash this content will have on disk (the engine's own function)."""
        return content_hash(self.content_bytes())

    # ------------------------------------------------------------------ the one setter
    def set(self, key: str, value, origin=None) -> None:
        """Change one part of the document and tell every view."""
        if self.read_only:
            raise StudioError(f"{self.title} is read-only", hint="use File ▸ Save As to make your own copy")
        was_dirty = self.dirty
        before = dict(self._files)
        self._set(key, value, origin)
        if self._files != before:
            self.contentEdited.emit(key, before, origin)
        if self.dirty != was_dirty:
            self.dirtyChanged.emit(self.dirty)

    def restore(self, files: dict[str, str], origin=None) -> None:
        """Put every text file back as ``files`` has it (undo/redo): each view is told, as for any
        change; this is not itself an edit (no ``contentEdited``)."""
        if MANIFEST not in files:
            raise StudioError(f"a document needs {MANIFEST}")
        was_dirty = self.dirty
        for rel in sorted(set(self._files) | set(files)):      # the code files first: a manifest field
            if rel == MANIFEST or self._files.get(rel) == files.get(rel):      # naming a file finds it
                continue
            if rel in files:
                self._files[rel] = files[rel]
            else:
                del self._files[rel]
            self.changed.emit(FILE + rel, origin)
        if files.get(MANIFEST) != self._files.get(MANIFEST):
            self._set(FILE + MANIFEST, files[MANIFEST], origin)
        if self.dirty != was_dirty:
            self.dirtyChanged.emit(self.dirty)

    def _set(self, key: str, value, origin) -> None:
        if key.startswith(FILE):
            rel = key[len(FILE):]
            if self._files.get(rel) == value:
                return
            self._files[rel] = value
            if rel == MANIFEST:
                old = _leaves(self.data)
                self._parse()
                self.changed.emit(key, origin)
                new = _leaves(self.data)
                for k in sorted(set(old) | set(new)):
                    if old.get(k) != new.get(k):
                        self.changed.emit(FIELD + k, origin)
            else:
                self.changed.emit(key, origin)
        elif key.startswith(FIELD):
            dotted = key[len(FIELD):]
            if self.toml_problem is not None and self.toml_problem.message.startswith("invalid TOML"):
                raise StudioError("op.toml has a syntax error; fix it in the text view first",
                                  file=MANIFEST, line=self.toml_problem.line, col=self.toml_problem.col)
            if value in ("", None) and self.field(dotted) is None:
                return
            if self.field(dotted) == value:
                return
            self._files[MANIFEST] = toml_edit.set_value(self.manifest_text, dotted, None if value == "" and
                                                        dotted in OPTIONAL_EMPTY else value)
            self._parse()
            self.changed.emit(key, origin)
            self.changed.emit(FILE + MANIFEST, origin)
        else:
            raise KeyError(key)

    def _parse(self) -> None:
        try:
            self.data = tomllib.loads(self.manifest_text)
            self.toml_problem = None
        except tomllib.TOMLDecodeError:
            self.toml_problem = toml_error(self.manifest_text)
        if self.toml_problem is None:
            self.toml_problem = _contract_problem(self.manifest_text)

    # ------------------------------------------------------------------ saving state
    def mark_saved(self, path: Path) -> None:
        was = self.dirty
        moved = self.path != Path(path)
        self.path = Path(path)
        self._saved = dict(self._files)
        self.read_only = False
        if moved:
            self.pathChanged.emit(self.path)
        if was != self.dirty:
            self.dirtyChanged.emit(self.dirty)


# Optional manifest fields a form may clear (an empty string removes the key).
OPTIONAL_EMPTY = {"license", "backward.subgradient", "backward.kinks", "tolerance.justification",
                  "backward.gradient_tolerance"}


def _contract_problem(text: str) -> StudioError | None:
    """The first problem building the contract finds (positions in op.toml), or None."""
    from ..engine.contract.contract import build_contract
    from ..engine.contract.manifest import read_manifest
    try:
        build_contract(read_manifest(text.encode("utf-8"), MANIFEST))
    except StudioError as e:
        return e
    return None
