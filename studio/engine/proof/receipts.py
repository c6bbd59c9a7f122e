"""Receipts, both kinds, in one home: the user folder (studio/engine/records/places.py).

Conformance receipts are bound by hash to the op's parts and corpus and scoped to a GPU profile.
Schema (docs/receipt.md): JSON with ``schema``, ``op``, ``hashes`` (contract, reference,
kernel, package, corpus), ``corpus`` (identity and case count), ``tolerance``, ``category``,
``gpu_profile`` (full), ``engine_version``, ``wgpu_version``, ``cases``, ``verdict``, ``created``;
one per GPU profile in ``$SCELLIS_HOME/receipts/<package content hash>/``, so two user folders
never share one and a read-only install is provable.

Gradcheck receipts (docs/gradients.md) record a gradcheck verdict for the package's exact content
(``receipts/<content hash>/gradcheck.json``); training accepts a declared VJP only with a passing one.
Which results *earn* a receipt is the use-case layer's rule (studio/engine/services/actions.py).

Both kinds are records (studio/engine/records/): sealed with the user folder's key, read bounded
and strict, their fields checked by a typed schema. Only a receipt sealed here can count here; any
other is ``foreign`` (made elsewhere, or by hand) or ``forged`` (this key's seal, content changed).
``seal`` arguments default to the key of the user folder; a Context passes its own (``ctx.seal``).
Receipts that older versions wrote into the package folder are ignored (``legacy_note`` says so)."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta, Struct

from ... import __version__
from ..contract.package import MAX_FILE_BYTES, OpPackage, load_package
from ..errors import StudioError
from ..home import studio_home
from ..records import places
from ..records.reader import read_document, read_object, schema_problem, show
from ..records.seal import Seal
from ..records.writer import write_record
from .corpus import SEEDS, memo_key, regenerate
from .reliance import failure_record

SCHEMA = "scellis-receipt/1"
GRADCHECK_SCHEMA = "scellis-gradcheck/1"
GRADCHECK_VERDICTS = ("pass", "fail", "inconclusive")
MAX_RECEIPT_BYTES = MAX_FILE_BYTES      # a receipt is a few KB; a bigger file is refused from its size
MAX_SEED = 2**128                       # corpus seeds are non-negative and below this
MAX_FOLD_SIZE = 65537 * 256 + 257       # the largest launch fold a kernel can have (65,537 workgroups, sizes.fold_point)
INFORMATIONAL = ("created", "seconds", "engine_version")   # recorded for people, judged by nobody
BACKWARD_FIELDS = ("tolerance", "cases", "passed", "failed", "verdict")
HINT = "delete it and run `scellis conform` again"
RING_RECEIPTS = "ring"

_Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
_Count = Annotated[int, Meta(ge=0)]


class _Hashes(Struct, forbid_unknown_fields=True):
    contract: _Hex64
    reference: _Hex64
    kernel: _Hex64
    package: _Hex64
    corpus: _Hex64


class _Corpus(Struct):
    generator: str
    version: _Count
    seed: Annotated[int, Meta(ge=0)]                  # and below MAX_SEED (receipt_problems: msgspec bounds are int64)
    large: bool
    signature: str
    cases: _Count
    fold_size: Annotated[int, Meta(ge=1, le=MAX_FOLD_SIZE)] | None = None


class _Cases(Struct, forbid_unknown_fields=True):
    total: _Count
    passed: _Count
    failed: _Count


class _Backward(Struct, forbid_unknown_fields=True):
    tolerance: str
    cases: _Count
    passed: _Count
    failed: _Count
    verdict: Literal["pass", "fail"]


class _Profile(Struct):
    id: Annotated[str, Meta(pattern="^[A-Za-z0-9_-]{1,64}$")]
    wgpu_version: str | None = None


class _SealField(Struct, forbid_unknown_fields=True):
    alg: Annotated[str, Meta(max_length=128)]
    key: Annotated[str, Meta(max_length=128)]
    mac: Annotated[str, Meta(max_length=128)]
    fields: dict[str, Annotated[str, Meta(max_length=128)]] | None = None


class ReceiptSchema(Struct, forbid_unknown_fields=True):
    """scellis-receipt/1, field by field (docs/receipt.md)."""
    schema: Literal["scellis-receipt/1"]
    op: str
    hashes: _Hashes
    corpus: _Corpus
    tolerance: str
    category: str
    gpu_profile: _Profile
    engine_version: str
    wgpu_version: str
    cases: _Cases
    verdict: Literal["pass", "fail"]
    created: str
    seconds: Annotated[float, Meta(ge=0)]
    seal: _SealField | None = None
    backward: _Backward | None = None
    coverage: dict | None = None
    mutation: dict | None = None
    failure: dict | None = None       # a failing run's first failing case (proof/reliance.py)


class GradcheckSchema(Struct):
    schema: Literal["scellis-gradcheck/1"]
    hash: _Hex64
    verdict: Literal["pass", "fail", "inconclusive"]


def _seal(seal: Seal | None) -> Seal:
    return seal if seal is not None else Seal(studio_home())


def receipt_dir(pkg: OpPackage, seal: Seal | None = None) -> Path:
    """$SCELLIS_HOME/receipts/<content hash>/: this content's receipts in this user folder."""
    return places.receipts_folder(_seal(seal).home, pkg.hash)


def ring_receipts_dir(pkg: OpPackage) -> Path:
    """<package>/receipts/ring/: what a ring held for a fetched package, kept as the publisher's
    record; foreign by definition, never counted."""
    return pkg.root / "receipts" / RING_RECEIPTS


def read_foreign(path: Path) -> dict:
    """A receipt-like JSON object (either kind) read bounded and strict, for showing only."""
    return read_object(path, what="receipt", hint=HINT, max_bytes=MAX_RECEIPT_BYTES)


def legacy_note(pkg: OpPackage) -> str | None:
    """One line when the package folder still holds receipts an older version wrote there."""
    old = pkg.root / "receipts"
    try:
        found = [p for p in old.rglob("*.json") if RING_RECEIPTS not in p.relative_to(old).parts]
    except OSError:
        found = []
    if not found:
        return None
    return (f"note: {len(found)} receipt file(s) in {old} from an older version are ignored; receipts now live in "
            "the user folder ($SCELLIS_HOME/receipts): run `scellis conform` to earn one there")


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
        **({"backward": {k: rep.backward.to_json()[k] for k in BACKWARD_FIELDS}} if rep.backward is not None else {}),
        **({"coverage": rep.coverage} if getattr(rep, "coverage", None) is not None else {}),
        **({"mutation": rep.mutation} if getattr(rep, "mutation", None) is not None else {}),
        **({"failure": failure_record(rep)} if not rep.ok else {}),
    }


def write_receipt(pkg: OpPackage, receipt: dict, seal: Seal | None = None) -> Path:
    prof = receipt.get("gpu_profile") if isinstance(receipt, dict) else None
    if not (isinstance(prof, dict) and isinstance(prof.get("id"), str)):
        raise StudioError("not a receipt: gpu_profile.id is not a GPU profile id", field="gpu_profile.id",
                          hint="the id names the receipt's file: letters, digits, - and _")
    seal = _seal(seal)
    return write_record(places.receipt_path(seal.home, pkg.hash, prof["id"]), receipt, seal, what="the receipt")


# ------------------------------------------------------------------ reading: bounded, depth-limited, typed
def read_receipt(path: Path) -> dict:
    """A conformance receipt from disk, checked for its schema: anything that is not one (a FIFO, a
    device, a huge or sparse file, deep nesting, a field of the wrong type) is a StudioError that
    names the file and says why, found without blocking or reading more than MAX_RECEIPT_BYTES."""
    receipt = read_document(path, schema=SCHEMA, what="receipt", hint=HINT, max_bytes=MAX_RECEIPT_BYTES)
    problems = receipt_problems(receipt)
    if problems:
        raise StudioError(f"not a receipt: {problems[0]}", file=str(path), field=problems[0].split()[0], hint=HINT)
    return receipt


def receipt_problems(r) -> list[str]:
    """What makes ``r`` no scellis-receipt/1 (docs/receipt.md), each naming the field; [] for one.
    Judged without the package: the typed schema, then the receipt's agreement with itself."""
    if not isinstance(r, dict):
        return [f"receipt is a JSON {type(r).__name__}, not an object"]
    if r.get("schema") != SCHEMA:
        return [f"schema is {show(r.get('schema'))}, not {SCHEMA!r}"]
    p = schema_problem(r, ReceiptSchema)
    if p is not None:
        return [f"{p[0]} is not valid: {p[1]}"]
    out = [] if r["corpus"]["seed"] < MAX_SEED else ["corpus.seed is not an integer in [0, 2**128)"]
    if r["gpu_profile"].get("wgpu_version") != r["wgpu_version"]:
        out.append("wgpu_version differs from gpu_profile.wgpu_version")
    n, c, b = r["cases"], r["corpus"], r.get("backward")
    if n["passed"] + n["failed"] != n["total"] or n["total"] != c["cases"]:
        out.append("cases do not add up (passed + failed = total = corpus.cases)")
    if r["verdict"] == "pass" and (n["failed"] != 0 or not n["total"]):
        out.append("verdict is 'pass' but not every case passed")
    if b is not None and b["passed"] + b["failed"] != b["cases"]:
        out.append("backward does not add up (passed + failed = cases)")
    return out


# ------------------------------------------------------------------ judging a receipt against the package
@dataclass
class Verification:
    status: str            # valid | failed | stale | foreign | forged | malformed
    problems: list[str]
    receipt: dict | None


def verify_receipt(pkg: OpPackage, receipt: dict, profile_id: str, seal: Seal | None = None, *,
                   corpora: dict | None = None) -> Verification:
    """The seal first (only this machine's receipts count), then every field and every hash. A
    receipt from another GPU profile never counts as local conformance. Never raises: whatever
    ``receipt`` holds, the answer is a status and the reasons."""
    problems = receipt_problems(receipt)
    if problems:
        return Verification("malformed", problems, receipt if isinstance(receipt, dict) else None)
    chk = _seal(seal).check(receipt)
    if not chk.ok:
        return Verification(chk.status, [chk.why + (f" ({', '.join(chk.fields[:4])})" if chk.fields else "")], receipt)
    try:
        now_pkg = load_package(pkg.root)
    except StudioError as e:
        return Verification("stale", [f"the package changed and no longer loads: {e.format()}"], receipt)
    problems = _stale(now_pkg, receipt, corpora)
    if problems:
        return Verification("stale", problems, receipt)
    prof = receipt["gpu_profile"]["id"]
    if prof != profile_id:
        return Verification("foreign", [f"made on GPU profile {prof}, this machine is {profile_id}: "
                                        f"run `scellis conform` here"], receipt)
    if receipt["verdict"] != "pass":
        return Verification("failed", ["the receipt records a failing run"], receipt)
    return Verification("valid", [], receipt)


def _stale(pkg: OpPackage, receipt: dict, corpora: dict | None = None) -> list[str]:
    """What differs between a well-formed receipt and the package as it is now. ``corpora``: the
    caller's memo of regenerated corpora ((identity, hash) by signature, seed, large, fold size;
    Context.corpora): the generator is deterministic, so one process regenerates each corpus once."""
    problems = []
    if receipt["op"] != pkg.id:
        problems.append(f"made for op {show(receipt['op'])}, this package is {pkg.id}")
    now, hashes = pkg.part_hashes(), receipt["hashes"]
    for part in ("contract", "reference", "kernel", "package"):
        if hashes[part] != now[part]:
            problems.append(f"{part} hash differs: the {part} changed since the receipt was issued")
    c = pkg.contract
    if receipt["tolerance"] != str(c.tolerance) or receipt["category"] != c.tolerance.category:
        problems.append(f"made under tolerance {show(receipt['tolerance'])} ({show(receipt['category'])}); the "
                        f"contract declares {c.tolerance} ({c.tolerance.category})")
    b, bk = receipt.get("backward"), c.backward_kernel
    if bk is not None and (b is None or b["tolerance"] != str(bk.tolerance) or (receipt["verdict"] == "pass" and (
            b["verdict"] != "pass" or b["cases"] != receipt["cases"]["passed"]))):
        problems.append("the op has a device VJP but the receipt records no passing backward conformance under "
                        f"its declared class {bk.tolerance} on every case")
    elif bk is None and b is not None:
        problems.append("the receipt records a backward conformance but the op declares no device VJP")
    if problems:                  # stale already: the corpus need not be regenerated to say so
        return problems
    ident = receipt["corpus"]
    fold = ident.get("fold_size")
    if ident["signature"] != c.signature.text:
        return problems + ["the corpus was generated from another signature"]
    if fold is not None and (c.kernel is None or fold > 65537 * c.kernel.workgroup_size + 257):   # sizes.fold_point
        return problems + [f"corpus.fold_size {fold} is past any launch fold of this kernel"]
    seeds = ident.get("seeds") or [ident["seed"]]
    if not isinstance(seeds, list) or len(seeds) < SEEDS:
        return problems + [f"the corpus was made for {len(seeds) if isinstance(seeds, list) else 'no list of'} "
                           f"seed(s): a receipt is earned over at least {SEEDS}"]
    key = memo_key(c.signature.text, ident)
    made = corpora.get(key) if corpora is not None else None
    if made is None:
        try:
            corpus = regenerate(c.signature, ident)       # its sizes (corpus.py); fold_size alone before v3
        except StudioError as e:
            return problems + [f"the corpus cannot be regenerated: {e.message}"]
        made = ({**corpus.identity, "cases": len(corpus.cases)}, corpus.hash)
        if corpora is not None:
            corpora[key] = made
    if made[0] != ident:
        problems.append("corpus identity differs: this engine's generator makes another corpus from it")
    elif made[1] != hashes["corpus"]:
        problems.append("corpus hash differs: regenerating the corpus gives other cases")
    return problems


def judge_receipts(pkg: OpPackage, profile_id: str, seal: Seal | None = None, *,
                   corpora: dict | None = None) -> list[tuple[Path, Verification]]:
    """Every receipt of this content in the user folder, read and judged for ``profile_id``; one that
    cannot be read (a FIFO, a device, a huge file, not JSON) or is not a receipt is ``malformed`` with
    the reasons. Never raises, never blocks."""
    seal = _seal(seal)
    return [(path, verify_receipt(pkg, data, profile_id, seal, corpora=corpora) if data is not None
             else Verification("malformed", [why], None)) for path, data, why in _read_all(pkg, seal)]


def _read_all(pkg: OpPackage, seal: Seal) -> list[tuple[Path, dict | None, str]]:
    d = receipt_dir(pkg, seal)
    try:
        paths = sorted(p for p in d.glob("*.json") if p.stem != places.GRADCHECK) if d.is_dir() else []
    except OSError:
        paths = []
    out = []
    for p in paths:
        try:
            out.append((p, read_document(p, schema=SCHEMA, what="receipt", hint=HINT, max_bytes=MAX_RECEIPT_BYTES), ""))
        except StudioError as e:
            out.append((p, None, e.message + (f" (line {e.line}, column {e.col})" if e.line else "")))
    return out


def receipts(pkg: OpPackage, seal: Seal | None = None) -> list[tuple[Path, dict | None]]:
    """Every receipt of this content in the user folder: its JSON object, or None where it cannot be
    read as one (judge_receipts says why, and verify_receipt whether an object is a receipt)."""
    return [(p, r) for p, r, _ in _read_all(pkg, _seal(seal))]


def local_status(pkg: OpPackage, profile_id: str, seal: Seal | None = None, *, corpora: dict | None = None) -> str:
    """``valid`` when a receipt for this GPU profile verifies; otherwise why not (``corpora``: as
    judge_receipts)."""
    return summarize(judge_receipts(pkg, profile_id, seal, corpora=corpora))


def summarize(found: list[tuple[Path, Verification]]) -> str:
    """The one status of judged receipts: the best there is (valid first), ``none`` for none."""
    if not found:
        return "none"
    statuses = [v.status for _, v in found]
    for s in ("valid", "failed", "stale", "forged", "foreign"):
        if s in statuses:
            return s
    return "malformed"


# ------------------------------------------------------------------ gradcheck receipts: what training trusts
def gradcheck_receipt_path(pkg: OpPackage, root: str | Path | None = None, *, seal: Seal | None = None) -> Path:
    """$SCELLIS_HOME/receipts/<content hash>/gradcheck.json, or <root>/<content hash>.json when a
    caller keeps its own (a training run's --receipts folder)."""
    return Path(root) / f"{pkg.hash}.json" if root else places.gradcheck_path(_seal(seal).home, pkg.hash)


def write_gradcheck_receipt(pkg: OpPackage, rep, root: str | Path | None = None, *,
                            seal: Seal | None = None) -> Path:
    """``rep``: a GradcheckReport (studio/engine/proof/gradcheck.py)."""
    body = {k: v for k, v in rep.to_json().items() if k not in ("probes", "lines")}
    body.update(schema=GRADCHECK_SCHEMA, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    seal = _seal(seal)
    return write_record(gradcheck_receipt_path(pkg, root, seal=seal), body, seal, what="the gradcheck receipt")


def gradcheck_status(pkg: OpPackage, root: str | Path | None = None, *,
                     seal: Seal | None = None) -> tuple[str, str]:
    """(pass | fail | inconclusive | none | malformed | foreign | forged, a sentence) for the
    package's content now. Read like a conformance receipt: bounded, never blocking, never raising."""
    return _read_gradcheck(pkg, root, _seal(seal))[:2]


def gradcheck_receipt(pkg: OpPackage, root: str | Path | None = None, *, seal: Seal | None = None) -> dict | None:
    """The gradcheck receipt of this content, only when it is sealed here; else None."""
    status, _, doc = _read_gradcheck(pkg, root, _seal(seal))
    return doc if status in GRADCHECK_VERDICTS else None


def _read_gradcheck(pkg: OpPackage, root, seal: Seal) -> tuple[str, str, dict | None]:
    path = gradcheck_receipt_path(pkg, root, seal=seal)
    if not path.exists() and not path.is_symlink():
        return "none", f"no gradcheck receipt for this content ({path.name})", None
    try:
        r = read_document(path, schema=GRADCHECK_SCHEMA, what="gradcheck receipt", hint=HINT,
                          max_bytes=MAX_RECEIPT_BYTES, struct=GradcheckSchema)
    except StudioError as e:
        return "malformed", f"{path} is not a gradcheck receipt: {e.message}", None
    if r["hash"] != pkg.hash:
        return "malformed", f"{path} is not a gradcheck receipt for this content", None
    chk = seal.check(r)
    if not chk.ok:
        return chk.status, f"{path.name}: {chk.why}; it never counts here (run `scellis gradcheck {pkg.root}`)", None
    if r.get("tolerance_source") == "override":
        return "inconclusive", "the receipt was made with a tolerance given on the command line", r
    return r["verdict"], f"gradcheck {r['verdict']} ({r.get('created', '?')}): {r.get('why') or 'all probes agree'}", r
