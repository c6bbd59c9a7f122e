"""Visibility, ``private`` (the default) → ``workspace`` → ``public``. The edits of op.toml that
publishing and forking make go through the one op.toml editor (studio/engine/contract/
toml_edit.py: the rest of the file, its comments and its layout, is kept as the user wrote it).

Leaving ``private`` needs a valid SPDX license; ``public`` needs the public bar (bar.py), which
the use case (studio/engine/services/publishing.py) judges with this machine's receipts."""
from __future__ import annotations

from ..contract.contract import VISIBILITIES
from ..errors import StudioError
from .license import Licenses, require_license

RANK = {v: k for k, v in enumerate(VISIBILITIES)}


def check_visibility(visibility: str) -> str:
    if visibility not in VISIBILITIES:
        raise StudioError(f"visibility {visibility!r} is not one of {', '.join(VISIBILITIES)}", field="--visibility",
                          hint="private (only you), workspace (your colleagues, through a ring), public (anyone)")
    return visibility


def require_shareable(licenses: Licenses, visibility: str, license_: str | None, *, file: str | None = None) -> None:
    """Nothing leaves ``private`` without a valid SPDX license expression."""
    check_visibility(visibility)
    if visibility != "private":
        require_license(licenses, license_, file=file, why=f"to be {visibility}: unlicensed shared work is "
                                                           "all-rights-reserved and nobody could fork it")
