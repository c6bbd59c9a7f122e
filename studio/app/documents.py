"""Documents on disk: open an op package folder (even a broken one: you open it to fix it), save
it through the engine's one package writer (crash-safe, validated), create one from a template.
What counts as a package file, and the count/size/symlink limits, are the engine's
(``read_files``); the app only splits what it read into text and binary."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..engine.context import Context
from ..engine.contract.package import MANIFEST, read_files, write_package
from ..engine.errors import StudioError
from ..engine.resources import ROOT, TEMPLATES
from ..engine.services import actions
from .model import OpDocument

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
AUTHOR_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def read_folder(root: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    """The package's content files (the engine's validated reader), split into text and binary."""
    texts, binary = {}, {}
    for rel, raw in read_files(Path(root)).items():
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


def write_files(folder: Path, files: dict[str, bytes | str], *, ctx: Context | None, op: str | None) -> str:
    """The one way the Studio writes a package: with ``ctx``, through the engine's save use case
    (which records the written content as authored in ``ctx.trust``); without, the engine's
    writer alone (code that was not runnable here stays unrecorded). Returns the content hash."""
    if ctx is not None:
        return actions.save_package(ctx, folder, files, op=op)
    return write_package(folder, files)


def save_document(doc: OpDocument, folder: str | os.PathLike | None = None, *, ctx: Context | None = None) -> Path:
    """Write the document's files into ``folder`` (default: its own), crash-safely. ``ctx``: record
    the content as authored here (the session passes it only for code that was runnable to begin with)."""
    target = Path(folder) if folder is not None else doc.path
    if target is None:
        raise StudioError("this document has no folder yet", hint="use File ▸ Save As")
    if target != doc.path and target.exists() and any(target.iterdir()) and not (target / MANIFEST).is_file():
        raise StudioError(f"{target} is not empty and holds no op package", file=str(target),
                          hint="pick an empty folder, or a new name")
    op = doc.field("id")
    write_files(target, doc.content_bytes(), ctx=ctx, op=str(op) if op else None)
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


def create_from_template(template: str, folder: str | os.PathLike, name: str, author: str = "you", *,
                         ctx: Context | None = None) -> Path:
    """A new package ``folder/name`` from a template, with id ``user/<author>/<name>@1``; with
    ``ctx``, recorded as authored here (the Studio's File ▸ New)."""
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
    files: dict[str, bytes | str] = {rel: text.replace(old_id, new_id) for rel, text in texts.items()}
    files.update(binary)
    write_files(target, files, ctx=ctx, op=new_id)
    return target
