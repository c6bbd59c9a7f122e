"""Learner checkpoints (docs/learner.md "Checkpoints"): the parameters, the state, the step, the
contract hash, the combine order, the sample-to-owner assignment (and the data hash and the metric
history), in ONE file written atomically (studio/engine/atomic.py) and sealed by the sha256 of its
body. Loading verifies the seal; a run resumes only from a checkpoint of the same contract and
data, and a refusal says which field differs."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import write_bytes
from ..errors import StudioError
from . import combine
from .fingerprint import array_hash, digest
from .system import System

FILE = "learner.checkpoint.json"
FORMAT = "scellis.learner.checkpoint/v1"


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
    return {"format": FORMAT, "step": ck.step, "contract_hash": ck.contract_hash, "order": ck.order,
            "data_hash": ck.data_hash, "params_hash": array_hash(ck.params), "state_hash": array_hash(ck.state),
            "params": {"count": int(ck.params.size), "f32": _b64(ck.params)},
            "state": {"count": int(ck.state.size), "f32": _b64(ck.state)},
            "assignment": {"count": int(ck.assignment.size), "i32": _b64(ck.assignment.astype(np.int32))},
            "metrics": ck.metrics}


def seal_body(body: dict) -> str:
    return digest(json.dumps(body, sort_keys=True, separators=(",", ":")))


def save(folder: str | Path, ck: Checkpoint) -> Path:
    path = Path(folder) / FILE
    body = _body(ck)
    write_bytes(path, json.dumps({**body, "seal": seal_body(body)}, indent=1, sort_keys=True).encode("utf-8"))
    return path


def load(folder: str | Path) -> Checkpoint:
    """The checkpoint in ``folder``, its seal and every field verified; StudioError otherwise."""
    path = Path(folder) / FILE if Path(folder).is_dir() or not str(folder).endswith(".json") else Path(folder)
    file = str(path)
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise StudioError("no checkpoint here", file=file, hint="run without --resume first, with --checkpoint DIR") \
            from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StudioError(f"the checkpoint is not readable JSON ({e})", file=file,
                          hint="it is corrupt: delete it and run from the start") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StudioError("not a learner checkpoint", file=file, field="format", hint=f"expected {FORMAT}")
    seal = doc.pop("seal", None)
    if seal != seal_body(doc):
        raise StudioError("the checkpoint's seal does not match its contents: it was changed or corrupted",
                          file=file, field="seal", hint="delete it and run from the start (or restore a good copy)")
    try:
        params = _array(doc["params"], "f32", np.float32)
        state = _array(doc["state"], "f32", np.float32)
        assign = _array(doc["assignment"], "i32", np.int32)
        ck = Checkpoint(int(doc["step"]), params, state, str(doc["contract_hash"]), str(doc["order"]),
                        str(doc["data_hash"]), assign, [float(x) for x in doc["metrics"]])
    except (KeyError, TypeError, ValueError) as e:
        raise StudioError(f"the checkpoint is malformed ({e})", file=file, hint="delete it and run from the start") \
            from None
    for name, arr in (("params", params), ("state", state)):
        if doc[f"{name}_hash"] != array_hash(arr):
            raise StudioError(f"the checkpoint's {name} do not match their hash", file=file, field=f"{name}_hash",
                              hint="delete it and run from the start")
    return ck


def _array(d: dict, kind: str, dtype) -> np.ndarray:
    a = np.frombuffer(base64.b64decode(d[kind], validate=True), dtype).copy()
    if a.size != int(d["count"]):
        raise ValueError(f"{a.size} values where {d['count']} were written")
    return a


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
