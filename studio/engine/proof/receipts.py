"""Receipts, both kinds, in one home.

Conformance receipts are bound by hash to the op's parts and corpus and scoped to a GPU profile.
Schema (docs/receipt.md): JSON with ``schema``, ``op``, ``hashes`` (contract, reference,
kernel, package, corpus), ``corpus`` (identity and case count), ``tolerance``, ``category``,
``gpu_profile`` (full), ``engine_version``, ``wgpu_version``, ``cases``, ``verdict``, ``created``;
one per GPU profile in the package's ``receipts/``.

Gradcheck receipts (docs/gradients.md) record a gradcheck verdict for the package's exact content
(``receipts/gradcheck/<content hash>.json``); training accepts a declared VJP only with a passing one.
Which results *earn* a receipt is the use-case layer's rule (studio/engine/services/actions.py)."""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path

from ... import __version__
from ..atomic import write_text
from ..contract.package import OpPackage, load_package
from ..errors import StudioError
from .corpus import generate

SCHEMA = "scellis-receipt/1"
GRADCHECK_SCHEMA = "scellis-gradcheck/1"
GRADCHECK_VERDICTS = ("pass", "fail", "inconclusive")


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


def local_status(pkg: OpPackage, profile_id: str) -> str:
    """``valid`` when a receipt for this GPU profile verifies; otherwise why not."""
    found = receipts(pkg)
    if not found:
        return "none"
    statuses = [verify_receipt(pkg, r, profile_id).status if r is not None else "malformed" for _, r in found]
    for s in ("valid", "failed", "stale", "foreign"):
        if s in statuses:
            return s
    return "malformed"


# ------------------------------------------------------------------ gradcheck receipts: what training trusts
def gradcheck_receipt_path(pkg: OpPackage, root: str | Path | None = None) -> Path:
    """receipts/gradcheck/<package hash>.json (beside the conformance receipts, not among them)."""
    return (Path(root) if root else pkg.root / "receipts" / "gradcheck") / f"{pkg.hash}.json"


def write_gradcheck_receipt(pkg: OpPackage, rep, root: str | Path | None = None) -> Path:
    """``rep``: a GradcheckReport (studio/engine/proof/gradcheck.py)."""
    body = {k: v for k, v in rep.to_json().items() if k not in ("probes", "lines")}
    body.update(schema=GRADCHECK_SCHEMA, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    path = gradcheck_receipt_path(pkg, root)
    write_text(path, json.dumps(body, indent=2, sort_keys=True) + "\n")
    return path


def gradcheck_status(pkg: OpPackage, root: str | Path | None = None) -> tuple[str, str]:
    """(pass | fail | inconclusive | none | malformed, a sentence) for the package's content now."""
    path = gradcheck_receipt_path(pkg, root)
    if not path.is_file():
        return "none", f"no gradcheck receipt for this content ({path.name})"
    try:
        r = json.loads(path.read_text("utf-8"))
        ok = r["schema"] == GRADCHECK_SCHEMA and r["hash"] == pkg.hash and r["verdict"] in GRADCHECK_VERDICTS
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        return "malformed", f"{path} is not a gradcheck receipt for this content"
    if r.get("tolerance_source") == "override":
        return "inconclusive", "the receipt was made with a tolerance given on the command line"
    return r["verdict"], f"gradcheck {r['verdict']} ({r.get('created', '?')}): {r.get('why') or 'all probes agree'}"
