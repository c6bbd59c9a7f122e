"""The tuning record and what a run reads of it: ``tuning/<package content hash>/<GPU profile
id>.json`` in the user folder (studio/engine/records/places.py), sealed with the folder's key
(docs/receipt.md), written by ``scellis tune`` (studio/engine/services/tuning.py). ``tuned_for`` is
the one place a run (the CLI's, the Studio's, a workflow's step) asks which values of a package's
tunable overrides run: its parameter class's proven winner, else the ``*`` class's, else the
declared default. A kernel edit changes the content hash, so an old record is never found for the
new content; a record edited or written elsewhere is refused (the seal); a winner the record does
not show as proven is never run."""
from __future__ import annotations

from pathlib import Path

import msgspec

from ..contract.package import OpPackage
from ..contract.tunables import declared, tunables
from ..errors import StudioError
from ..records.places import tuning_path
from ..records.reader import read_record
from ..records.seal import Seal
from .tuning import variant_package

SCHEMA = "scellis-tuning/1"
MAX_BYTES = 1 << 20
ANY = "*"
HINT = "run `scellis tune OP` again to make a new one (or delete the file: the declared default then runs)"
class _Candidate(msgspec.Struct):
    values: dict[str, int | float]
    proven: bool
    cases: int
    failure: str | None
    seconds: list[float]


class _Class(msgspec.Struct):
    params: dict[str, int | float]
    sizes: list[int]
    repeats: int
    winner: dict[str, int | float] | None
    candidates: list[_Candidate]


class TuningRecord(msgspec.Struct):
    schema: str
    op: str
    package_hash: str
    profile: str
    classes: dict[str, _Class]
    seal: dict


def class_key(params: dict | None) -> str:
    return ",".join(f"{k}={params[k]}" for k in sorted(params)) if params else ANY


def record_path(pkg: OpPackage, profile_id: str, seal: Seal) -> Path:
    return tuning_path(seal.home, pkg.hash, profile_id)


def read_tuning(pkg: OpPackage, profile_id: str, seal: Seal) -> dict | None:
    """The sealed tuning record of this content on this GPU profile; None when there is none;
    a StudioError when one is there but does not count (edited, from elsewhere, not this content)."""
    path = record_path(pkg, profile_id, seal)
    if not path.exists():
        return None
    rec = read_record(path, seal, schema=SCHEMA, what="the tuning record", hint=HINT, max_bytes=MAX_BYTES,
                      struct=TuningRecord)
    doc = rec.require_sealed("the tuning record", HINT)
    if doc["package_hash"] != pkg.hash or doc["profile"] != profile_id:
        raise StudioError("the tuning record is for other content or another GPU profile", file=str(path),
                          field="package_hash", hint=HINT)
    return doc


def values_text(v: dict | None) -> str:
    return ", ".join(f"{k}={x}" for k, x in (v or {}).items()) or "-"


def tuned_for(pkg: OpPackage, profile_id: str, seal: Seal, params: dict | None = None) -> tuple[OpPackage, dict]:
    if not tunables(pkg.contract):
        return pkg, {}
    info = {"values": declared(pkg.contract), "source": "declared", "proven": False, "why": "no tuning record"}
    try:
        doc = read_tuning(pkg, profile_id, seal)
    except StudioError as e:
        return pkg, info | {"why": f"tuning record refused: {e.message}", "record": e.file}
    if doc is None:
        return pkg, info
    cls = doc["classes"].get(class_key(params)) or doc["classes"].get(ANY)
    if cls is None or cls["winner"] is None:
        return pkg, info | {"why": f"the tuning record has no class {class_key(params)} or {ANY}"}
    proven = [c for c in cls["candidates"] if c["values"] == cls["winner"] and c["proven"]]
    if not proven:          # a sealed record names only proven winners; never run anything else
        return pkg, info | {"why": "the tuning record's winner is not a proven candidate"}
    try:
        variant = variant_package(pkg, cls["winner"])
    except StudioError as e:
        return pkg, info | {"why": f"tuning record refused: {e.message}"}
    return variant, {"values": dict(cls["winner"]), "source": "tuned", "proven": True, "cases": proven[0]["cases"],
                     "class": class_key(params) if class_key(params) in doc["classes"] else ANY,
                     "record": str(record_path(pkg, profile_id, seal))}


def tuning_line(pkg_id: str, info: dict) -> str | None:
    if not info:
        return None
    if info["source"] == "tuned":
        return (f"tuning {pkg_id}: {values_text(info['values'])} (tuned on this GPU profile, class {info['class']}; "
                f"proven by conformance, {info['cases']} cases)")
    return f"tuning {pkg_id}: {values_text(info['values'])} (declared default: {info['why']})"
