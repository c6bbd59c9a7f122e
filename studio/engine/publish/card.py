"""The op's card, as data, as text (``scellis card``) and as HTML (the Studio's card view). It
carries the op's origin without apology: source ``user`` or ``builtin`` (catalog.origin, by
folder), trust ``unverified`` until earned here, the tolerance badge, every receipt with its GPU
profile (this machine's distinguished from foreign ones), the content hash, license, visibility
and the lineage chain.

Trust is earned, never imported (docs/publishing.md): an op is ``verified`` on this machine when
it holds a valid conformance receipt sealed here for its exact content on this GPU profile and,
for a declared VJP, a passing gradcheck receipt sealed here. Receipts that came with the package
(from a ring, another user or machine) are shown as foreign and never count."""
from __future__ import annotations

import html

from ..contract.catalog import origin
from ..contract.package import OpPackage
from ..errors import StudioError
from ..proof import coverage, receipts
from .bar import ProofState, proof_state
from .license import Licenses
from .metadata import read_fields

RING_RECEIPTS = "ring"          # receipts/ring/: what a ring held, kept as the publisher's record
MAX_LINEAGE = 32


def make_card(pkg: OpPackage, *, profile_id: str, seal, trust, catalog, licenses: Licenses) -> dict:
    c = pkg.contract
    fields = read_fields(pkg)
    proof = proof_state(pkg, profile_id, seal)
    code = trust.status(pkg)
    lic = licenses.check(c.license) if c.license else None
    return {
        "id": pkg.id, "summary": c.summary, "description": fields.description, "version": fields.version,
        "authors": list(c.authors), "source": origin(pkg), "path": str(pkg.root),
        "trust": _trust(proof, code), "code": {"level": code.level, "reason": code.reason},
        "tolerance": {"class": str(c.tolerance), "category": c.tolerance.category,
                      "justification": c.tolerance.justification},
        "badge": str(c.tolerance), "signature": c.signature.text, "backward": c.backward.kind,
        "subgradient": c.subgradient, "hash": pkg.hash, "license": c.license,
        "license_status": lic.summary() if lic else "none", "visibility": c.visibility,
        "examples": len(fields.examples), "receipts": _receipts(pkg, profile_id, seal, proof),
        "lineage": lineage(pkg, catalog), "profile": profile_id,
    }


def _trust(proof: ProofState, code) -> dict:
    if proof.earned:
        why = "a valid conformance receipt made here" + (", and a passing gradcheck made here"
                                                         if proof.gradcheck is not None else "")
        return {"level": "verified", "why": why + " (this machine, this GPU profile, this content)"}
    missing = []
    if proof.conformance != "valid":
        missing.append(f"conformance here: {proof.conformance}")
    if proof.gradcheck not in (None, "pass"):
        missing.append(f"gradcheck here: {proof.gradcheck}")
    if not code.ok:
        missing.append("its reference is untrusted here, so nothing of it can be re-run until `scellis trust`")
    return {"level": "unverified", "why": "; ".join(missing)}


def _receipts(pkg: OpPackage, profile_id: str, seal, proof: ProofState) -> list[dict]:
    out = []
    for path, v in receipts.judge_receipts(pkg, profile_id, seal):
        r = v.receipt or {}
        sealed = seal.check(r).ok if r else False
        out.append({"kind": "conformance", "file": path.name, "origin": "local" if sealed else "foreign",
                    "status": v.status, "profile": _profile(r), "counts": sealed and v.status == "valid",
                    "coverage": coverage.describe(r) if r else []})
    if proof.gradcheck is not None:
        gpath = receipts.gradcheck_receipt_path(pkg, seal=seal)
        if gpath.exists():
            local = proof.gradcheck in ("pass", "fail", "inconclusive")
            out.append({"kind": "gradcheck", "file": gpath.name, "origin": "local" if local else "foreign",
                        "status": proof.gradcheck, "profile": "reference path (f64): no GPU profile",
                        "counts": proof.gradcheck == "pass"})
    ring = receipts.ring_receipts_dir(pkg)
    for path in sorted(ring.rglob("*.json")) if ring.is_dir() else []:
        try:
            r = receipts.read_foreign(path)
        except StudioError:
            r = {}
        kind = "gradcheck" if r.get("schema") == receipts.GRADCHECK_SCHEMA else "conformance"
        out.append({"kind": kind, "file": f"{RING_RECEIPTS}/{path.relative_to(ring).as_posix()}",
                    "origin": "foreign", "status": f"from the ring: {r.get('verdict', '?')}",
                    "profile": _profile(r) if kind == "conformance" else "reference path (f64)", "counts": False})
    return out


def _profile(r: dict) -> str:
    prof = r.get("gpu_profile") if isinstance(r, dict) else None
    if not isinstance(prof, dict):
        return "?"
    adapter = prof.get("adapter") if isinstance(prof.get("adapter"), dict) else {}
    name = adapter.get("device") or adapter.get("description") or "?"
    return f"{prof.get('id', '?')} ({name}, {prof.get('backend', '?')})"


def lineage(pkg: OpPackage, catalog) -> list[dict]:
    """The chain of forked_from, nearest first; each link says whether that content is here."""
    chain, seen, cur = [], {pkg.hash}, pkg
    while len(chain) < MAX_LINEAGE:
        try:
            parent = read_fields(cur).forked_from
        except StudioError:
            break
        if parent is None:
            break
        link = {"id": parent.id, "hash": parent.hash, "here": False, "path": None}
        chain.append(link)
        if parent.hash in seen:
            link["note"] = "a cycle: this content was already in the chain"
            break
        seen.add(parent.hash)
        try:
            found = catalog.resolve(parent.id)
        except StudioError:
            found = None
        if found is None or found.hash != parent.hash:
            link["note"] = "not in this catalog" if found is None else f"the catalog holds other content ({found.hash[:12]})"
            break
        link.update(here=True, path=str(found.root))
        cur = found
    return chain


# ------------------------------------------------------------------ rendering
def card_text(card: dict) -> str:
    t = card["trust"]
    lines = [f"{card['id']}   [{card['badge']}]",
             f"  {card['summary']}",
             f"  source     : {card['source']}",
             f"  trust      : {t['level']} ({t['why']})",
             f"  reference  : {card['code']['level']} ({card['code']['reason']})",
             f"  tolerance  : {card['tolerance']['class']} ({card['tolerance']['category']}): "
             f"{card['tolerance']['justification'] or '-'}",
             f"  signature  : {card['signature']}",
             f"  backward   : {card['backward']}" + (f"; subgradient: {card['subgradient']}" if card["subgradient"] else ""),
             f"  license    : {card['license'] or '(none)'}" + ("" if card["license_status"] == "valid SPDX expression"
                                                                else f"  ({card['license_status']})"),
             f"  visibility : {card['visibility']}",
             f"  version    : {card['version']}   authors: {', '.join(card['authors']) or '-'}",
             f"  hash       : {card['hash']}"]
    if card["description"]:
        lines.append("  description:")
        lines += [f"    {ln}" for ln in card["description"].splitlines()]
    lines.append("  receipts   :" + ("" if card["receipts"] else " none"))
    for r in card["receipts"]:
        lines.append(f"    {r['origin']:8s} {r['kind']:12s} {r['status']:14s} {r['profile']}"
                     + ("" if r["counts"] else "   (does not count here)"))
        lines += [f"      {c}" for c in r.get("coverage") or []]
    lines.append("  lineage    :" + ("" if card["lineage"] else " none (an original)"))
    for k, link in enumerate(card["lineage"]):
        where = link["path"] if link["here"] else link.get("note", "not here")
        lines.append(f"    {'  ' * k}forked from {link['id']} ({link['hash'][:16]}): {where}")
    return "\n".join(lines)


_CSS = ("body{font-family:sans-serif}.badge{border-radius:4px;padding:1px 6px;background:#2d6a4f;color:#fff}"
        ".unverified{color:#9d0208}.verified{color:#2d6a4f}.foreign{color:#6c757d}td{padding:1px 8px}")


def card_html(card: dict) -> str:
    e = html.escape
    t = card["trust"]
    rows = [("source", e(card["source"])),
            ("trust", f"<span class='{e(t['level'])}'>{e(t['level'])}</span> — {e(t['why'])}"),
            ("reference", f"{e(card['code']['level'])} — {e(card['code']['reason'])}"),
            ("tolerance", f"{e(card['tolerance']['class'])} ({e(card['tolerance']['category'])}): "
                          f"{e(card['tolerance']['justification'] or '-')}"),
            ("signature", f"<code>{e(card['signature'])}</code>"),
            ("backward", e(card["backward"]) + (f"; subgradient: {e(card['subgradient'])}" if card["subgradient"] else "")),
            ("license", e(card["license"] or "(none)") + ("" if card["license_status"] == "valid SPDX expression"
                                                           else f" <i>({e(card['license_status'])})</i>")),
            ("visibility", e(card["visibility"])), ("version", str(card["version"])),
            ("authors", e(", ".join(card["authors"]) or "-")), ("content hash", f"<code>{e(card['hash'])}</code>")]
    table = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
    recs = "".join(f"<li class='{'local' if r['counts'] else 'foreign'}'>{e(r['origin'])} {e(r['kind'])}: "
                   f"{e(r['status'])} — {e(r['profile'])}{'' if r['counts'] else ' (does not count here)'}</li>"
                   for r in card["receipts"]) or "<li>none</li>"
    chain = "".join(f"<li>forked from <code>{e(x['id'])}</code> ({e(x['hash'][:16])}): "
                    f"{e(x['path'] if x['here'] else x.get('note', 'not here'))}</li>" for x in card["lineage"]) \
        or "<li>none (an original)</li>"
    desc = "".join(f"<p>{e(p)}</p>" for p in card["description"].split("\n\n") if p.strip())
    return (f"<html><head><style>{_CSS}</style></head><body><h2>{e(card['id'])} "
            f"<span class='badge'>{e(card['badge'])}</span></h2><p>{e(card['summary'])}</p>{desc}"
            f"<table>{table}</table><h3>Receipts</h3><ul>{recs}</ul><h3>Lineage</h3><ul>{chain}</ul></body></html>")

