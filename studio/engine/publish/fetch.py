"""Into and out of a ring: the index entry a publish writes (``make_entry``) and the fetch that
verifies everything before a package lands here (docs/publishing.md):

- the index: well formed, every entry under its own hash, no two ids claiming one hash;
- every file: its sha256 against the index, no file missing and none extra, and the content hash
  of the whole against the entry (a single flipped byte is refused, naming the file);
- the package: it loads, and its id, version, license, visibility, summary, tolerance and category
  are what the index says; the license is present and valid; the visibility is shared;
- the corpus: regenerated from the recorded identity, its hash compared;
- receipts: their bytes against the index, then kept in receipts/ring/ as the publisher's
  record: foreign here, never counted.

Nothing of the package runs here: its reference stays untrusted until the user trusts its exact
content (``scellis trust``), and it counts as conformant only once conformance (and gradcheck
for a declared VJP) ran on this machine (services/publishing.py: ``verify_here``)."""
from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..atomic import write_many
from ..contract.contract import OpId
from ..contract.package import (
    EXCLUDED_DIRS,
    MANIFEST,
    MAX_FILE_BYTES,
    MAX_FILES,
    OpPackage,
    content_hash,
    load_package,
    read_regular,
    sha256,
    write_package,
)
from ..errors import StudioError
from ..proof import receipts as receipt_store
from ..proof.corpus import fold_case_size, generate, regenerate
from .card import RING_RECEIPTS
from .entry_limits import check_corpus_bytes, check_identity
from .license import Licenses, require_license
from .metadata import part_digests, read_fields
from .ring import Ring, now

CHECKED = ("id", "version", "license", "visibility", "summary", "tolerance", "category")


@dataclass
class Fetched:
    pkg: OpPackage
    entry: dict
    status: str                       # fetched | already here
    lines: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ publishing: what the index records
def make_entry(pkg: OpPackage, *, profile_id: str | None, seal) -> tuple[dict, dict[str, bytes]]:
    """The index entry for ``pkg`` and the receipt files that travel with it."""
    c, fields = pkg.contract, read_fields(pkg)
    sent: dict[str, bytes] = {}
    corpus = None
    for path, v in receipt_store.judge_receipts(pkg, profile_id or "", seal):
        if v.status in ("valid", "foreign") and seal.check(v.receipt).ok:
            sent[path.name] = path.read_bytes()
            corpus = corpus or {**v.receipt["corpus"], "hash": v.receipt["hashes"]["corpus"]}
    g = receipt_store.gradcheck_receipt_path(pkg, seal=seal)
    if c.backward.kind == "vjp" and receipt_store.gradcheck_status(pkg, seal=seal)[0] == "pass":
        sent[f"gradcheck/{pkg.hash}.json"] = g.read_bytes()
    if corpus is None:
        wg = c.kernel.workgroup_size if c.kernel is not None else 64
        made = generate(c.signature, seed=0, large=False, fold_size=fold_case_size(wg))
        corpus = {**made.identity, "cases": len(made.cases), "hash": made.hash}
    entry = {"id": pkg.id, "version": fields.version, "hash": pkg.hash, "license": c.license,
             "visibility": c.visibility, "summary": c.summary, "description": fields.description,
             "authors": list(c.authors), "tolerance": str(c.tolerance), "category": c.tolerance.category,
             "backward": c.backward.kind, "subgradient": c.subgradient,
             "forked_from": ({"id": fields.forked_from.id, "hash": fields.forked_from.hash}
                             if fields.forked_from else None),
             "files": part_digests(pkg), "receipts": {rel: sha256(b) for rel, b in sorted(sent.items())},
             "corpus": corpus, "published": now()}
    return entry, sent


# ------------------------------------------------------------------ the index, judged
def check_index(index: dict, where: str) -> None:
    """Every entry under its own hash, and no two ids claiming one content hash."""
    problems, claims = [], {}
    for key, e in index.items():
        if not isinstance(e, dict) or not isinstance(e.get("id"), str) or not isinstance(e.get("files"), dict):
            problems.append(f"entry {key[:16]} is not an index entry")
            continue
        if not (len(key) == 64 and all(ch in "0123456789abcdef" for ch in key)):
            problems.append(f"the entry of {e['id']} is stored under {key[:70]!r}, which is not a content hash")
            continue
        if e.get("hash") != key:
            problems.append(f"the entry stored under {key[:16]} says its hash is {str(e.get('hash'))[:16]}")
        claims.setdefault(e.get("hash"), set()).add(e["id"])
    for h, ids in claims.items():
        if len(ids) > 1:
            problems.append(f"hash collision between ids: {', '.join(sorted(ids))} all claim content hash {str(h)[:16]}")
    if problems:
        raise StudioError("the ring's index is inconsistent:\n" + "\n".join(f"  - {p}" for p in problems),
                          file=where, field="index", hint="nothing was fetched; tell the ring's owner")


def select(index: dict, ref: str) -> dict:
    """``ID`` or ``ID@HASH`` (a prefix of at least 8 hex digits)."""
    op, hash_ = _split(ref)
    OpId.parse(op, field="ID")
    hits = [e for e in index.values() if isinstance(e, dict) and e.get("id") == op
            and (not hash_ or str(e.get("hash", "")).startswith(hash_))]
    if not hits:
        near = sorted({e.get("id") for e in index.values() if isinstance(e, dict)})
        raise StudioError(f"the ring holds no {ref}", field="ID",
                          hint=("it holds: " + ", ".join(near[:10])) if near else "the ring is empty")
    if len(hits) > 1:
        raise StudioError(f"the ring holds {len(hits)} contents of {op}: "
                          + ", ".join(f"{e['hash'][:16]} ({e.get('published', '?')})" for e in hits),
                          field="ID", hint=f"name one: scellis ring fetch {op}@HASH")
    return hits[0]


def _split(ref: str) -> tuple[str, str]:
    """``ns/a/name@1@abcd1234`` → (``ns/a/name@1``, ``abcd1234``)."""
    head, sep, tail = ref.rpartition("@")
    if sep and "@" in head:
        if not (len(tail) >= 8 and all(ch in "0123456789abcdef" for ch in tail)):
            raise StudioError(f"{ref}: after ID@, give at least 8 hex digits of the content hash", field="ID")
        return head, tail
    return ref, ""


# ------------------------------------------------------------------ fetching
def _listed(base: Path) -> list[str]:
    out = []
    if not base.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode) or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                raise StudioError(f"{p} is not a regular file or folder (a link?)", file=str(p),
                                  hint="a ring holds regular files only: the ring is damaged")
        out += [(Path(dirpath) / n).relative_to(base).as_posix() for n in filenames]
    return sorted(out)


def _safe(rel: str, *, content: bool) -> bool:
    """A relative path inside the package, of a file the content hash covers (``content``)."""
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or "\\" in rel or "\0" in rel or any(part in ("", ".", "..") for part in p.parts):
        return False
    return not content or (p.parts[0] not in EXCLUDED_DIRS and not any(part.startswith(".") for part in p.parts)
                           and not rel.endswith((".pyc", "~")))


def _read_against(base: Path, digests: dict, what: str, problems: list[str]) -> dict[str, bytes]:
    content = what == "file"
    if not isinstance(digests, dict) or len(digests) > MAX_FILES or not all(_safe(r, content=content) for r in digests) \
            or (content and MANIFEST not in digests):
        problems.append(f"the index lists {what}s that cannot be a package's (no op.toml, unsafe paths or too many)")
        return {}
    present = _listed(base)
    for rel in sorted(set(present) - set(digests)):
        problems.append(f"{what} {rel}: in the ring but not in the index")
    out = {}
    for rel, want in sorted(digests.items()):
        if rel not in present:
            problems.append(f"{what} {rel}: in the index but missing from the ring")
            continue
        data = read_regular(base / rel, MAX_FILE_BYTES, what=f"{what} {rel}")
        got = sha256(data)
        if got != want:
            problems.append(f"{what} {rel}: the index says sha256 {str(want)[:16]}…, the ring holds {got[:16]}…")
        out[rel] = data
    return out


def fetch(ring: Ring, ref: str, dest: Path, *, licenses: Licenses) -> Fetched:
    """Verify ``ref`` in ``ring`` and place it at ``dest`` (untrusted, unverified here)."""
    ring.sync()
    index = ring.index()
    check_index(index, f"{ring.where()}: index.json")
    entry = select(index, ref)
    check_identity(entry)                   # its corpus's sizes, before anything is read or allocated
    h, problems = entry["hash"], []
    base = ring.package_dir(h)
    files = _read_against(base / "op", entry["files"], "file", problems)
    recs = _read_against(base / "receipts", entry.get("receipts") or {}, "receipt", problems)
    if files and not problems and content_hash(files) != h:
        problems.append(f"content hash: the index says {h[:16]}…, the files hash to {content_hash(files)[:16]}…")
    if problems:
        raise StudioError(f"{entry['id']} ({h[:16]}) in ring {ring.name} does not match its index, so it was refused:\n"
                          + "\n".join(f"  - {p}" for p in problems), file=str(base), field="hash",
                          hint="nothing was written here; the ring was tampered with or damaged: tell its owner")
    dest = Path(dest)
    if dest.exists():
        try:
            here = load_package(dest)
        except StudioError:
            here = None
        if here is None or here.hash != h:
            raise StudioError(f"{dest} already holds another package", file=str(dest), field="--to",
                              hint="fetch it elsewhere (--to DIR), or remove that folder first")
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = dest.parent / f".fetch-{h[:16]}"
    shutil.rmtree(stage, ignore_errors=True)
    try:
        write_package(stage, files)
        pkg = load_package(stage)
        _compare(pkg, entry, licenses)
        _corpus(pkg, entry)
        if recs:
            write_many({stage / "receipts" / RING_RECEIPTS / rel: data for rel, data in recs.items()})
        status = "already here" if dest.exists() else "fetched"
        if dest.exists():
            shutil.rmtree(dest / "receipts" / RING_RECEIPTS, ignore_errors=True)
            if recs:
                write_many({dest / "receipts" / RING_RECEIPTS / rel: data for rel, data in recs.items()})
        else:
            os.replace(stage, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    pkg = load_package(dest)
    return Fetched(pkg, entry, status, [f"{status}: {pkg.id} ({h[:16]}) from ring {ring.name} → {dest}",
                                        f"  every file matches the index ({len(files)} files), license {pkg.contract.license}",
                                        f"  receipts from the ring: {len(recs)}, kept as foreign (they never count here)"])


def _compare(pkg: OpPackage, entry: dict, licenses: Licenses) -> None:
    c = pkg.contract
    now_ = {"id": pkg.id, "version": c.id.version, "license": c.license, "visibility": c.visibility,
            "summary": c.summary, "tolerance": str(c.tolerance), "category": c.tolerance.category}
    diffs = [f"{k}: the index says {entry.get(k)!r}, the package says {now_[k]!r}" for k in CHECKED
             if entry.get(k) != now_[k]]
    if diffs:
        raise StudioError(f"the ring's index entry for {entry.get('id')} does not match the package:\n"
                          + "\n".join(f"  - {d}" for d in diffs), field="index", file=pkg.manifest_path,
                          hint="nothing was written here; the index was edited or damaged: tell the ring's owner")
    require_license(licenses, c.license, file=pkg.manifest_path, why="to be shared through a ring")
    if c.visibility == "private":
        raise StudioError(f"{pkg.id} is private: it should never have been in a ring", file=pkg.manifest_path,
                          field="visibility", hint="nothing was written here")


def _corpus(pkg: OpPackage, entry: dict) -> None:
    ident = entry.get("corpus")
    if not isinstance(ident, dict):
        raise StudioError(f"the ring's entry for {pkg.id} records no corpus identity", field="corpus",
                          hint="nothing was written here; the publisher's ring entry is incomplete")
    want = {k: v for k, v in ident.items() if k != "hash"}
    check_corpus_bytes(pkg.id, pkg.contract.signature, want)      # before a byte of it is generated
    try:
        corpus = regenerate(pkg.contract.signature, want)
    except (StudioError, KeyError, TypeError, ValueError, OverflowError) as e:
        raise StudioError(f"the corpus identity cannot be regenerated: {getattr(e, 'message', e)}",
                          field="corpus") from None
    if corpus.hash != ident.get("hash") or {**corpus.identity, "cases": len(corpus.cases)} != want:
        raise StudioError(f"the corpus recorded for {pkg.id} does not regenerate here: the index says "
                          f"{str(ident.get('hash'))[:16]}, this engine makes {corpus.hash[:16]}", field="corpus",
                          hint="nothing was written here; the publisher's engine generates another corpus")
