"""Receipts, both kinds, in one home.

Conformance receipts are bound by hash to the op's parts and corpus and scoped to a GPU profile.
Schema (docs/receipt.md): JSON with ``schema``, ``op``, ``hashes`` (contract, reference,
kernel, package, corpus), ``corpus`` (identity and case count), ``tolerance``, ``category``,
``gpu_profile`` (full), ``engine_version``, ``wgpu_version``, ``cases``, ``verdict``, ``created``;
one per GPU profile in the package's ``receipts/``.

Gradcheck receipts (docs/gradients.md) record a gradcheck verdict for the package's exact content
(``receipts/gradcheck/<content hash>.json``); training accepts a declared VJP only with a passing one.
Which results *earn* a receipt is the use-case layer's rule (studio/engine/services/actions.py).

Both kinds are sealed (studio/engine/seal.py): an HMAC over the whole receipt with the user's key.
Only a receipt sealed here can count here; any other is ``foreign`` (made elsewhere, or by hand)
or ``forged`` (this key's seal, content changed). ``seal`` arguments default to the key of the user
data folder; a Context passes its own (``ctx.seal``)."""
from __future__ import annotations

import datetime as _dt
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ... import __version__
from ..atomic import write_text
from ..contract.package import MAX_FILE_BYTES, OpPackage, load_package, read_regular
from ..errors import StudioError
from ..home import studio_home
from ..seal import ReceiptSeal
from .corpus import generate

SCHEMA = "scellis-receipt/1"
GRADCHECK_SCHEMA = "scellis-gradcheck/1"
GRADCHECK_VERDICTS = ("pass", "fail", "inconclusive")
MAX_RECEIPT_BYTES = MAX_FILE_BYTES      # a receipt is a few KB; a bigger file is refused from its size
MAX_JSON_DEPTH = 32                     # a receipt nests 4 deep; deeper is refused before parsing
MAX_SEED = 2**128                       # corpus seeds are non-negative and below this
MAX_FOLD_SIZE = 65535 * 256 + 257       # the largest launch fold a kernel can have (workgroups x 256 + margin)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_PROFILE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")     # it names the receipt's file
_JSON_SPECIAL = re.compile(r'[\[\]{}"]')
_JSON_STRING_END = re.compile(r'\\.|"', re.S)
INFORMATIONAL = ("created", "seconds", "engine_version")   # recorded for people, judged by nobody
BACKWARD_FIELDS = ("tolerance", "cases", "passed", "failed", "verdict")


def _seal(seal: ReceiptSeal | None) -> ReceiptSeal:
    return seal if seal is not None else ReceiptSeal(studio_home())


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
        **({"backward": {k: rep.backward.to_json()[k] for k in BACKWARD_FIELDS}} if rep.backward is not None else {}),
    }


def write_receipt(pkg: OpPackage, receipt: dict, seal: ReceiptSeal | None = None) -> Path:
    prof = receipt.get("gpu_profile") if isinstance(receipt, dict) else None
    if not (isinstance(prof, dict) and isinstance(prof.get("id"), str) and _PROFILE_ID.fullmatch(prof["id"])):
        raise StudioError("not a receipt: gpu_profile.id is not a GPU profile id", file=str(receipt_dir(pkg)),
                          field="gpu_profile.id", hint="the id names the receipt's file: letters, digits, - and _")
    path = receipt_dir(pkg) / f"{receipt['gpu_profile']['id']}.json"
    write_text(path, json.dumps(_seal(seal).seal(receipt), indent=2, sort_keys=True) + "\n")
    return path


# ------------------------------------------------------------------ reading: bounded, depth-limited, typed
def json_nesting(text: str, limit: int = MAX_JSON_DEPTH) -> tuple[int, int]:
    """(line, column) of the first array or object opened deeper than ``limit``, else (0, 0); strings
    skipped, linear time: a 100,000-deep document is refused where it gets too deep, never parsed."""
    depth, pos = 0, 0
    while (m := _JSON_SPECIAL.search(text, pos)) is not None:
        c, pos = m.group(), m.end()
        if c == '"':
            while (e := _JSON_STRING_END.search(text, pos)) is not None:
                pos = e.end()
                if e.group() == '"':
                    break
            else:
                return 0, 0                  # unterminated: the parser says where
        elif c in "[{":
            depth += 1
            if depth > limit:
                line = text.count("\n", 0, m.start()) + 1
                return line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        else:
            depth -= 1
    return 0, 0


def _no_duplicates(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"the key {_show(dup)} appears twice in one object")
    return dict(pairs)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(raw: bytes, file: str, *, what: str = "receipt", hint: str | None = None):
    """Strict JSON: UTF-8, at most MAX_JSON_DEPTH deep, no NaN/Infinity, no repeated keys. Every
    failure is a StudioError naming the file (and the line and column where the parser knows it)."""
    hint = hint or "delete it and run `scellis conform` again"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StudioError(f"{what} is not UTF-8 (byte {e.start})", file=file, hint=hint) from None
    line, col = json_nesting(text)
    if line:
        raise StudioError(f"{what} nests arrays or objects more than {MAX_JSON_DEPTH} deep", file=file, line=line,
                          col=col, hint=hint)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise StudioError(f"{what} is not JSON: {e.msg}", file=file, line=e.lineno, col=e.colno, hint=hint) from None
    except (ValueError, RecursionError) as e:      # a repeated key, NaN, a 5,000-digit number
        raise StudioError(f"{what} is not valid: {e}", file=file, hint=hint) from None


def read_json_object(path: Path, what: str = "receipt") -> dict:
    """A JSON object from a receipt file, read bounded and never blocking (read_regular): a FIFO,
    a device, a file over MAX_RECEIPT_BYTES, deep nesting or anything but an object is a StudioError
    naming the file and why. Whether it is a receipt is receipt_problems'."""
    hint = "delete it and run `scellis conform` again"
    raw = read_regular(path, MAX_RECEIPT_BYTES, what=what, file=str(path), hint=hint)
    data = parse_json(raw, str(path), what=what, hint=hint)
    if not isinstance(data, dict):
        raise StudioError(f"{what} is a JSON {type(data).__name__}, not an object", file=str(path), hint=hint)
    return data


def read_receipt(path: Path) -> dict:
    """A conformance receipt from disk, checked for its schema: anything that is not one (a FIFO, a
    device, a huge or sparse file, deep nesting, a field of the wrong type) is a StudioError that
    names the file and says why, found without blocking or reading more than MAX_RECEIPT_BYTES."""
    receipt = read_json_object(path)
    problems = receipt_problems(receipt)
    if problems:
        raise StudioError(f"not a receipt: {problems[0]}", file=str(path), field=problems[0].split()[0],
                          hint="delete it and run `scellis conform` again")
    return receipt


_FIELDS = {"op": str, "hashes": dict, "corpus": dict, "tolerance": str, "category": str, "gpu_profile": dict,
           "engine_version": str, "wgpu_version": str, "cases": dict, "verdict": str, "created": str}
_PARTS = ("contract", "reference", "kernel", "package", "corpus")


def _show(v) -> str:
    """A value for a message: short, and safe whatever it is (no repr of a deep list or a huge int)."""
    if isinstance(v, str):
        return repr(v[:60] + ("..." if len(v) > 60 else ""))
    if v is None or isinstance(v, (bool, float)) or (isinstance(v, int) and abs(v) < 10**30):
        return repr(v)
    return f"a {type(v).__name__}"


def _is_int(v, lo: int = 0, hi: int | None = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo and (hi is None or v < hi)


def receipt_problems(r) -> list[str]:
    """What makes ``r`` no scellis-receipt/1 (docs/receipt.md), each naming the field; [] for one.
    Judged without the package: types, ranges and the receipt's agreement with itself."""
    if not isinstance(r, dict):
        return [f"receipt is a JSON {type(r).__name__}, not an object"]
    if r.get("schema") != SCHEMA:
        return [f"schema is {_show(r.get('schema'))}, not {SCHEMA!r}"]
    out = []
    for key, typ in _FIELDS.items():
        if not isinstance(r.get(key), typ):
            out.append(f"{key} is {'missing' if key not in r else type(r[key]).__name__}, not {typ.__name__}")
    out += [f"{_show(k)} is not a field of a receipt" for k in r
            if k not in _FIELDS and k not in ("schema", "seconds", "seal", "backward")]
    sl = r.get("seal")
    if sl is not None and not (isinstance(sl, dict) and set(sl) == {"alg", "key", "mac"}
                               and all(isinstance(v, str) and len(v) <= 128 for v in sl.values())):
        out.append("seal is not a seal (alg, key and mac, as strings)")
    b = r.get("backward")
    if b is not None and not (isinstance(b, dict) and set(b) == set(BACKWARD_FIELDS) and isinstance(b["tolerance"], str)
                              and all(_is_int(b[k]) for k in ("cases", "passed", "failed"))
                              and b["passed"] + b["failed"] == b["cases"] and b["verdict"] in ("pass", "fail")):
        out.append("backward is not a backward conformance summary (tolerance, cases, passed, failed, verdict)")
    seconds = r.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        out.append("seconds is not a non-negative number")
    if out:
        return out
    for part in _PARTS:
        v = r["hashes"].get(part)
        if not (isinstance(v, str) and _HEX64.fullmatch(v)):
            out.append(f"hashes.{part} is not a sha256 (64 hex digits)")
    out += [f"hashes.{_show(k)} is not a part of a package" for k in r["hashes"] if k not in _PARTS]
    c = r["corpus"]
    if not (isinstance(c.get("generator"), str) and _is_int(c.get("version"))):
        out.append("corpus.generator and corpus.version name no corpus generator")
    if not _is_int(c.get("seed"), 0, MAX_SEED):
        out.append("corpus.seed is not an integer in [0, 2**128)")
    if not isinstance(c.get("large"), bool):
        out.append("corpus.large is not true or false")
    if not isinstance(c.get("signature"), str):
        out.append("corpus.signature is not a string")
    if c.get("fold_size") is not None and not _is_int(c["fold_size"], 1, MAX_FOLD_SIZE + 1):
        out.append(f"corpus.fold_size is not an integer in [1, {MAX_FOLD_SIZE}]")
    if not _is_int(c.get("cases")):
        out.append("corpus.cases is not a count")
    prof = r["gpu_profile"]
    if not (isinstance(prof.get("id"), str) and _PROFILE_ID.fullmatch(prof["id"])):
        out.append("gpu_profile.id is not a GPU profile id (letters, digits, - and _)")
    if prof.get("wgpu_version") != r["wgpu_version"]:
        out.append("wgpu_version differs from gpu_profile.wgpu_version")
    n = r["cases"]
    out += [f"cases.{_show(k)} is not a count of a receipt" for k in n if k not in ("total", "passed", "failed")]
    if not all(_is_int(n.get(k)) for k in ("total", "passed", "failed")):
        out.append("cases.total, cases.passed and cases.failed are not counts")
    elif n["passed"] + n["failed"] != n["total"] or n["total"] != c.get("cases"):
        out.append("cases do not add up (passed + failed = total = corpus.cases)")
    if r["verdict"] not in ("pass", "fail"):
        out.append(f"verdict is {_show(r['verdict'])}, not 'pass' or 'fail'")
    elif r["verdict"] == "pass" and (not isinstance(n.get("failed"), int) or n["failed"] != 0 or not n.get("total")):
        out.append("verdict is 'pass' but not every case passed")
    return out


# ------------------------------------------------------------------ judging a receipt against the package
@dataclass
class Verification:
    status: str            # valid | failed | stale | foreign | forged | malformed
    problems: list[str]
    receipt: dict | None


def verify_receipt(pkg: OpPackage, receipt: dict, profile_id: str, seal: ReceiptSeal | None = None, *,
                   corpora: dict | None = None) -> Verification:
    """The seal first (only this machine's receipts count), then every field and every hash. A
    receipt from another GPU profile never counts as local conformance. Never raises: whatever
    ``receipt`` holds, the answer is a status and the reasons."""
    problems = receipt_problems(receipt)
    if problems:
        return Verification("malformed", problems, receipt if isinstance(receipt, dict) else None)
    sealed, why = _seal(seal).check(receipt)
    if sealed != "sealed":
        return Verification(sealed, [why], receipt)
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
        problems.append(f"made for op {_show(receipt['op'])}, this package is {pkg.id}")
    now, hashes = pkg.part_hashes(), receipt["hashes"]
    for part in ("contract", "reference", "kernel", "package"):
        if hashes[part] != now[part]:
            problems.append(f"{part} hash differs: the {part} changed since the receipt was issued")
    c = pkg.contract
    if receipt["tolerance"] != str(c.tolerance) or receipt["category"] != c.tolerance.category:
        problems.append(f"made under tolerance {_show(receipt['tolerance'])} ({_show(receipt['category'])}); the "
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
    if fold is not None and (c.kernel is None or fold > 65535 * c.kernel.workgroup_size + 257):   # corpus.fold_case_size
        return problems + [f"corpus.fold_size {fold} is past any launch fold of this kernel"]
    key = (c.signature.text, ident["seed"], ident["large"], fold)
    made = corpora.get(key) if corpora is not None else None
    if made is None:
        try:
            corpus = generate(c.signature, seed=ident["seed"], large=ident["large"],
                              **({"fold_size": fold} if fold is not None else {}))
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


def judge_receipts(pkg: OpPackage, profile_id: str, seal: ReceiptSeal | None = None, *,
                   corpora: dict | None = None) -> list[tuple[Path, Verification]]:
    """Every receipt file of the package, read and judged for ``profile_id``; one that cannot be
    read (a FIFO, a device, a huge file, not JSON) or is not a receipt is ``malformed`` with the
    reasons. Never raises, never blocks."""
    seal = _seal(seal)
    return [(path, verify_receipt(pkg, data, profile_id, seal, corpora=corpora) if data is not None
             else Verification("malformed", [why], None)) for path, data, why in _read_all(pkg)]


def _read_all(pkg: OpPackage) -> list[tuple[Path, dict | None, str]]:
    d = receipt_dir(pkg)
    try:
        paths = sorted(d.glob("*.json")) if d.is_dir() else []
    except OSError:
        paths = []
    out = []
    for p in paths:
        try:
            out.append((p, read_json_object(p), ""))
        except StudioError as e:
            out.append((p, None, e.message + (f" (line {e.line}, column {e.col})" if e.line else "")))
    return out


def receipts(pkg: OpPackage) -> list[tuple[Path, dict | None]]:
    """Every receipt file of the package: its JSON object, or None where it cannot be read as one
    (judge_receipts says why, and verify_receipt whether an object is a receipt)."""
    return [(p, r) for p, r, _ in _read_all(pkg)]


def local_status(pkg: OpPackage, profile_id: str, seal: ReceiptSeal | None = None) -> str:
    """``valid`` when a receipt for this GPU profile verifies; otherwise why not."""
    found = judge_receipts(pkg, profile_id, seal)
    if not found:
        return "none"
    statuses = [v.status for _, v in found]
    for s in ("valid", "failed", "stale", "forged", "foreign"):
        if s in statuses:
            return s
    return "malformed"


# ------------------------------------------------------------------ gradcheck receipts: what training trusts
def gradcheck_receipt_path(pkg: OpPackage, root: str | Path | None = None) -> Path:
    """receipts/gradcheck/<package hash>.json (beside the conformance receipts, not among them)."""
    return (Path(root) if root else pkg.root / "receipts" / "gradcheck") / f"{pkg.hash}.json"


def write_gradcheck_receipt(pkg: OpPackage, rep, root: str | Path | None = None, *,
                            seal: ReceiptSeal | None = None) -> Path:
    """``rep``: a GradcheckReport (studio/engine/proof/gradcheck.py)."""
    body = {k: v for k, v in rep.to_json().items() if k not in ("probes", "lines")}
    body.update(schema=GRADCHECK_SCHEMA, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    path = gradcheck_receipt_path(pkg, root)
    write_text(path, json.dumps(_seal(seal).seal(body), indent=2, sort_keys=True) + "\n")
    return path


def gradcheck_status(pkg: OpPackage, root: str | Path | None = None, *,
                     seal: ReceiptSeal | None = None) -> tuple[str, str]:
    """(pass | fail | inconclusive | none | malformed, a sentence) for the package's content now.
    Read like a conformance receipt: bounded, never blocking, never raising."""
    path = gradcheck_receipt_path(pkg, root)
    if not path.exists() and not path.is_symlink():
        return "none", f"no gradcheck receipt for this content ({path.name})"
    try:
        r = parse_json(read_regular(path, MAX_RECEIPT_BYTES, what="gradcheck receipt"), str(path),
                       what="gradcheck receipt")
    except StudioError as e:
        return "malformed", f"{path} is not a gradcheck receipt: {e.message}"
    if not (isinstance(r, dict) and r.get("schema") == GRADCHECK_SCHEMA and r.get("hash") == pkg.hash
            and r.get("verdict") in GRADCHECK_VERDICTS):
        return "malformed", f"{path} is not a gradcheck receipt for this content"
    sealed, why = _seal(seal).check(r)
    if sealed != "sealed":
        return sealed, f"{path.name}: {why}; it never counts here (run `scellis gradcheck {pkg.root}`)"
    if r.get("tolerance_source") == "override":
        return "inconclusive", "the receipt was made with a tolerance given on the command line"
    return r["verdict"], f"gradcheck {r['verdict']} ({r.get('created', '?')}): {r.get('why') or 'all probes agree'}"
