"""The device worker's ``tune`` request (HANDLERS in services/tuning.py): the target resolved
freshly (edits on disk are seen), announced, then the use case the CLI and the Studio share."""
from __future__ import annotations

from .actions import resolve
from .tuning import tune


def handle_tune(req, *, target: str, params: dict | None = None, sizes: list | None = None,
                repeats: int | None = None, seed: int = 0, only: dict | None = None, record: bool = True):
    pkg = resolve(req.ctx, target)
    req.announce(pkg)
    return tune(req.ctx, pkg, params=params, sizes=sizes, repeats=repeats, seed=seed, only=only, record=record,
                progress=req.progress)
