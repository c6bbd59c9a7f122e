"""Where records live in the user folder (``$SCELLIS_HOME``), so that two user folders never
share one and nothing is written into the install:

    receipts/<package content hash>/<GPU profile id>.json   conformance receipts
    receipts/<package content hash>/gradcheck.json           the gradcheck receipt
    tuning/<package content hash>/<GPU profile id>.json     tuning records (tunable overrides)
    cache/reference/<reference hash>/...                     cached reference results

Checkpoints and provenance records go where the user names them (inside the output folder) and are
sealed all the same. Receipts that travel with a package (``receipts/ring/`` inside a fetched
package) are foreign by definition and stay with publishing."""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import StudioError

_HEX64 = re.compile(r"[0-9a-f]{64}")
_PROFILE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
GRADCHECK = "gradcheck"


def receipts_folder(home: Path, content_hash: str) -> Path:
    if not _HEX64.fullmatch(content_hash):
        raise ValueError(f"not a content hash: {content_hash!r}")
    return Path(home) / "receipts" / content_hash


def receipt_path(home: Path, content_hash: str, profile_id: str) -> Path:
    if not _PROFILE_ID.fullmatch(profile_id) or profile_id == GRADCHECK:
        raise StudioError("gpu_profile.id is not a GPU profile id", field="gpu_profile.id",
                          hint="the id names the receipt's file: letters, digits, - and _")
    return receipts_folder(home, content_hash) / f"{profile_id}.json"


def gradcheck_path(home: Path, content_hash: str) -> Path:
    return receipts_folder(home, content_hash) / f"{GRADCHECK}.json"


def cache_folder(home: Path, kind: str) -> Path:
    return Path(home) / "cache" / kind


def tuning_path(home: Path, content_hash: str, profile_id: str) -> Path:
    """tuning/<package content hash>/<GPU profile id>.json: the sealed tuning record (issue 30)."""
    if not _HEX64.fullmatch(content_hash):
        raise ValueError(f"not a content hash: {content_hash!r}")
    if not _PROFILE_ID.fullmatch(profile_id):
        raise StudioError("gpu_profile.id is not a GPU profile id", field="gpu_profile.id",
                          hint="the id names the tuning record's file: letters, digits, - and _")
    return Path(home) / "tuning" / content_hash / f"{profile_id}.json"
