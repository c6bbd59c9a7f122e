"""Content-addressed snapshots: what the worker checks, proves and runs.

The worker is handed a package folder. An unsaved document's current content is written once
to ``<home>/snapshots/<package hash>/`` (never modified afterwards: a conformance run keeps
reading exactly what it started on while the author keeps typing). A receipt issued there is
bound by hash to that content, so when the document is saved with the same content the receipt
is carried into the package's own ``receipts/``.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from ..engine.atomic import write_bytes
from ..engine.contract.package import content_hash
from .paths import snapshots_dir

KEEP = 48
DONE = ".complete"


def snapshot(files: dict[str, bytes], package_hash: str | None = None) -> Path:
    """The snapshot folder holding exactly ``files`` (written if missing). Safe off the GUI thread."""
    h = package_hash or content_hash(files)
    root = snapshots_dir()
    final = root / h[:24]
    if (final / DONE).is_file():
        final.touch()
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".snap-", dir=root))
    try:
        for rel, data in files.items():
            write_bytes(tmp / rel, data)
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


def carry_receipts(package_hash: str, dest: Path) -> list[Path]:
    """Copy the receipts issued on the snapshot of ``package_hash`` (conformance: receipts/*.json;
    gradcheck: receipts/gradcheck/<hash>.json) into ``dest/receipts``, when they are for that content."""
    src = snapshots_dir() / package_hash[:24] / "receipts"
    out = []
    found = sorted(src.glob("*.json")) + sorted(src.glob("gradcheck/*.json")) if src.is_dir() else []
    for r in found:
        try:
            data = json.loads(r.read_text("utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if package_hash in (data.get("hashes", {}).get("package"), data.get("hash")):
            target = dest / "receipts" / r.relative_to(src)
            write_bytes(target, r.read_bytes())
            out.append(target)
    return out
