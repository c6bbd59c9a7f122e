"""One proof report to share (studio/engine/services/proof_report.py, `scellis report`): a
self-contained page with the card, the receipt, the conformance summary and the gradcheck plot,
and a check that re-verifies it; its controls: an edited page, an edited evidence block, a
package that changed since, and a file that is no report."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import scellis
from studio.engine.services import proof_report

MEAN = "core/reduce/mean@1"


@pytest.fixture(scope="module")
def report(module_ctx):
    scellis.Session(context=module_ctx).op(MEAN)(list(range(1, 101)))        # proven here (about 2 s)
    pkg = module_ctx.catalog.resolve(MEAN)
    return proof_report.build(module_ctx, pkg)


@pytest.mark.slow
def test_a_report_holds_what_was_proven_and_checks(report, module_ctx, tmp_path):
    assert "<svg" in report and "Re-prove it on another machine" in report and "scellis conform core/reduce/mean@1" in report
    assert "covers: n up to" in report and "mutants" in report                  # coverage, mutation score
    assert not re.search(r"<script(?! type=\"application/json\" id=\"scellis-proof\")", report)   # nothing runs
    assert "http://" not in report.replace("http://www.w3.org/2000/svg", "")    # no external resource
    f = tmp_path / "mean.html"
    f.write_text(report)
    ok, lines = proof_report.check(module_ctx, f)
    assert ok, lines
    assert lines[0].startswith("ok    seal") and any("receipt: valid" in ln for ln in lines)


@pytest.mark.slow
def test_a_tampered_report_is_refused(report, module_ctx, tmp_path):
    f = tmp_path / "edited.html"
    f.write_text(report.replace("Card</h2>", "Card (all good)</h2>", 1))       # the visible page
    ok, lines = proof_report.check(module_ctx, f)
    assert not ok and any(ln.startswith("FAIL  page") for ln in lines)
    f.write_text(report.replace('"verdict": "pass"', '"verdict": "PASS"', 1))  # the evidence
    ok, lines = proof_report.check(module_ctx, f)
    assert not ok and lines[0].startswith("FAIL  seal")


def test_a_file_that_is_no_report_is_one_clear_error(ctx, tmp_path):
    f = tmp_path / "x.html"
    f.write_text("<html>hello</html>")
    with pytest.raises(scellis.Error, match="not a Scellis proof report"):
        proof_report.check(ctx, f)


@pytest.mark.slow
def test_scellis_report_writes_and_checks(tmp_path, capsys):
    """The command end to end (the device worker, which proves the op first): write, then check (exit 0)."""
    from studio.cli import main
    out = tmp_path / "mean.html"
    assert main(["report", MEAN, "-o", str(out)]) == 0 and out.is_file()
    assert main(["report", "--check", str(out)]) == 0
    assert "the report holds here" in capsys.readouterr().out        # the refusals: the tests above


def _rgb(png) -> np.ndarray:
    from PySide6.QtGui import QImage
    img = QImage(str(png)).convertToFormat(QImage.Format.Format_RGB888)
    rows = np.frombuffer(img.constBits(), np.uint8, img.bytesPerLine() * img.height()).reshape(img.height(), -1)
    return rows[:, :img.width() * 3].reshape(img.height(), img.width(), 3).copy()


def painted(rgb: np.ndarray, color: str, *, rows: slice = slice(None)) -> int:
    """Pixels of ``color`` (#rrggbb) in ``rows`` of a screenshot."""
    want = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], np.int16)
    return int(np.sum(np.all(np.abs(rgb[rows].astype(np.int16) - want) <= 6, axis=-1)))


def screenshot(chromium: str, page: Path, png: Path) -> np.ndarray:
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic", "--window-size=1000,1600",
                    f"--screenshot={png}", page.as_uri()], capture_output=True, timeout=120, check=True,
                   env={**os.environ, "HOME": str(png.parent)})
    return _rgb(png)


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium(report, tmp_path):
    """The page as a browser shows it: the verdict badge in its colour at the top, the gradcheck's
    probes drawn. The control: the same page with the badge and the plot taken out shows neither."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "no chromium here: ./test.sh's set-up installs it (scripts/setup.sh, TEST_PKGS)"
    page = tmp_path / "mean.html"
    page.write_text(report)
    rgb = screenshot(chromium, page, tmp_path / "mean.png")
    assert painted(rgb, "#2e7d32", rows=slice(0, 80)) > 200              # the green "valid" badge by the title
    assert painted(rgb, "#1565c0") > 50                                   # the probes' dots
    stripped = re.sub(r"<svg.*?</svg>", "", report, flags=re.S).replace("background:#2e7d32", "background:#ffffff")
    page.write_text(stripped)
    rgb = screenshot(chromium, page, tmp_path / "stripped.png")
    assert painted(rgb, "#2e7d32", rows=slice(0, 80)) == 0 and painted(rgb, "#1565c0") == 0
