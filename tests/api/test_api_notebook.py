"""The story notebook (docs/notebooks/story.ipynb) runs in a real Jupyter kernel (nbclient) and shows
its reports as rich HTML: the first draft's failing conformance (the failing control), the fix's
valid receipt, and the gradcheck with its plot inline as SVG; nothing in them is a script."""
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "docs" / "notebooks" / "story.ipynb"


def html_outputs(nb) -> list[str]:
    """The text/html of each code cell's outputs ('' for a cell without one), in order."""
    out = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            out.append("".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", [])))
    return out


def badge_of(fragment: str) -> str | None:
    m = re.search(r'<span style="background:[^"]+">(\w+)</span>', fragment)
    return m[1] if m else None


def test_reports_render_as_html_with_an_inline_plot():
    """The renderings alone (no kernel): the badge, the escaped lines, the SVG, no script; the
    control: a failing verdict's badge says so."""
    from studio.engine.services.report_html import block, probe_svg
    ok = block("gradcheck x", "pass", ["a < b & c"], probe_svg([(1.0, 1.0, False), (2.0, 2.1, True)]))
    assert badge_of(ok) == "pass" and "a &lt; b &amp; c" in ok and "<svg" in ok and "<circle" in ok
    assert "<script" not in ok
    assert badge_of(block("conformance x", "fail", [])) == "fail"


@pytest.mark.slow
def test_the_story_notebook_runs_and_shows_its_reports(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["SCELLIS_HOME"] = str(tmp_path / "home")         # the kernel inherits it (a fresh user folder)
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    html = html_outputs(nb)
    draft, receipt, grad, card = html[1], html[2], html[3], html[4]
    assert badge_of(draft) == "fail" and "first failure" in draft            # the draft fails, by case
    assert badge_of(receipt) == "valid" and "spikes removed" in str(nb.cells[5].outputs)
    assert badge_of(grad) == "pass" and "<svg" in grad and grad.count("<circle") > 10
    assert "user/demo/windowed_median@1" in card
    assert not any("<script" in h for h in html)


def test_a_receipt_report_with_no_receipt_says_so_in_text_and_html(ctx, pkg_copy):
    """The receipt report of an op with none in this user folder (no kernel runs): not ok, no path, the
    line names the command that earns one, and the HTML carries the same words escaped."""
    from studio.engine.contract.package import load_package
    from studio.engine.services.reports import receipt
    r = receipt(ctx, load_package(pkg_copy()))
    assert (r.ok, r.path, r.status) == (False, None, "none")
    assert str(r) == "user/demo/windowed_median@1: no receipts (run `scellis conform user/demo/windowed_median@1`)"
    html = r._repr_html_()
    assert "no receipts" in html and "<script" not in html
