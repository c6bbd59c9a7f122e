"""Training checkpoints: the trainable parameters, the optimizer's state and the loss curve so far,
as JSON written atomically (studio/engine/atomic.py) and verified when read: the file carries the
sha256 of its own canonical body and every parameter its array hash, so a truncated, edited or
corrupted checkpoint is refused instead of resumed (docs/workflows.md, "Checkpoints")."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..arrays import check_writable
from ..atomic import write_text
from ..contract.package import read_regular
from ..errors import StudioError
from ..proof.receipts import parse_json
from .run import array_digest

SCHEMA = "scellis-checkpoint/1"
MAX_CHECKPOINT_BYTES = 64 << 20
HINT = "resume from a checkpoint written by `scellis train`, or start afresh without --resume"


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def make_checkpoint(*, workflow_sha256: str, step: int, params: dict[str, np.ndarray], optimizer: dict,
                    losses: list[float]) -> dict:
    body = {"schema": SCHEMA, "workflow_sha256": workflow_sha256, "step": int(step), "optimizer": optimizer,
            "losses": [float(v) for v in losses],
            "params": {n: {"values": [float(v) for v in np.asarray(a, np.float32).reshape(-1)],
                           **array_digest(np.asarray(a, np.float32))} for n, a in params.items()}}
    return {**body, "sha256": hashlib.sha256(_canonical(body)).hexdigest()}


def write_checkpoint(path: str | Path, ckpt: dict) -> tuple[Path, str]:
    """Write it; returns the path and the sha256 of the file's bytes (for the record)."""
    p = check_writable(path)
    text = json.dumps(ckpt, indent=1, sort_keys=True, allow_nan=False) + "\n"
    write_text(p, text)
    return p, hashlib.sha256(text.encode()).hexdigest()


def read_checkpoint(path: str | Path) -> dict:
    """A checkpoint whose hashes all verify, or a StudioError naming the file and what is wrong."""
    raw = read_regular(path, MAX_CHECKPOINT_BYTES, what="the checkpoint", file=str(path), hint=HINT)
    d = parse_json(raw, str(path), what="checkpoint", hint=HINT)
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise StudioError(f"not a checkpoint (schema {d.get('schema') if isinstance(d, dict) else None!r}, "
                          f"not {SCHEMA!r})", file=str(path), field="schema", hint=HINT)
    body = {k: v for k, v in d.items() if k != "sha256"}
    try:
        ok = hashlib.sha256(_canonical(body)).hexdigest() == d.get("sha256")
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise StudioError("the checkpoint does not match its own sha256: it was edited or corrupted", file=str(path),
                          field="sha256", hint=HINT)
    for key, typ in (("params", dict), ("optimizer", dict), ("losses", list), ("step", int),
                     ("workflow_sha256", str)):
        if not isinstance(d.get(key), typ):
            raise StudioError(f"checkpoint field {key} is not a {typ.__name__}", file=str(path), field=key, hint=HINT)
    return d


def checkpoint_params(d: dict, *, file: str = "<checkpoint>") -> dict[str, np.ndarray]:
    """The parameters, each checked against its array hash."""
    out = {}
    for n, p in d["params"].items():
        try:
            a = np.asarray(p["values"], np.float32).reshape(p["shape"])
        except (KeyError, TypeError, ValueError):
            raise StudioError(f"checkpoint parameter '{n}' is not an array", file=file, field=f"params.{n}",
                              hint=HINT) from None
        if array_digest(a)["sha256"] != p.get("sha256"):
            raise StudioError(f"checkpoint parameter '{n}' does not match its hash", file=file, field=f"params.{n}",
                              hint=HINT)
        out[n] = a
    return out
