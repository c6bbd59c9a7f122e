"""The one writer of records: the body sealed with the user folder's key and written crash-safely
(temp file beside the target, fsync, rename: studio/engine/atomic.py). Only a regular file or a
new name is replaced. An OS error (a full disk, a read-only folder) is one StudioError naming the
file and the errno; the previous record, if any, is left whole."""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..arrays import check_writable
from ..atomic import write_text
from ..errors import StudioError
from .seal import Seal


def finite(value):
    """Non-finite floats as the strings 'nan', 'inf', '-inf' (strict JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_record(path: str | Path, body: dict, seal: Seal, *, what: str = "the record") -> Path:
    """Seal ``body`` (it must carry a ``schema`` id) and write it to ``path``."""
    if not isinstance(body.get("schema"), str):
        raise ValueError("a record carries a schema id")
    p = check_writable(path)
    text = _sealed_text(body, seal)
    try:
        write_text(p, text)
    except OSError as e:
        raise StudioError(f"cannot write {what}: [Errno {e.errno}] {e.strerror or e}", file=str(p),
                          hint="free some space or choose a writable folder; the previous file, if any, is unchanged") \
            from None
    return p


def _sealed_text(body: dict, seal: Seal) -> str:
    """The text of the sealed record: pretty JSON for people; the seal covers its canonical form."""
    return json.dumps(seal.seal(finite(body)), indent=1, sort_keys=True, allow_nan=False) + "\n"
