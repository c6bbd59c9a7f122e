"""Reading the catalog for the Studio's catalog panel: every op as a card's facts, with its receipt
judged for this machine's GPU profile. It runs in the device worker as the ``catalog`` request
(services/requests.py): loading every package and re-deriving every receipt's corpus is engine
work, and Python-heavy; in a thread of the GUI process it would hold the GIL against the event loop."""
from __future__ import annotations

from pathlib import Path

import msgspec

from ..contract.catalog import Catalog, origin
from ..proof.receipts import local_status
from ..resources import EXAMPLES

RECEIPT_STATES = ("valid", "none", "stale", "foreign", "failed", "malformed")
GROUPS = ("builtin", "user", "example")
# the shipped examples that fail conformance on purpose: the story's first draft and the
# negative-control medians (folders under the examples folder)
BROKEN_EXAMPLES = ("broken_medians", "windowed_median_first_draft")


class OpCard(msgspec.Struct, kw_only=True):
    """One op of the catalog, as the catalog panel's card shows it (``receipt``: its receipt's
    status for the GPU profile asked, one of RECEIPT_STATES; None when no profile was asked)."""
    id: str
    summary: str
    source: str
    group: str
    broken: bool
    tolerance: str
    category: str
    path: str
    hash: str
    receipt: str | None
    backward: str
    visibility: str


class CatalogReport(msgspec.Struct, kw_only=True):
    """The worker's ``catalog`` request: every op's card, and the packages that could not be read
    (each problem formatted, at its file)."""
    cards: list[OpCard] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)

    def card_dicts(self) -> list[dict]:
        return [msgspec.structs.asdict(c) for c in self.cards]

    def summary(self, profile: str | None) -> str:
        """What the catalog panel's status line says (the problems, if any, follow it)."""
        return f"{len(self.cards)} ops" + (f" · receipts judged for GPU profile {profile}" if profile else "")


def group_of(root: Path, source: str) -> tuple[str, bool]:
    """(catalog group, broken on purpose): ``builtin``; ``example`` for the product's shipped
    examples — never under My ops, which holds what the user wrote or opened; else ``user``."""
    if source == "builtin":
        return "builtin", False
    try:
        rel = Path(root).resolve().relative_to(EXAMPLES.resolve())
    except (ValueError, OSError):
        return "user", False
    return "example", bool(rel.parts) and rel.parts[0] in BROKEN_EXAMPLES


def scan(extra_roots: list[str], profile_id: str | None, seal=None) -> CatalogReport:
    """A fresh read of the catalog (builtins, examples, the user's ops, ``extra_roots``): edits,
    saves and new receipts since the last scan are seen."""
    cat = Catalog.default([Path(r) for r in extra_roots])
    cards = []
    for pkg in cat.list():
        c = pkg.contract
        status = None
        if profile_id:
            try:
                status = local_status(pkg, profile_id, seal)
            except Exception:  # noqa: BLE001 - a broken receipt folder must not hide the op
                status = "malformed"
        source = origin(pkg)
        group, broken = group_of(pkg.root, source)
        cards.append(OpCard(id=pkg.id, summary=c.summary, source=source, group=group, broken=broken,
                            tolerance=str(c.tolerance), category=c.tolerance.category, path=str(pkg.root),
                            hash=pkg.hash, receipt=status, backward=c.backward.kind, visibility=c.visibility))
    return CatalogReport(cards=cards, problems=[e.format() for e in cat.problems])


def catalog(ctx, *, roots: list[str], profile_id: str | None) -> CatalogReport:
    """The worker's ``catalog`` request: the child's context keeps its catalog once read, so the
    panel's refresh scans anew (with the context's seal)."""
    return scan(roots, profile_id, ctx.seal)
