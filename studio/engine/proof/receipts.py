"""Conformance receipts: bound by hash to the op's parts and corpus, scoped to a GPU profile.

Schema (docs/receipt.md): JSON with ``schema``, ``op``, ``hashes`` (contract, reference,
kernel, package, corpus), ``corpus`` (identity and case count), ``tolerance``, ``category``,
``gpu_profile`` (full), ``engine_version``, ``wgpu_version``, ``cases``, ``verdict``, ``created``."""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path

from ... import __version__
from ..atomic import write_text
from .corpus import generate
from ..errors import StudioError
from ..contract.package import OpPackage, load_package

SCHEMA = "scellis-receipt/1"


def receipt_dir(pkg: OpPackage) -> Path:
    return pkg.root / "receipts"


def make_receipt(pkg: OpPackage, rep) -> dict:
    return {
        "schema": SCHEMA,
        "op": pkg.id,
        "hashes": {**pkg.part_hashes(), "corpus": rep.corpus.hash},
        "corpus": {**rep.corpus.identity, "cases": rep.total},
        "tolerance": str(pkg.contract.tolerance),
        "category": pkg.contract.tolerance.category,
        "gpu_profile": rep.profile,
        "engine_version": __version__,
        "wgpu_version": rep.profile["wgpu_version"],
        "cases": {"total": rep.total, "passed": rep.passed, "failed": rep.total - rep.passed},
        "verdict": "pass" if rep.ok else "fail",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(rep.seconds, 3),
    }


def write_receipt(pkg: OpPackage, receipt: dict) -> Path:
    path = receipt_dir(pkg) / f"{receipt['gpu_profile']['id']}.json"
    write_text(path, json.dumps(receipt, indent=2, sort_keys=True) + "\n")
    return path


@dataclass
class Verification:
    status: str            # valid | failed | stale | foreign | malformed
    problems: list[str]
    receipt: dict | None

    @property
    def counts_locally(self) -> bool:
        return self.status == "valid"


def verify_receipt(pkg: OpPackage, receipt: dict, profile_id: str) -> Verification:
    """Recompute every hash. A receipt from another GPU profile never counts as local conformance."""
    problems = []
    if not isinstance(receipt, dict) or receipt.get("schema") != SCHEMA:
        return Verification("malformed", ["not a scellis receipt (schema)"], None)
    try:
        hashes = receipt["hashes"]
        try:
            now = load_package(pkg.root).part_hashes()
        except StudioError as e:
            return Verification("stale", [f"the package changed and no longer loads: {e.format()}"], receipt)
        for part in ("contract", "reference", "kernel", "package"):
            if hashes.get(part) != now[part]:
                problems.append(f"{part} hash differs: the {part} changed since the receipt was issued")
        ident = receipt["corpus"]
        if ident.get("signature") != pkg.contract.signature.text:
            problems.append("the corpus was generated from another signature")
        else:
            corpus = generate(pkg.contract.signature, seed=int(ident["seed"]), large=bool(ident["large"]))
            if corpus.hash != hashes.get("corpus"):
                problems.append("corpus hash differs: regenerating the corpus gives other cases")
        prof = receipt["gpu_profile"]["id"]
    except (KeyError, TypeError, ValueError) as e:
        return Verification("malformed", [f"receipt lacks a field: {e}"], receipt)
    if problems:
        return Verification("stale", problems, receipt)
    if prof != profile_id:
        return Verification("foreign", [f"made on GPU profile {prof}, this machine is {profile_id}: "
                                        f"run `scellis conform` here"], receipt)
    if receipt.get("verdict") != "pass":
        return Verification("failed", ["the receipt records a failing run"], receipt)
    return Verification("valid", [], receipt)


def read_receipt(path: Path) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StudioError(f"unreadable receipt: {e}", file=str(path), hint="delete it and run `scellis conform`") from None


def receipts(pkg: OpPackage) -> list[tuple[Path, dict | None]]:
    d = receipt_dir(pkg)
    out = []
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            out.append((p, read_receipt(p)))
        except StudioError:
            out.append((p, None))
    return out


def local_status(pkg: OpPackage, profile_id: str | None = None) -> str:
    """``valid`` when a receipt for this GPU profile verifies; otherwise why not."""
    if profile_id is None:
        from ..device.device import get_device
        profile_id = get_device().profile.id
    found = receipts(pkg)
    if not found:
        return "none"
    statuses = [verify_receipt(pkg, r, profile_id).status if r is not None else "malformed" for _, r in found]
    for s in ("valid", "failed", "stale", "foreign"):
        if s in statuses:
            return s
    return "malformed"
