"""An op's standing, as a front end shows it without running anything: whether its code may run
here (trust, studio/engine/trust/store.py) and whether it is proven on this GPU profile (its
receipts, studio/engine/proof/receipts.py). The Studio and the CLI ask these questions here, so
the answer is the same in both."""
from __future__ import annotations

from pathlib import Path

from ..contract.package import OpPackage
from ..errors import StudioError
from ..proof import receipts
from ..records.seal import Seal
from ..trust.code import code_hash
from ..trust.store import TrustStatus, TrustStore


def draft_trust(store: TrustStore, path: Path | None, content_hash: str, files: dict[str, bytes]) -> TrustStatus:
    """The trust judgement of content that may not be saved yet (the Studio's open document): by its
    folder, its content hash and the hash of the Python the reference process would receive (a
    kernel-only edit keeps trust). ``store``: the context's (``ctx.trust``)."""
    return store.status_of(path, content_hash, code=code_hash(files))


def receipt_status(pkg: OpPackage, profile_id: str, seal: Seal | None = None) -> str:
    """``valid`` when a conformance receipt for this GPU profile verifies; otherwise why not
    (``none``, ``stale``, ``failed``, ``forged``, ``foreign``, ``malformed``)."""
    return receipts.local_status(pkg, profile_id, seal)


def why_unreadable(path: str | Path) -> list[str]:
    """Why a receipt file is not one (the worker reports the status only); [] when it reads."""
    try:
        receipts.read_receipt(Path(path))      # bounded, never blocking, its schema checked
    except StudioError as e:
        return [e.message + (f" (line {e.line}, column {e.col})" if e.line else "")]
    return []
