"""Documents on disk: open an op package folder (even a broken one: you open it to fix it), save
it through the engine's one package writer (crash-safe, validated), create one from a template.
Reading and saving are the document model's (studio/document/model.py: what counts as a package
file, and the count/size/symlink limits, are the engine's ``read_files``); the Studio adds the
save use case that records authorship, and File ▸ New's edits go through the one op.toml editor."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ...document.model import Document, read_folder  # read_folder: the app's name for it
from ...engine.context import Context
from ...engine.contract.contract import VISIBILITIES as VISIBILITY_CHOICES
from ...engine.contract.package import MANIFEST, write_package
from ...engine.contract.toml_edit import set_values
from ...engine.errors import StudioError
from ...engine.resources import ROOT, TEMPLATES
from ...engine.services import actions
from .model import OpDocument

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
AUTHOR_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def open_package(path: str | os.PathLike) -> OpDocument:
    return OpDocument(model=Document.open(path))


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
    op = doc.field("id")
    return doc.save(folder, write=lambda target, files: write_files(target, files, ctx=ctx,
                                                                    op=str(op) if op else None))


def _template_meta(d: Path) -> dict:
    import tomllib
    meta = d / "template.toml"
    if not meta.is_file():
        return {}
    try:
        return tomllib.loads(meta.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _template_source(d: Path) -> Path | None:
    """A template folder is an op package, or holds template.toml naming the package it copies:
    ``from`` (relative to the product's resources: the story's op, never a stale copy) or
    ``package`` (a folder inside the template, e.g. ``op``)."""
    if (d / "template.toml").is_file():
        meta = _template_meta(d)
        src = (ROOT / meta["from"]) if meta.get("from") else (d / meta["package"]) if meta.get("package") else None
        return src if src is not None and (src / MANIFEST).is_file() else None
    return d if (d / MANIFEST).is_file() else None


def template_infos() -> list[dict]:
    """Each template under resources/templates: name, title, summary, kind, in the order the
    templates declare (the story's op first), then by name."""
    import tomllib
    out = []
    for d in sorted(TEMPLATES.iterdir()) if TEMPLATES.is_dir() else []:
        src = _template_source(d) if d.is_dir() else None
        if src is None:
            continue
        meta = _template_meta(d)
        try:
            data = tomllib.loads((src / MANIFEST).read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        summary = meta.get("summary") or data.get("summary", "")
        sig = str(data.get("signature") or "")
        op_name = sig[:sig.index("(")].strip() if "(" in sig else d.name
        out.append({"name": d.name, "title": str(meta.get("title") or d.name), "summary": str(summary),
                    "op_name": op_name if NAME_RE.match(op_name) else d.name,
                    "kind": str(meta.get("kind") or d.name), "order": int(meta.get("order", 100)),
                    "license": str(data.get("license") or "")})
    out.sort(key=lambda t: (t["order"], t["name"]))
    return out


def templates() -> list[tuple[str, str]]:
    """(name, summary) of each template under resources/templates."""
    return [(t["name"], t["summary"]) for t in template_infos()]


def create_from_template(template: str, folder: str | os.PathLike, name: str, author: str = "you", *,
                         license: str | None = None, visibility: str | None = None, summary: str | None = None,
                         ctx: Context | None = None) -> Path:
    """A new package ``folder/name`` from a template, with id ``user/<author>/<name>@1``, the
    signature named ``name``, ``authors = [author]`` and — when given — its license, visibility
    and summary; with ``ctx``, recorded as authored here (the Studio's File ▸ New)."""
    if not NAME_RE.match(name):
        raise StudioError(f"op name {name!r} must be lower case letters, digits and _ (starting with a letter)",
                          field="name", hint="e.g. windowed_median")
    if not AUTHOR_RE.match(author):
        raise StudioError(f"author {author!r} must be lower case letters, digits, '.', '_' or '-'", field="author")
    src = _template_source(TEMPLATES / template) if (TEMPLATES / template).is_dir() else None
    if src is None:
        raise StudioError(f"no template '{template}'", field="template",
                          hint="one of: " + ", ".join(n for n, _ in templates()))
    if visibility is not None and visibility not in VISIBILITY_CHOICES:
        raise StudioError(f"visibility {visibility!r} is not one of {', '.join(VISIBILITY_CHOICES)}",
                          field="visibility")
    texts, binary = read_folder(src)
    import tomllib
    data = tomllib.loads(texts[MANIFEST])
    old_id = data["id"]
    new_id = f"user/{author}/{name}@1"
    target = Path(folder) / name
    if target.exists() and any(target.iterdir()):
        raise StudioError(f"{target} already exists and is not empty", file=str(target),
                          hint="choose another name or folder")
    files: dict[str, bytes | str] = {rel: text.replace(old_id, new_id) for rel, text in texts.items()}
    manifest = str(files[MANIFEST])
    sig = data.get("signature")
    updates: dict = {}
    if isinstance(sig, str) and "(" in sig:
        updates["signature"] = name + sig[sig.index("("):]
    updates["authors"] = [author]
    updates.update({k: v for k, v in (("license", license), ("visibility", visibility), ("summary", summary)) if v})
    if license == "" and "license" in data:       # cleared in the dialog: the new op has none (it stays private)
        updates["license"] = None
    manifest = set_values(manifest, updates, file=str(src / MANIFEST))
    files[MANIFEST] = manifest
    files.update(binary)
    write_files(target, files, ctx=ctx, op=new_id)
    return target
