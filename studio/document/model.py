"""The document model: one op package being edited. One setter, change notification by callbacks.

Views never talk to each other. A form field, the op.toml text view and the code editors all
write through ``Document.set(key, value, origin)`` and all listen to its ``changed`` event
(napari's model events; pyqtgraph parametertree's model/view split). Keys:

- ``file:<rel>``   the text of one package file (``file:op.toml``, ``file:forward.wgsl``, ...)
- ``field:<dotted>`` one manifest field (``field:signature``, ``field:tolerance.class``)

Setting a field rewrites op.toml through the one op.toml editor (studio/engine/contract/
toml_edit.py: comments and order survive) and notifies the field key and ``file:op.toml``;
setting op.toml re-parses it and notifies every field whose value changed. A view ignores
events whose origin is itself, so the cursor never jumps while typing.

Events (``subscribe(event, callback)``): ``changed(key, origin)``, ``dirty(bool)``,
``path(Path)``, ``edited(key, files_before, origin)`` (one edit through the setter: the undo
stack's). No Qt here: the Studio's ``OpDocument`` (studio/app/notebook/model.py) re-emits these as
signals, and anything else (a script, a test, a future front end) can hold a document too."""
from __future__ import annotations

import os
import tomllib
import uuid
from collections.abc import Callable
from pathlib import Path

from ..engine.contract.contract import DEFAULT_KERNEL_FILE, DEFAULT_REFERENCE_FILE, build_contract
from ..engine.contract.manifest import read_manifest
from ..engine.contract.package import MANIFEST, content_hash, read_files, write_package
from ..engine.contract.toml_edit import set_value
from ..engine.contract.toml_position import position
from ..engine.errors import StudioError

FIELD, FILE = "field:", "file:"
EVENTS = ("changed", "dirty", "path", "edited")
# Optional manifest fields a form may clear (an empty string removes the key).
OPTIONAL_EMPTY = {"license", "backward.subgradient", "backward.kinks", "tolerance.justification",
                  "backward.gradient_tolerance"}


def leaves(data: dict, prefix: str = "") -> dict[str, object]:
    """Every non-table value of ``data`` by its dotted key."""
    out = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(leaves(v, key + "."))
        else:
            out[key] = v
    return out


def toml_error(text: str, file: str = MANIFEST) -> StudioError | None:
    """The reader's error for ``text`` (invalid TOML at its position), or None."""
    try:
        read_manifest(text.encode("utf-8"), file)
    except StudioError as e:
        return _to_keep(e)
    return None


def _to_keep(e: StudioError) -> StudioError:
    """The error without its traceback and chain, which hold every caller's frame (it is kept on
    the document, and a frame there is the Qt document being built: a cycle)."""
    e.__cause__ = e.__context__ = None
    return e.with_traceback(None)


def contract_problem(text: str) -> StudioError | None:
    """The first problem building the contract finds (positions in op.toml), or None."""
    try:
        build_contract(read_manifest(text.encode("utf-8"), MANIFEST))
    except StudioError as e:
        return _to_keep(e)
    return None


def read_folder(root: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    """The package's content files (the engine's validated reader), split into text and binary."""
    texts, binary = {}, {}
    for rel, raw in read_files(Path(root)).items():
        try:
            texts[rel] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[rel] = raw
    return texts, binary


class Document:
    def __init__(self, files: dict[str, str], path: Path | None = None, *, doc_id: str | None = None,
                 binary: dict[str, bytes] | None = None, saved: dict[str, str] | None = None,
                 read_only: bool = False):
        if MANIFEST not in files:
            raise StudioError(f"a document needs {MANIFEST}", hint="start from a template")
        self.doc_id = doc_id or uuid.uuid4().hex[:12]
        self._files = dict(files)
        self.binary = dict(binary or {})      # non-text package files, carried untouched
        self.path = Path(path) if path else None
        self.read_only = read_only
        self._saved = dict(files) if saved is None else dict(saved)
        self._listeners: dict[str, list[Callable]] = {e: [] for e in EVENTS}
        self.data: dict = {}
        self.toml_problem: StudioError | None = None
        self._parse()

    @classmethod
    def open(cls, path: str | os.PathLike) -> Document:
        """The package in folder ``path`` (or the folder of ``path``/op.toml), even a broken one:
        you open it to fix it."""
        root = Path(path)
        if root.name == MANIFEST:
            root = root.parent
        texts, binary = read_folder(root)
        return cls(texts, root, binary=binary, read_only=not os.access(root, os.W_OK))

    # ------------------------------------------------------------------ notification
    def subscribe(self, event: str, callback: Callable) -> Callable[[], None]:
        """Call ``callback`` on ``event`` (one of EVENTS); returns the function that unsubscribes."""
        if event not in self._listeners:
            raise KeyError(f"no document event {event!r}; one of {', '.join(EVENTS)}")
        self._listeners[event].append(callback)
        return lambda: self._listeners[event].remove(callback)

    def _notify(self, event: str, *args) -> None:
        for callback in list(self._listeners[event]):
            callback(*args)

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

    def position(self, dotted: str) -> tuple[int | None, int | None]:
        """Where op.toml writes field ``dotted``: (line, col) of its value's first character."""
        return position(self.manifest_text, dotted, content=True)

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
        """Change one part of the document and tell every listener."""
        if self.read_only:
            raise StudioError(f"{self.title} is read-only", hint="use File ▸ Save As to make your own copy")
        was_dirty = self.dirty
        before = dict(self._files)
        self._set(key, value, origin)
        if self._files != before:
            self._notify("edited", key, before, origin)
        if self.dirty != was_dirty:
            self._notify("dirty", self.dirty)

    def restore(self, files: dict[str, str], origin=None) -> None:
        """Put every text file back as ``files`` has it (undo/redo): each listener is told, as for
        any change; this is not itself an edit (no ``edited``)."""
        was_dirty = self.dirty
        self._restore(files, origin)
        if self.dirty != was_dirty:
            self._notify("dirty", self.dirty)

    def _restore(self, files: dict[str, str], origin) -> None:
        if MANIFEST not in files:
            raise StudioError(f"a document needs {MANIFEST}")
        for rel in sorted(set(self._files) | set(files)):      # the code files first: a manifest field
            if rel == MANIFEST or self._files.get(rel) == files.get(rel):      # naming a file finds it
                continue
            if rel in files:
                self._files[rel] = files[rel]
            else:
                del self._files[rel]
            self._notify("changed", FILE + rel, origin)
        if files.get(MANIFEST) != self._files.get(MANIFEST):
            self._set(FILE + MANIFEST, files[MANIFEST], origin)

    def _set(self, key: str, value, origin) -> None:
        if key.startswith(FILE):
            rel = key[len(FILE):]
            if self._files.get(rel) == value:
                return
            self._files[rel] = value
            if rel == MANIFEST:
                old = leaves(self.data)
                self._parse()
                self._notify("changed", key, origin)
                new = leaves(self.data)
                for k in sorted(set(old) | set(new)):
                    if old.get(k) != new.get(k):
                        self._notify("changed", FIELD + k, origin)
            else:
                self._notify("changed", key, origin)
        elif key.startswith(FIELD):
            dotted = key[len(FIELD):]
            if self.toml_problem is not None and self.toml_problem.message.startswith("invalid TOML"):
                raise StudioError("op.toml has a syntax error; fix it in the text view first",
                                  file=MANIFEST, line=self.toml_problem.line, col=self.toml_problem.col)
            if value in ("", None) and self.field(dotted) is None:
                return
            if self.field(dotted) == value:
                return
            self._files[MANIFEST] = set_value(self.manifest_text, dotted,
                                              None if value == "" and dotted in OPTIONAL_EMPTY else value)
            self._parse()
            self._notify("changed", key, origin)
            self._notify("changed", FILE + MANIFEST, origin)
        else:
            raise KeyError(key)

    def _parse(self) -> None:
        try:
            self.data = tomllib.loads(self.manifest_text)
            self.toml_problem = None
        except tomllib.TOMLDecodeError:
            self.toml_problem = toml_error(self.manifest_text)
        if self.toml_problem is None:
            self.toml_problem = contract_problem(self.manifest_text)

    # ------------------------------------------------------------------ disk
    def save(self, folder: str | os.PathLike | None = None, *,
             write: Callable[[Path, dict[str, bytes]], object] = write_package) -> Path:
        """Write the document's files into ``folder`` (default: its own) with ``write`` — the
        engine's package writer (crash-safe through studio/engine/atomic.py), or a use case that
        wraps it — and mark them saved there."""
        target = Path(folder) if folder is not None else self.path
        if target is None:
            raise StudioError("this document has no folder yet", hint="use File ▸ Save As")
        if target != self.path and target.exists() and any(target.iterdir()) and not (target / MANIFEST).is_file():
            raise StudioError(f"{target} is not empty and holds no op package", file=str(target),
                              hint="pick an empty folder, or a new name")
        write(target, self.content_bytes())
        self.mark_saved(target)
        return target

    def reload(self, origin=None) -> None:
        """Read the package again from its folder (after another program changed it): every
        listener is told what changed; unsaved edits are replaced, and the document is clean."""
        if self.path is None:
            raise StudioError("this document has no folder to reload from", hint="use File ▸ Save As")
        texts, binary = read_folder(self.path)
        if MANIFEST not in texts:
            raise StudioError(f"{self.path} holds no {MANIFEST} any more", file=str(self.path),
                              hint="open another package, or save this one again")
        was_dirty = self.dirty
        self.binary = binary
        self._restore(texts, origin)
        self._saved = dict(texts)
        if self.dirty != was_dirty:
            self._notify("dirty", self.dirty)

    def mark_saved(self, path: Path) -> None:
        was = self.dirty
        moved = self.path != Path(path)
        self.path = Path(path)
        self._saved = dict(self._files)
        self.read_only = False
        if moved:
            self._notify("path", self.path)
        if was != self.dirty:
            self._notify("dirty", self.dirty)
