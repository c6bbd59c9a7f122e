"""Learner checkpoints (docs/learner.md "Checkpoints"): the parameters, the state, the step, the
contract hash, the combine order, the sample-to-owner assignment (and the data hash and the metric
history), in ONE record (studio/engine/records/): sealed with the user folder's key, written
atomically, read bounded and strict with a typed schema. Loading refuses a checkpoint from another
user folder, names any field edited after sealing, and checks every array against its hash; a run
resumes only from a checkpoint of the same contract and data, and a refusal says which field differs."""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from msgspec import Meta, Struct

from ..errors import StudioError
from ..home import studio_home
from ..records.canonical import array_hash
from ..records.reader import read_record
from ..records.seal import Seal
from ..records.writer import write_record
from . import combine
from .system import System

FILE = "learner.checkpoint.json"
SCHEMA = "scellis-learner-checkpoint/1"
MAX_STEP = 1_000_000                 # the most steps a run may reach (`scellis learn --steps`)
MAX_CHECKPOINT_BYTES = 256 << 20     # k and m far past what a learner file may declare; a bigger file is refused by its size
HINT = "delete it and run from the start (or restore a good copy)"

_Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
_Count = Annotated[int, Meta(ge=0, le=1 << 31)]


class _F32(Struct, forbid_unknown_fields=True):
    count: _Count
    f32: str


class _I32(Struct, forbid_unknown_fields=True):
    count: _Count
    i32: str


class CheckpointSchema(Struct, forbid_unknown_fields=True):
    schema: Literal["scellis-learner-checkpoint/1"]
    step: Annotated[int, Meta(ge=0, le=MAX_STEP)]
    contract_hash: _Hex64
    order: str
    data_hash: _Hex64
    params_hash: _Hex64
    state_hash: _Hex64
    params: _F32
    state: _F32
    assignment: _I32
    metrics: list[float]
    seal: dict | None = None


@dataclass
class Checkpoint:
    step: int
    params: np.ndarray
    state: np.ndarray
    contract_hash: str
    order: str
    data_hash: str
    assignment: np.ndarray            # owner of each global sample (int32)
    metrics: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, system: System, step: int, params, state, metrics=()) -> Checkpoint:
        return cls(int(step), np.asarray(params, np.float32), np.asarray(state, np.float32),
                   combine.contract_hash(system), combine.order_text(system), system.data_hash(),
                   system.assignment(), [float(x) for x in metrics])

    def owners(self) -> list[np.ndarray]:
        n = int(self.assignment.max()) + 1 if self.assignment.size else 1
        return [np.flatnonzero(self.assignment == o) for o in range(n)]


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def _body(ck: Checkpoint) -> dict:
    return {"schema": SCHEMA, "step": ck.step, "contract_hash": ck.contract_hash, "order": ck.order,
            "data_hash": ck.data_hash, "params_hash": array_hash(ck.params), "state_hash": array_hash(ck.state),
            "params": {"count": int(ck.params.size), "f32": _b64(ck.params)},
            "state": {"count": int(ck.state.size), "f32": _b64(ck.state)},
            "assignment": {"count": int(ck.assignment.size), "i32": _b64(ck.assignment.astype(np.int32))},
            "metrics": ck.metrics}


def _path(folder: str | Path) -> Path:
    return Path(folder) / FILE if Path(folder).is_dir() or not str(folder).endswith(".json") else Path(folder)


def save(folder: str | Path, ck: Checkpoint, seal: Seal | None = None) -> Path:
    return write_record(Path(folder) / FILE, _body(ck), seal or Seal(studio_home()), what="the checkpoint")


def load(folder: str | Path, seal: Seal | None = None) -> Checkpoint:
    """The checkpoint in ``folder``: sealed in this user folder, every field typed, every array
    matching its hash; a StudioError naming the file and the field otherwise."""
    path = _path(folder)
    file = str(path)
    if not path.exists() and not path.is_symlink():
        raise StudioError("no checkpoint here", file=file, hint="run without --resume first, with --checkpoint DIR")
    doc = read_record(path, seal or Seal(studio_home()), schema=SCHEMA, what="the checkpoint", hint=HINT,
                      max_bytes=MAX_CHECKPOINT_BYTES, struct=CheckpointSchema).require_sealed("the checkpoint", HINT)
    try:
        params = _array(doc["params"], "f32", np.float32, "params")
        state = _array(doc["state"], "f32", np.float32, "state")
        assign = _array(doc["assignment"], "i32", np.int32, "assignment")
    except ValueError as e:
        raise StudioError(f"the checkpoint is malformed: {e}", file=file, field=str(e).split()[0], hint=HINT) from None
    for name, arr in (("params", params), ("state", state)):
        if doc[f"{name}_hash"] != array_hash(arr):
            raise StudioError(f"the checkpoint's {name} do not match their hash", file=file, field=f"{name}_hash",
                              hint=HINT)
    if assign.size and (assign.min() < 0 or assign.max() >= assign.size):
        raise StudioError("the checkpoint assigns a sample to an owner that cannot exist", file=file,
                          field="assignment", hint=HINT)
    return Checkpoint(doc["step"], params, state, doc["contract_hash"], doc["order"], doc["data_hash"], assign,
                      [float(x) for x in doc["metrics"]])


def _array(d: dict, kind: str, dtype, name: str) -> np.ndarray:
    try:
        raw = base64.b64decode(d[kind], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{name}.{kind} is not base64") from None
    if len(raw) != int(d["count"]) * np.dtype(dtype).itemsize:
        raise ValueError(f"{name}.count says {d['count']} values, the data holds {len(raw) / np.dtype(dtype).itemsize:g}")
    return np.frombuffer(raw, dtype).copy()


def check_resumable(ck: Checkpoint, system: System, *, file: str | None = None) -> None:
    """Refuse a checkpoint of another learner, naming what differs."""
    diffs = []
    if ck.data_hash != system.data_hash():
        diffs.append(("data_hash", "the samples, initial parameters, state or rate differ"))
    if ck.params.size != system.k or ck.state.size != system.m:
        diffs.append(("params", (f"it holds {ck.params.size} parameters and {ck.state.size} state words, the "
                                 f"learner has k = {system.k}, m = {system.m}")))
    if ck.assignment.size != system.samples.shape[0]:
        diffs.append(("assignment", f"it assigns {ck.assignment.size} samples, the learner has {system.samples.shape[0]}"))
    if ck.contract_hash != combine.contract_hash(system):
        diffs.append(("contract_hash", (f"the contract differs (checkpoint {ck.contract_hash[:16]}, this run "
                                        f"{combine.contract_hash(system)[:16]}: programs, combine tree, precision "
                                        f"or partition; checkpoint order: {ck.order})")))
    if diffs:
        raise StudioError("the checkpoint is of a different learner: " + "; ".join(f"{f}: {why}" for f, why in diffs),
                          file=file, field=diffs[0][0],
                          hint="resume with the learner file (and owners) that wrote it, or start without --resume")
