"""The typed reports of one op as the ``scellis`` package returns them (docs/api.md): conformance,
gradcheck, the receipt and the card. Each holds the engine's own report and prints the lines the CLI
prints for it (``scellis conform``, ``gradcheck``, ``receipts``, ``card``); a pass earns its
receipt by the same rule (``actions.earn_conformance_receipt``, ``earn_gradcheck_receipt``)."""
from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from ..context import Context
from ..contract.package import OpPackage
from ..proof import mutants as mutation
from ..proof.conformance import ConformanceReport, report_lines
from ..proof.conformance import conform as run_conformance
from ..proof.gradcheck import DEFAULT_H, GradcheckReport
from ..proof.gradcheck import gradcheck as run_gradcheck
from . import actions, report_html
from .publishing import card as make_card
from .verdicts import remembered_gradcheck

__all__ = ["Card", "Conformance", "ConformanceReport", "Gradcheck", "GradcheckReport", "Receipt",
           "card", "conformance", "gradcheck", "receipt"]


@dataclass
class Conformance:
    """A conformance run: the engine's report, and the receipt it earned (None: none earned)."""
    report: ConformanceReport
    receipt: str | None = None

    @property
    def ok(self) -> bool:
        return self.report.ok

    @property
    def verdict(self) -> str:
        return "pass" if self.report.ok else "fail"

    def lines(self) -> list[str]:
        return actions.conformance_text(report_lines(self.report), self.receipt)     # `scellis conform`'s

    def to_json(self) -> dict:
        return {**self.report.to_json(), "receipt": self.receipt}

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        return report_html.conformance_html(self)


@dataclass
class Gradcheck:
    """A gradcheck: the engine's report (probes, negative controls, verdict) and its receipt."""
    report: GradcheckReport
    receipt: str | None = None

    @property
    def ok(self) -> bool:
        return self.report.verdict == "pass"

    @property
    def verdict(self) -> str:
        return self.report.verdict

    def lines(self) -> list[str]:
        return actions.gradcheck_text(self.report.lines(), self.receipt)             # `scellis gradcheck`'s

    def to_json(self) -> dict:
        return {**self.report.to_json(), "receipt": self.receipt}

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def svg(self) -> str:
        """The probes plotted, analytic against numeric (an SVG document)."""
        return report_html.probe_svg([(p.analytic, p.numeric, p.skipped) for p in self.report.probes],
                                     title=f"gradcheck {self.report.op}")

    def _repr_html_(self) -> str:
        return report_html.gradcheck_html(self)


@dataclass
class Receipt:
    """The op's conformance receipts in the user folder, judged for this GPU profile: ``status`` is
    the best of them (valid, failed, stale, forged, foreign, malformed, or none)."""
    op: str
    status: str
    found: list[dict] = field(default_factory=list)     # each: path, status, problems, coverage lines

    @property
    def ok(self) -> bool:
        return self.status == "valid"

    @property
    def path(self) -> str | None:
        best = [r for r in self.found if r["status"] == self.status]
        return best[0]["path"] if best else None

    def lines(self) -> list[str]:
        """The lines `scellis receipts` prints (its presenter: ``actions.ReceiptsReport.lines``)."""
        return actions.ReceiptsReport(op=self.op, status=self.status,
                                      found=[actions.ReceiptFound(**r) for r in self.found]).lines()

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        return report_html.receipt_html(self)


@dataclass
class Card:
    """The op's card (``scellis card``): source, trust, tolerance badge, receipts, license, lineage."""
    data: dict
    text: str
    html: str

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return self.html


def conformance(ctx: Context, pkg: OpPackage, *, seed: int = 0, large: bool = False, receipt: bool = True,
                progress=None) -> Conformance:
    """The full corpus with its mutants, as ``scellis conform`` runs it; a pass earns the receipt."""
    rep = run_conformance(ctx, pkg, seed=seed, large=large, progress=progress, mutants=mutation.DEFAULT_COUNT)
    path = actions.earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal) if receipt else None
    return Conformance(rep, str(path) if path else None)


def gradcheck(ctx: Context, pkg: OpPackage, *, params: dict | None = None, h: float | None = None, seed: int = 0,
              tolerance: float | None = None, receipt: bool = True) -> Gradcheck:
    """As ``scellis gradcheck`` runs it (remembered across a kernel edit: verdicts.py)."""
    rep = remembered_gradcheck(ctx, pkg, run_gradcheck, params=params, h=h or DEFAULT_H, seed=seed,
                               tolerance=tolerance)
    path = actions.earn_gradcheck_receipt(pkg, rep, seal=ctx.seal) if receipt else None
    return Gradcheck(rep, str(path) if path else None)


def receipt(ctx: Context, pkg: OpPackage) -> Receipt:
    """As `scellis receipts` judges them (``actions.verify_receipts``), the valid ones first."""
    rep = actions.verify_receipts(ctx, pkg)
    rows = sorted((msgspec.structs.asdict(r) for r in rep.found), key=lambda r: r["status"] != "valid")
    return Receipt(pkg.id, rep.status, rows)


def card(ctx: Context, pkg: OpPackage) -> Card:
    c = make_card(ctx, pkg, profile_id=ctx.device.profile.id)
    return Card({k: v for k, v in c.items() if k not in ("text", "html")}, c["text"], c["html"])
