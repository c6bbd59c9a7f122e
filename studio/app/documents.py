"""Documents on disk: open an op package folder (even a broken one: you open it to fix it), save
it through the engine's crash-safe writes, create one from a template."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..engine.atomic import write_bytes, write_text
from ..engine.resources import ROOT, TEMPLATES
from ..engine.errors import StudioError
from ..engine.contract.package import MANIFEST, MAX_FILE_BYTES, MAX_FILES, _package_files
from .model import OpDocument

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
AUTHOR_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def read_folder(root: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    """The package's content files (the engine's own rules of what counts), text and binary."""
    root = Path(root)
    if not (root / MANIFEST).is_file():
        raise StudioError(f"no {MANIFEST} in {root}", file=str(root),
                          hint="an op package is a folder holding op.toml, reference.py and a .wgsl kernel")
    listed = _package_files(root)
    if len(listed) > MAX_FILES:
        raise StudioError(f"package holds {len(listed)} files (limit {MAX_FILES})", file=str(root))
    texts, binary = {}, {}
    for p in listed:
        rel = p.relative_to(root).as_posix()
        if p.is_symlink() and not p.resolve().is_relative_to(root.resolve()):
            raise StudioError(f"'{rel}' leads outside the package folder", file=str(p))
        raw = p.read_bytes()
        if len(raw) > MAX_FILE_BYTES:
            raise StudioError(f"'{rel}' is {len(raw)} bytes (limit {MAX_FILE_BYTES})", file=str(p))
        try:
            texts[rel] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[rel] = raw
    return texts, binary


def open_package(path: str | os.PathLike) -> OpDocument:
    root = Path(path)
    if root.name == MANIFEST:
        root = root.parent
    texts, binary = read_folder(root)
    return OpDocument(texts, root, binary=binary, read_only=not os.access(root, os.W_OK))


def save_document(doc: OpDocument, folder: str | os.PathLike | None = None) -> Path:
    """Write every file (temp, fsync, rename) into ``folder`` (default: the document's own)."""
    target = Path(folder) if folder is not None else doc.path
    if target is None:
        raise StudioError("this document has no folder yet", hint="use File ▸ Save As")
    if target != doc.path and target.exists() and any(target.iterdir()) and not (target / MANIFEST).is_file():
        raise StudioError(f"{target} is not empty and holds no op package", file=str(target),
                          hint="pick an empty folder, or a new name")
    for rel, text in doc.files().items():
        write_text(target / rel, text)
    for rel, data in doc.binary.items():
        write_bytes(target / rel, data)
    doc.mark_saved(target)
    return target


def _template_source(d: Path) -> Path | None:
    """A template folder is an op package, or holds template.toml naming the package it copies."""
    import tomllib
    meta = d / "template.toml"
    if meta.is_file():
        try:
            src = tomllib.loads(meta.read_text("utf-8")).get("from")
        except (OSError, tomllib.TOMLDecodeError):
            return None
        src = (ROOT / src) if src else None
        return src if src is not None and (src / MANIFEST).is_file() else None
    return d if (d / MANIFEST).is_file() else None


def templates() -> list[tuple[str, str]]:
    """(name, summary) of each template under resources/templates."""
    import tomllib
    out = []
    for d in sorted(TEMPLATES.iterdir()) if TEMPLATES.is_dir() else []:
        src = _template_source(d) if d.is_dir() else None
        if src is None:
            continue
        try:
            meta = tomllib.loads((d / "template.toml").read_text("utf-8")) if (d / "template.toml").is_file() else {}
            summary = meta.get("summary") or tomllib.loads((src / MANIFEST).read_text("utf-8")).get("summary", "")
        except (OSError, tomllib.TOMLDecodeError):
            continue
        out.append((d.name, summary))
    return out


def create_from_template(template: str, folder: str | os.PathLike, name: str, author: str = "you") -> Path:
    """A new package ``folder/name`` from a template, with id ``user/<author>/<name>@1``."""
    if not NAME_RE.match(name):
        raise StudioError(f"op name {name!r} must be lower case letters, digits and _ (starting with a letter)",
                          field="name", hint="e.g. windowed_median")
    if not AUTHOR_RE.match(author):
        raise StudioError(f"author {author!r} must be lower case letters, digits, '.', '_' or '-'", field="author")
    src = _template_source(TEMPLATES / template) if (TEMPLATES / template).is_dir() else None
    if src is None:
        raise StudioError(f"no template '{template}'", field="template",
                          hint="one of: " + ", ".join(n for n, _ in templates()))
    texts, binary = read_folder(src)
    import tomllib
    old_id = tomllib.loads(texts[MANIFEST])["id"]
    new_id = f"user/{author}/{name}@1"
    target = Path(folder) / name
    if target.exists() and any(target.iterdir()):
        raise StudioError(f"{target} already exists and is not empty", file=str(target),
                          hint="choose another name or folder")
    for rel, text in texts.items():
        write_text(target / rel, text.replace(old_id, new_id))
    for rel, data in binary.items():
        write_bytes(target / rel, data)
    return target
