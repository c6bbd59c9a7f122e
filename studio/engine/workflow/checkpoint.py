"""Training checkpoints: the trainable parameters, the optimizer's state and the loss curve so far,
as one record (studio/engine/records/): sealed with the user folder's key, written atomically, read
bounded and strict with a typed schema. A checkpoint from another user folder, or with any field
edited after sealing, is refused naming the field; every parameter is checked against its array
hash (docs/workflows.md, "Checkpoints")."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from msgspec import Meta, Struct

from ..errors import StudioError
from ..records.canonical import array_digest
from ..records.reader import read_record
from ..records.seal import Seal
from ..records.writer import write_record

SCHEMA = "scellis-train-checkpoint/1"
MAX_CHECKPOINT_BYTES = 64 << 20
MAX_STEP = 1_000_000
HINT = "resume from a checkpoint written by `scellis train` in this user folder, or start afresh without --resume"


class _Param(Struct, forbid_unknown_fields=True):
    values: list[float]
    sha256: Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
    dtype: str
    shape: list[Annotated[int, Meta(ge=0)]]


class CheckpointSchema(Struct, forbid_unknown_fields=True):
    schema: Literal["scellis-train-checkpoint/1"]
    workflow_sha256: Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
    step: Annotated[int, Meta(ge=0, le=MAX_STEP)]
    optimizer: dict
    losses: list[float]
    params: dict[str, _Param]
    seal: dict | None = None


def make_checkpoint(*, workflow_sha256: str, step: int, params: dict[str, np.ndarray], optimizer: dict,
                    losses: list[float]) -> dict:
    return {"schema": SCHEMA, "workflow_sha256": workflow_sha256, "step": int(step), "optimizer": optimizer,
            "losses": [float(v) for v in losses],
            "params": {n: {"values": [float(v) for v in np.asarray(a, np.float32).reshape(-1)],
                           **array_digest(np.asarray(a, np.float32))} for n, a in params.items()}}


def write_checkpoint(path: str | Path, ckpt: dict, seal: Seal) -> tuple[Path, str]:
    """Seal and write it; returns the path and the sha256 of the file's bytes (for the record)."""
    p = write_record(path, ckpt, seal, what="the checkpoint")
    return p, hashlib.sha256(p.read_bytes()).hexdigest()        # the bytes just written, not sealed twice


def read_checkpoint(path: str | Path, seal: Seal) -> dict:
    """A checkpoint sealed in this user folder with every field typed, or a StudioError naming the
    file and what is wrong."""
    return read_record(path, seal, schema=SCHEMA, what="the checkpoint", hint=HINT, max_bytes=MAX_CHECKPOINT_BYTES,
                       struct=CheckpointSchema).require_sealed("the checkpoint", HINT)


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
