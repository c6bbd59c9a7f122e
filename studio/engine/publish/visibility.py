"""Visibility, ``private`` (the default) → ``workspace`` → ``public``, and the edits of op.toml
that publishing and forking make: top-level keys rewritten in place (the rest of the file, its
comments and its layout, is kept byte for byte), the result re-read before anything is written.

Leaving ``private`` needs a valid SPDX license; ``public`` needs the public bar (bar.py), which
the use case (studio/engine/services/publishing.py) judges with this machine's receipts."""
from __future__ import annotations

import json
import re

from ..contract.contract import VISIBILITIES
from ..contract.manifest import read_manifest
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


def toml_value(value) -> str:
    """A TOML literal for a string, an int or a {str: str} inline table."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"cannot write {value!r} as a top-level op.toml value")
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def set_top_level(text: str, updates: dict, *, file: str) -> str:
    """``text`` (op.toml) with each top-level key of ``updates`` set: an existing one-line key is
    rewritten where it stands, a missing one goes after the ``id`` line. The result must read back
    with the same values."""
    lines = text.split("\n")
    first_table = next((k for k, raw in enumerate(lines) if raw.strip().startswith("[")), len(lines))
    for key, value in updates.items():
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        at = next((k for k in range(first_table) if pattern.match(lines[k])), None)
        new = f"{key} = {toml_value(value)}"
        if at is not None:
            lines[at] = new
            continue
        id_at = next((k for k in range(first_table) if re.match(r"^\s*id\s*=", lines[k])), -1)
        lines.insert(id_at + 1, new)
        first_table += 1
    out = "\n".join(lines)
    try:
        data = read_manifest(out.encode("utf-8"), file).data
    except StudioError:
        data = {}
    for key, value in updates.items():
        if data.get(key) != value:
            raise StudioError(f"cannot set {key} in op.toml: the key is written over several lines there",
                              file=file, field=key, hint=f"write {key} on one line at the top of op.toml, then retry")
    return out
