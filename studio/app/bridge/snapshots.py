"""Content-addressed snapshots: what the worker checks, proves and runs.

The worker is handed a package folder. An unsaved document's current content is written once
to ``<home>/snapshots/<package hash>/`` (never modified afterwards: a conformance run keeps
reading exactly what it started on while the author keeps typing). A receipt issued there is
kept in the user folder keyed by that content's hash, so the saved document with the same content
has it too (where and how a receipt is stored is the engine's: studio/engine/proof/receipts.py).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ...engine.contract.package import content_hash, write_package
from ...engine.errors import StudioError
from ..shell.paths import snapshots_dir

KEEP = 48
DONE = ".complete"


def snapshot_folder(package_hash: str) -> Path:
    return snapshots_dir() / package_hash[:24]


def snapshot(files: dict[str, bytes], package_hash: str | None = None) -> Path:
    """The snapshot folder holding exactly ``files`` (written if missing). Safe off the GUI thread."""
    h = package_hash or content_hash(files)
    final = snapshot_folder(h)
    root = final.parent
    if (final / DONE).is_file():
        final.touch()
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".snap-", dir=root))
    try:
        written = write_package(tmp, files)
        if written != h:
            raise StudioError(f"the snapshot of {h[:16]} reads back as {written[:16]}", file=str(tmp),
                              hint="a file of the document is not a package file (a dot file? a '~' backup?)")
        (tmp / DONE).write_text(h)
        try:
            tmp.rename(final)
        except OSError:          # another thread made it first, or a stale partial one is there
            if not (final / DONE).is_file():
                shutil.rmtree(final, ignore_errors=True)
                tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _prune(root)
    return final


def _prune(root: Path) -> None:
    snaps = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    for old in snaps[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
