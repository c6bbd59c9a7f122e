"""Where the Studio keeps its own files: ``$SCELLIS_HOME`` if set, else the platform's user data dir
(the same root the engine's catalog uses for ``ops/``)."""
from __future__ import annotations

from pathlib import Path

from ...engine.home import studio_home


def autosave_dir() -> Path:
    return studio_home() / "autosave"


def snapshots_dir() -> Path:
    return studio_home() / "snapshots"


RECENT = "recent.json"
RECENT_MAX = 30


def recent_packages() -> list[Path]:
    """Package folders opened or created in the Studio, newest first (the catalog shows them under
    My ops even when they live outside the user ops folder)."""
    import json
    try:
        items = json.loads((studio_home() / RECENT).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    return [Path(p) for p in items if isinstance(p, str) and (Path(p) / "op.toml").is_file()]


def remember_package(folder: Path) -> None:
    import json

    from ...engine.atomic import write_text
    folder = Path(folder).resolve()
    items = [folder] + [p for p in recent_packages() if p.resolve() != folder]
    write_text(studio_home() / RECENT, json.dumps([str(p) for p in items[:RECENT_MAX]], indent=1))
