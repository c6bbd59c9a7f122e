"""Shipped packages open as the user's own copy (issue 22 point 3): the Studio never writes into
its install. Opening a builtin or a shipped example (anything under the product's resources)
opens an editable copy in ``$SCELLIS_HOME/copies/<its path in the resources>``, made once and
kept: opening it again opens the same copy, with the user's edits. The tab and a banner say so."""
from __future__ import annotations

from pathlib import Path

from ...engine.home import studio_home
from ...engine.resources import ROOT
from .documents import read_folder, write_files

COPIES = "copies"


def shipped_path(path: str | Path) -> Path | None:
    """``path``'s place inside the product's resources (e.g. ``examples/windowed_median``), or None
    for a folder of the user's."""
    try:
        p = Path(path).resolve()
        root = ROOT.resolve()
    except OSError:
        return None
    return p.relative_to(root) if p.is_relative_to(root) else None


def copies_dir() -> Path:
    return studio_home() / COPIES


def copy_of(path: str | Path) -> Path:
    """The user's copy of the shipped package at ``path``: made now (through the engine's package
    writer: crash-safe, validated) unless it exists already."""
    rel = shipped_path(path)
    if rel is None:
        raise ValueError(f"{path} is not a shipped package")
    dst = copies_dir() / rel
    if not (dst / "op.toml").is_file():
        texts, binary = read_folder(Path(path))
        write_files(dst, {**{k: v.encode("utf-8") for k, v in texts.items()}, **binary}, ctx=None, op=None)
    return dst


def original_of(path: str | Path | None) -> Path | None:
    """The shipped package a copy was made from (None for anything else)."""
    if path is None:
        return None
    try:
        rel = Path(path).resolve().relative_to(copies_dir().resolve())
    except (OSError, ValueError):
        return None
    src = ROOT / rel
    return src if (src / "op.toml").is_file() else None


def banner_text(copy: Path, original: Path) -> str:
    rel = shipped_path(original)
    return (f"Your editable copy of the shipped package {rel.as_posix() if rel else original.name}, kept in your "
            f"folder: {copy}. Saving writes here; the shipped package stays as installed.")
