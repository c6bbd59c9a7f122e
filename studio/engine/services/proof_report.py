"""One proof report to share (`scellis report OP -o op.html`, docs/api.md "One proof report"): a
single self-contained HTML file (no script runs, no external resource) with the op's card, its
conformance receipt for this GPU profile (coverage and mutation score, the failing case if it
failed), its gradcheck with the probes plotted inline as SVG, and the commands that re-prove it on
another machine. A data block carries the evidence: the receipts as written (with their seals),
the package's part hashes and a SHA-256 of the visible page, the whole sealed with this user
folder's key. ``check`` re-verifies what it can: the page against its digest, the seal when it is
this folder's (a report from elsewhere is judged by its hashes alone), the hashes against the
package the catalog holds, and the receipt against that package and this GPU profile."""
from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import msgspec

from ..context import Context
from ..contract.package import OpPackage
from ..errors import StudioError
from ..proof import coverage, receipts
from ..proof import mutants as mutation
from ..records.reader import read_regular
from . import report_html
from .publishing import card as make_card
from .reports import gradcheck as run_gradcheck

SCHEMA = "scellis-proof-report/1"
MAX_REPORT_BYTES = 16 << 20
_DATA = re.compile(r'<script type="application/json" id="scellis-proof">(.*?)</script>', re.S)


class ProofReport(msgspec.Struct, kw_only=True):
    """The worker's ``report`` request: the op's id and its report page."""
    op: str
    html: str

    def wrote(self, path) -> str:
        """What the CLI prints and the Studio's status bar shows once the page is written."""
        return f"wrote {path} (proof report of {self.op})"


class ReportCheck(msgspec.Struct, kw_only=True):
    """The worker's ``report_check`` request: whether every check passed, one line per check."""
    ok: bool
    lines: list[str]

    def verdict(self) -> str:
        return "verdict: " + ("the report holds here" if self.ok else "FAIL")

    def text_lines(self) -> list[str]:
        """The checks and the verdict, as the CLI prints them."""
        return [*self.lines, self.verdict()]


def _visible(page: str) -> str:
    """The page without its data block: what the digest covers."""
    return _DATA.sub("", page)


def _section(title: str, inner: str) -> str:
    return f'<section style="margin:18px 0"><h2 style="font-size:18px">{html.escape(title)}</h2>{inner}</section>'


def _pre(lines: list[str]) -> str:
    return f'<pre style="font-size:12px;white-space:pre-wrap">{html.escape(chr(10).join(lines))}</pre>'


def build(ctx: Context, pkg: OpPackage) -> str:
    """The report page for ``pkg`` on ``ctx``'s GPU profile (runs gradcheck for its plot; no receipt written)."""
    profile = ctx.device.profile.id
    found = receipts.judge_receipts(pkg, profile, ctx.seal, corpora=ctx.corpora)
    status = receipts.summarize(found)
    best = next(((p, v) for p, v in found if v.status == status), (None, None))
    receipt = best[1].receipt if best[1] is not None else None
    card = make_card(ctx, pkg, profile_id=profile)
    conf = [f"receipt: {status}" + (f" ({best[0].name})" if best[0] else "")]
    if isinstance(receipt, dict):
        cases = receipt.get("cases") or {}
        conf.append(f"cases: {cases.get('passed', '?')} of {cases.get('total', '?')} pass; verdict {receipt.get('verdict')}")
        conf += coverage.describe(receipt)
        mut = receipt.get("mutation")
        conf += ([ln.strip() for ln in mutation.lines(mut)] if isinstance(mut, dict) else
                 ["mutants: no mutation score on this receipt (a run's proof earned it; `scellis conform` measures one)"])
        if receipt.get("failure"):
            conf.append("failing case: " + json.dumps(receipt["failure"], sort_keys=True)[:600])
    conf += [f"- {p}" for p in (best[1].problems if best[1] is not None else [])]
    grad_doc = receipts.gradcheck_receipt(pkg, seal=ctx.seal)
    grad_html = "<p>nondifferentiable: no gradcheck</p>"
    if pkg.contract.backward.differentiable:
        g = run_gradcheck(ctx, pkg, receipt=False)
        grad_html = (f"<p>gradcheck receipt: {html.escape(grad_doc['verdict'] if grad_doc else 'none here')}; "
                     f"this run: {report_html.badge(g.verdict)}</p><div>{g.svg()}</div>" + _pre(g.lines()))
    commands = [f"scellis conform {pkg.id}", f"scellis gradcheck {pkg.id}", f"scellis receipts {pkg.id}",
                f"scellis report {pkg.id} -o {pkg.id.replace('/', '_').replace('@', '_')}.html",
                "scellis report --check THIS_FILE.html"]
    page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
            f"<title>proof report: {html.escape(pkg.id)}</title></head>"
            '<body style="font-family:sans-serif;max-width:980px;margin:24px auto">'
            f"<h1 style=\"font-size:22px\">{html.escape(pkg.id)} {report_html.badge(status)}</h1>"
            f"<p>content hash <code>{pkg.hash}</code>; GPU profile <code>{html.escape(profile)}</code> "
            f"({html.escape(ctx.device.profile.summary)})</p>"
            + _section("Card", card["html"]) + _section("Conformance", _pre(conf))
            + _section("Gradcheck", grad_html) + _section("Re-prove it on another machine", _pre(commands))
            + "</body></html>")
    data = ctx.seal.seal({"schema": SCHEMA, "op": pkg.id, "package_hash": pkg.hash, "parts": pkg.part_hashes(),
                          "profile": profile, "status": status, "receipt": receipt, "gradcheck_receipt": grad_doc,
                          "page_sha256": hashlib.sha256(page.encode()).hexdigest()})
    block = ('<script type="application/json" id="scellis-proof">'
             + json.dumps(data, sort_keys=True).replace("</", "<\\/") + "</script>")
    return page.replace("</body>", block + "</body>")


def check(ctx: Context, path: str | Path) -> tuple[bool, list[str]]:
    """(whether every check passed, one line per check) for a report file."""
    p = Path(path)
    page = read_regular(p, MAX_REPORT_BYTES, what="proof report", file=str(p)).decode("utf-8", "replace")
    m = _DATA.search(page)
    try:
        data = json.loads(m[1]) if m else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise StudioError("this is not a Scellis proof report (no readable evidence block)", file=str(p),
                          hint="make one with `scellis report OP -o FILE.html`")
    lines, ok = [], True
    sealed = ctx.seal.check(data)
    if sealed.status == "forged":
        return False, [f"FAIL  seal: {sealed.why} ({', '.join(sealed.fields[:4])})"]
    lines.append("ok    seal: sealed by this user folder" if sealed.ok else f"note  seal: {sealed.why}; judged by its hashes")
    digest = hashlib.sha256(_visible(page).encode()).hexdigest()
    good = digest == data.get("page_sha256")
    ok &= good
    lines.append("ok    page: matches its digest" if good else "FAIL  page: the visible report was edited after it was made")
    try:
        pkg = ctx.catalog.resolve(str(data.get("op")))
    except StudioError as e:
        return False, lines + [f"FAIL  package: {e.message}"]
    if pkg.hash != data.get("package_hash"):
        differ = sorted(k for k, v in (data.get("parts") or {}).items() if pkg.part_hashes().get(k) != v)
        return False, lines + [f"FAIL  package: {pkg.id} here has content {pkg.hash[:16]}, the report {str(data.get('package_hash'))[:16]}"
                               + (f" (differs: {', '.join(differ)})" if differ else "")]
    lines.append(f"ok    package: {pkg.id} here has the reported content ({pkg.hash[:16]})")
    rec = data.get("receipt")
    if isinstance(rec, dict):
        v = receipts.verify_receipt(pkg, rec, ctx.device.profile.id, ctx.seal, corpora=ctx.corpora)
        good = v.status == "valid" or (v.status == "foreign" and not sealed.ok)
        ok &= good
        lines.append(("ok    " if good else "FAIL  ") + f"receipt: {v.status}" + "".join(f"; {q}" for q in v.problems))
    else:
        ok = False
        lines.append("FAIL  receipt: the report carries none")
    return ok, lines


def report(ctx, pkg, *, progress=None) -> ProofReport:
    """The worker's ``report`` request: the op proven first where no receipt covers it
    (``require_proof``: a failing op's report shows its failing case), then its report."""
    from .actions import PROOF_FAILED, require_proof
    try:
        require_proof(ctx, pkg, progress=progress)
    except StudioError as e:
        if e.field != PROOF_FAILED:
            raise
    return ProofReport(op=pkg.id, html=build(ctx, pkg))


def check_json(ctx, *, path: str) -> ReportCheck:
    """The worker's ``report_check`` request: ``check`` as a report."""
    ok, lines = check(ctx, path)
    return ReportCheck(ok=ok, lines=lines)
