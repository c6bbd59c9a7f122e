"""The publishing use cases (docs/publishing.md): publish (visibility, license, the public bar),
the card, fork, and the exchange ring (add, list, publish to, fetch, re-verify here). The device
worker runs the ones that need the GPU profile or re-run proofs (services/requests.py: publish, card,
verify_here); the front ends call the others directly. Each rule is written once, here or in
studio/engine/publish/:

- nothing leaves ``private`` without a valid SPDX license; ``public`` asks the public bar;
- publishing rewrites op.toml, so the content hash changes: the proofs the old content had are
  earned again for the new content (conformance, and gradcheck for a declared VJP, here), and a
  failure puts the old op.toml back;
- a fetched package is untrusted and unverified until the user trusts it and it is re-run here."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec

from ..context import Context
from ..contract.contract import build_contract
from ..contract.manifest import read_manifest
from ..contract.package import MANIFEST, OpPackage, content_hash, load_package, write_package
from ..contract.toml_edit import set_values
from ..errors import StudioError
from ..proof.checker import check_license
from ..proof.conformance import conform as run_conformance
from ..proof.conformance import report_lines
from ..proof.gradcheck import gradcheck as run_gradcheck
from ..publish import bar
from ..publish.card import card_html, card_text, make_card
from ..publish.fetch import fetch as fetch_from_ring
from ..publish.fetch import make_entry
from ..publish.fork import default_fork_dir
from ..publish.fork import fork as fork_package
from ..publish.license import Licenses, require_license
from ..publish.ring import Rings
from ..publish.visibility import RANK, check_visibility, require_shareable
from .actions import earn_conformance_receipt, earn_gradcheck_receipt


# ------------------------------------------------------------------ the worker's reports
class PublishReport(msgspec.Struct, kw_only=True):
    """The worker's ``publish`` request: the op, its folder and (new) content hash, what it is now,
    and ``lines``, what was done (the CLI prints them; the Studio's dialog shows them)."""
    op: str
    path: str
    hash: str
    visibility: str
    license: str | None
    lines: list[str]
    reproved: bool


class CardReport(msgspec.Struct, kw_only=True):
    """The worker's ``card`` request: the card's ``facts`` (publish/card.py's make_card: what
    `scellis card --json` prints), and the card as ``text`` and as ``html``."""
    facts: dict
    text: str
    html: str

    def show(self, *, as_html: bool = False) -> str:
        return self.html if as_html else self.text

    def trust_line(self) -> str:
        t = self.facts["trust"]
        return f"trust: {t['level']} ({t['why']})"


class VerifyHereReport(msgspec.Struct, kw_only=True):
    """The worker's ``verify_here`` request: the proofs re-run here (``lines``), and the card after them."""
    op: str
    lines: list[str]
    card: CardReport

    def text_lines(self) -> list[str]:
        """What the CLI prints and the Ring panel shows: the proofs, then the trust they earned."""
        return [*self.lines, "  " + self.card.trust_line()]


# ------------------------------------------------------------------ judging
def prospective(pkg: OpPackage, manifest: bytes) -> OpPackage:
    """``pkg`` as it would be with ``manifest`` as its op.toml (nothing written)."""
    contract = build_contract(read_manifest(manifest, pkg.manifest_path))
    files = {**pkg.files, MANIFEST: manifest}
    return dataclasses.replace(pkg, contract=contract, files=files, hash=content_hash(files))


def prospective_edit(pkg: OpPackage, updates: dict) -> OpPackage:
    """``pkg`` as it would be with ``updates`` (op.toml fields, the one editor's) (nothing written)."""
    text = set_values(pkg.files[MANIFEST].decode("utf-8"), updates, file=pkg.manifest_path)
    return prospective(pkg, text.encode("utf-8"))


def public_bar(ctx: Context, pkg: OpPackage, *, profile_id: str, licenses: Licenses | None = None) -> list:
    """Every field the public bar finds missing or failing (empty: it clears it)."""
    return bar.shortfalls(pkg, bar.proof_state(pkg, profile_id, ctx.seal), licenses or Licenses())


def card(ctx: Context, pkg: OpPackage, *, profile_id: str | None = None, licenses: Licenses | None = None) -> dict:
    """The op's card, its receipts judged for ``profile_id`` (default: this device's GPU profile)."""
    c = make_card(pkg, profile_id=profile_id or ctx.device.profile.id, seal=ctx.seal, trust=ctx.trust, catalog=ctx.catalog,
                  licenses=licenses or Licenses())
    return {**c, "text": card_text(c), "html": card_html(c)}


def card_report(ctx: Context, pkg: OpPackage) -> CardReport:
    """The worker's ``card`` request: ``card`` for this device's GPU profile, as its report."""
    c = card(ctx, pkg)
    return CardReport(facts={k: v for k, v in c.items() if k not in ("text", "html")}, text=c["text"], html=c["html"])


def spdx_list() -> Licenses:
    """The SPDX license list (license-expression's): a front end that checks as the user types loads
    it once and passes it to ``license_report`` and ``bar_for_edit``."""
    return Licenses()


def license_report(text: str, licenses: Licenses | None = None):
    """An SPDX expression as typed: ``ok``, and ``summary()`` (what is wrong, at which column)."""
    return (licenses or Licenses()).check(text)


def license_problems(expr: str, *, file: str = MANIFEST) -> list[StudioError]:
    """The checker's verdict on a license expression (the one a package is checked with)."""
    return check_license(expr, file=file)


def bar_for_edit(ctx: Context, pkg: OpPackage, updates: dict, *, profile_id: str,
                 licenses: Licenses | None = None) -> list:
    """The public bar on ``pkg`` as it would be with ``updates`` to its op.toml (nothing written): the
    metadata of the edited content; the proofs of the content as it is (publishing proves again)."""
    try:
        after = prospective_edit(pkg, updates)
    except StudioError as e:
        return [bar.Shortfall(MANIFEST, e.message)]
    return (bar.metadata_shortfalls(after, licenses or Licenses())
            + bar.proof_shortfalls(pkg, bar.proof_state(pkg, profile_id, ctx.seal)))


# ------------------------------------------------------------------ publish
def publish(ctx: Context, pkg: OpPackage, *, visibility: str, license: str | None = None,
            profile_id: str | None = None, progress=None) -> PublishReport:
    lic = Licenses()
    check_visibility(visibility)
    profile_id = profile_id or ctx.device.profile.id
    new_license = license if license is not None else pkg.contract.license
    require_shareable(lic, visibility, new_license, file=pkg.manifest_path)
    if license is not None:
        require_license(lic, license, file=pkg.manifest_path, why="to be attached")
    updates = {"visibility": visibility}
    if license is not None:
        updates["license"] = license
    old = pkg.files[MANIFEST]
    text = set_values(old.decode("utf-8"), updates, file=pkg.manifest_path)
    new = text.encode("utf-8")
    after = prospective(pkg, new)
    before_proof = bar.proof_state(pkg, profile_id, ctx.seal)
    if visibility == "public":
        bar.require_public(after, bar.metadata_shortfalls(after, lic) + bar.proof_shortfalls(pkg, before_proof))
    lines = [f"{pkg.id}: {pkg.contract.visibility} → {visibility}, license {new_license}"]
    if RANK[visibility] < RANK[pkg.contract.visibility]:
        lines.append("  note: copies already shared (in a ring, with colleagues) stay where they are")
    if new == old:
        lines.append("  op.toml already says so: nothing to write")
        return PublishReport(op=pkg.id, path=str(pkg.root), hash=pkg.hash, visibility=visibility,
                             license=new_license, lines=lines, reproved=False)
    trusted = ctx.trust.status(pkg).ok
    new_hash = write_package(pkg.root, {MANIFEST: new})
    if trusted:                     # same code, new op.toml: the trust the old content had carries over
        ctx.trust.record_authored(new_hash, op=pkg.id, path=Path(pkg.root).resolve())
    written = load_package(pkg.root)
    lines.append(f"  wrote op.toml: content hash {pkg.hash[:16]} → {new_hash[:16]}")
    reproved = False
    if before_proof.earned or before_proof.conformance == "valid":
        try:
            lines += reprove(ctx, written, progress=progress)
            reproved = True
        except StudioError:
            write_package(pkg.root, {MANIFEST: old})          # the old content, and its receipts, again
            raise
    elif visibility != "public":
        lines.append("  no valid receipt here yet: run `scellis conform` before the op can count as verified")
    return PublishReport(op=pkg.id, path=str(pkg.root), hash=new_hash, visibility=visibility,
                         license=new_license, lines=lines, reproved=reproved)


def reprove(ctx: Context, pkg: OpPackage, *, progress=None) -> list[str]:
    """Conformance and (for a declared VJP) gradcheck here; a pass earns the receipts, a failure raises."""
    ctx.trust.require_trusted(pkg)
    rep = run_conformance(ctx, pkg, progress=progress)
    if not rep.ok:
        raise StudioError(f"{pkg.id} fails conformance on this GPU profile:\n" + "\n".join(report_lines(rep)),
                          file=pkg.manifest_path, hint=f"reproduce with `scellis conform {pkg.root}`")
    path = earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal)
    lines = [f"  conformance here: {rep.passed}/{rep.total} cases pass; receipt {path}"]
    if pkg.contract.backward.kind == "vjp":
        g = run_gradcheck(ctx, pkg)
        gpath = earn_gradcheck_receipt(pkg, g, seal=ctx.seal)
        if g.verdict != "pass":
            raise StudioError(f"{pkg.id}: gradcheck gives {g.verdict.upper()} here: {g.why}", file=pkg.manifest_path,
                              field="backward.text", hint=f"see `scellis gradcheck {pkg.root}`")
        lines.append(f"  gradcheck here: pass; receipt {gpath}")
    return lines


def verify_here(ctx: Context, pkg: OpPackage, *, progress=None) -> VerifyHereReport:
    """Re-run the proofs on this machine (a fetched op counts as conformant only after this)."""
    lines = reprove(ctx, pkg, progress=progress)
    return VerifyHereReport(op=pkg.id, lines=lines, card=card_report(ctx, load_package(pkg.root)))


# ------------------------------------------------------------------ fork
def fork(ctx: Context, pkg: OpPackage, new_id: str, *, to: str | Path | None = None,
         visibility: str = "private") -> OpPackage:
    dest = Path(to) if to is not None else default_fork_dir(ctx.trust.home, new_id)
    return fork_package(pkg, new_id, dest, trust=ctx.trust, licenses=Licenses(), visibility=visibility)


# ------------------------------------------------------------------ the ring
def rings(ctx: Context) -> Rings:
    return Rings(ctx.trust.home)


def ring_add(ctx: Context, name: str, url: str) -> dict:
    return rings(ctx).add(name, url)


def publish_to_ring(ctx: Context, pkg: OpPackage, ring_name: str) -> dict:
    if pkg.contract.visibility == "private":
        raise StudioError(f"{pkg.id} is private: a ring holds only workspace or public packages",
                          file=pkg.manifest_path, field="visibility",
                          hint=f"scellis publish {pkg.root} --visibility workspace --ring {ring_name}")
    require_shareable(Licenses(), pkg.contract.visibility, pkg.contract.license, file=pkg.manifest_path)
    ring = rings(ctx).open(ring_name)
    entry, sent = make_entry(pkg, profile_id=None, seal=ctx.seal)
    status = ring.publish(entry, dict(pkg.files), sent)
    return {"ring": ring_name, "where": ring.where(), "status": status, "hash": pkg.hash,
            "lines": [f"  ring {ring_name} ({ring.where()}): {status} {pkg.id} ({pkg.hash[:16]}), "
                      f"{len(entry['files'])} files, {len(sent)} receipts, corpus {entry['corpus']['hash'][:16]}"]}


def ring_list(ctx: Context, query: str | None = None) -> list[dict]:
    out = []
    for name in sorted(rings(ctx).all()):
        ring = rings(ctx).open(name)
        ring.sync()
        for _h, e in sorted(ring.index().items(), key=lambda kv: (str(kv[1].get("id")), str(kv[1].get("published")))):
            if not isinstance(e, dict):
                continue
            text = " ".join(str(e.get(k) or "") for k in ("id", "summary", "description", "license", "category"))
            if query and query.lower() not in text.lower():
                continue
            out.append({"ring": name, **{k: e.get(k) for k in ("id", "version", "hash", "license", "visibility",
                                                              "summary", "tolerance", "category", "published",
                                                              "forked_from")}})
    return out


def ring_fetch(ctx: Context, ref: str, *, ring: str | None = None, to: str | Path | None = None) -> dict:
    known = rings(ctx).all()
    if ring is None:
        if not known:
            raise StudioError("no ring is known here", field="--ring", hint="scellis ring add NAME URL|PATH")
        op = ref.split("@")[0]
        holding = [n for n in sorted(known) if any(isinstance(e, dict) and str(e.get("id", "")).startswith(op)
                                                   for e in _synced(ctx, n).index().values())]
        if len(holding) != 1:
            raise StudioError(f"{len(holding)} rings hold {op}" + (f": {', '.join(holding)}" if holding else ""),
                              field="--ring", hint="name the ring: --ring NAME")
        ring = holding[0]
    r = rings(ctx).open(ring)
    entry_id = ref.rsplit("@", 1)[0] if ref.count("@") > 1 else ref
    from ..contract.contract import OpId
    oid = OpId.parse(entry_id, field="ID")
    dest = Path(to) if to is not None else (ctx.trust.home / "ops" / "fetched" / oid.namespace / oid.author
                                            / f"{oid.name}@{oid.version}")
    got = fetch_from_ring(r, ref, dest, licenses=Licenses())
    st = ctx.trust.status(got.pkg)
    lines = got.lines + [f"  reference: {st.level} ({st.reason})" + (
        f"; read {got.pkg.reference_path}, then `scellis trust {got.pkg.root}`" if not st.ok else ""),
        f"  conformance here: not yet — run `scellis ring verify {got.pkg.root}` to re-run conformance"
        + (" and gradcheck" if got.pkg.contract.backward.kind == "vjp" else "") + " on this machine"]
    return {"op": got.pkg.id, "hash": got.pkg.hash, "path": str(got.pkg.root), "status": got.status,
            "trust": st.level, "lines": lines}


def _synced(ctx: Context, name: str):
    r = rings(ctx).open(name)
    r.sync()
    return r
