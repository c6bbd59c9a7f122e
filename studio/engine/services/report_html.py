"""The reports of services/reports.py as self-contained HTML, for a notebook's rich display
(``_repr_html_``): a verdict badge, the lines the CLI prints, and for gradcheck an inline SVG plot
of every probe, analytic against numeric (a point on the diagonal agrees; skipped probes, within h
of a kink, are hollow). No script, no external resource, every text escaped."""
from __future__ import annotations

import html
import math

COLORS = {"pass": "#2e7d32", "valid": "#2e7d32", "fail": "#c62828", "failed": "#c62828",
          "inconclusive": "#ef6c00"}


def badge(text: str) -> str:
    color = COLORS.get(text, "#546e7a")
    return (f'<span style="background:{color};color:#fff;border-radius:3px;padding:1px 6px;'
            f'font-weight:600">{html.escape(text)}</span>')


def block(title: str, verdict: str, lines: list[str], extra: str = "") -> str:
    body = html.escape("\n".join(lines))
    return (f'<div class="scellis-report" style="font-family:sans-serif">'
            f'<div style="margin-bottom:4px"><b>{html.escape(title)}</b> {badge(verdict)}</div>{extra}'
            f'<pre style="font-size:12px;line-height:1.3;white-space:pre-wrap">{body}</pre></div>')


def probe_svg(points: list[tuple[float, float, bool]], *, size: int = 260, title: str = "") -> str:
    """Analytic (x) against numeric (y) for each probe ``(analytic, numeric, skipped)``, the diagonal
    drawn; an SVG element of its own (no script)."""
    finite = [(a, n, s) for a, n, s in points if math.isfinite(a) and math.isfinite(n)]
    pad = 28
    if not finite:
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}"></svg>'
    lo = min(min(a, n) for a, n, _ in finite)
    hi = max(max(a, n) for a, n, _ in finite)
    if hi - lo < 1e-12:
        lo, hi = lo - 1.0, hi + 1.0
    span = hi - lo

    def xy(a: float, n: float) -> tuple[float, float]:
        return (pad + (a - lo) / span * (size - 2 * pad), size - pad - (n - lo) / span * (size - 2 * pad))

    (x0, y0), (x1, y1) = xy(lo, lo), xy(hi, hi)
    dots = []
    for a, n, skipped in finite:
        x, y = xy(a, n)
        style = 'fill="none" stroke="#9e9e9e"' if skipped else 'fill="#1565c0" fill-opacity="0.7"'
        dots.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" {style}/>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
            f'viewBox="0 0 {size} {size}" role="img"><title>{html.escape(title)}</title>'
            f'<rect x="0" y="0" width="{size}" height="{size}" fill="#fff" stroke="#ccc"/>'
            f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="#c62828" stroke-dasharray="4 3"/>'
            + "".join(dots)
            + f'<text x="{size / 2:.0f}" y="{size - 6}" font-size="11" text-anchor="middle">analytic (declared VJP)</text>'
            f'<text x="10" y="{size / 2:.0f}" font-size="11" text-anchor="middle" '
            f'transform="rotate(-90 10 {size / 2:.0f})">numeric (central differences)</text></svg>')


def conformance_html(rep) -> str:
    return block(f"conformance {rep.report.op}", rep.verdict, rep.lines())


def gradcheck_html(rep) -> str:
    pts = [(p.analytic, p.numeric, p.skipped) for p in rep.report.probes]
    svg = probe_svg(pts, title=f"gradcheck {rep.report.op}: analytic against numeric")
    return block(f"gradcheck {rep.report.op}", rep.verdict, rep.lines(), f"<div>{svg}</div>")


def receipt_html(rep) -> str:
    return block(f"receipts {rep.op}", rep.status, rep.lines())
