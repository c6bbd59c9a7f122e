"""Reading the catalog for the catalog panel: every op as a card's facts, with its receipt judged
for this machine's GPU profile. Qt-free on purpose: it runs in the device worker process as the
``catalog`` request (loading every package and re-deriving every receipt's corpus is engine work,
and Python-heavy; in a thread of the GUI process it would hold the GIL against the event loop)."""
from __future__ import annotations

from pathlib import Path

RECEIPT_STATES = ("valid", "none", "stale", "foreign", "failed", "malformed")


def scan(extra_roots: list[str], profile_id: str | None) -> list[dict]:
    from ..engine.contract.catalog import Catalog
    from ..engine.proof.receipts import local_status
    cat = Catalog.default([Path(r) for r in extra_roots])
    cards = []
    for pkg in cat.list():
        c = pkg.contract
        status = None
        if profile_id:
            try:
                status = local_status(pkg, profile_id)
            except Exception:  # noqa: BLE001 - a broken receipt folder must not hide the op
                status = "malformed"
        cards.append({"id": pkg.id, "summary": c.summary, "source": "builtin" if c.id.namespace == "core" else "user",
                      "tolerance": str(c.tolerance), "category": c.tolerance.category, "path": str(pkg.root),
                      "hash": pkg.hash, "receipt": status, "backward": c.backward.kind,
                      "visibility": c.visibility})
    return cards + [{"problem": e.format()} for e in cat.problems]


def handler(*, progress, roots: list[str] | None = None, profile_id: str | None = None) -> list[dict]:
    """The worker's ``catalog`` request."""
    return scan(list(roots or []), profile_id)


def register() -> None:
    """Teach the device worker the ``catalog`` request (before its first client starts)."""
    from ..engine import worker
    if "catalog" not in worker.HANDLERS:
        worker.register("catalog", "studio.app.catalog_scan:handler", budget_s=60.0)
