"""Small things, through the real widgets: a domain shown as written, naga's
notation in WGSL's words (on a real compile through the device worker), the Bindings chip counting
its lines' errors, a case header without an empty part, ids and chips cut with "…" and a tooltip,
and a Publish dialog wide enough for its title."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication

from studio.app.bridge.background import Background
from studio.app.notebook.document_view import DocumentView
from studio.app.notebook.documents import create_from_template, open_package
from studio.app.notebook.problems import Problem
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.context import Context

from test_app_shell import wait_checked


def open_view(qtbot, folder, workers=None):
    view = DocumentView(open_package(folder), workers or DeviceWorkers(), Background(), ctx=Context.open(),
                        authored=True)
    qtbot.addWidget(view)
    if workers is None:
        view.checker.timer.setInterval(10**7)                   # no device work in these
    view.resize(1000, 700)
    view.show()
    qtbot.waitExposed(view)
    return view


def test_a_domain_is_shown_as_written(qtbot, tmp_path):
    view = open_view(qtbot, create_from_template("elementwise", tmp_path, "ew", "me"))
    sig = view.doc.field("signature")
    assert "[-1e15, 1e15]" in sig.replace(" ", "").replace(",", ", ")
    rows = view.notebook.cell("signature").inputs.rows()
    assert rows[0][3] == "in [-1e15, 1e15]", rows
    from studio.app.cells.signature import written
    assert [written(v) for v in (-1e15, 0.5, 3.0, 1e-7, 123456789.0)] == ["-1e15", "0.5", "3", "1e-7", "1.23456789e8"]
    assert str(-1e15) == "-1000000000000000.0"                  # the control: what it showed before


NAGA = ("Shader validation error: Entry point main at Compute is invalid — ^^^^^^^^^ naga::ir::Expression [51] "
        "Expression [51] is invalid Operation Add can't work with [49] (of type Scalar(Scalar { kind: Bool, "
        "width: 1 })) and [50] (of type Scalar(Scalar { kind: Bool, width: 1 }))")


def test_naga_notation_in_wgsl_words():
    from studio.app.notebook.naga_words import in_product_words
    assert in_product_words(NAGA) == ("Shader validation error: Entry point main at Compute is invalid — expression "
                                      "#51 is invalid: the operator + can't work with #49 (of type bool) and #50 "
                                      "(of type bool)")
    assert in_product_words("Vector { size: Tri, scalar: f32 }") == "vec3<f32>"
    assert in_product_words("unknown identifier `foo`") == "unknown identifier `foo`"


@pytest.mark.slow
def test_a_real_validation_error_reads_in_wgsl_words(qtbot, pkg_copy):
    """The message the device worker's compile gives for adding two bools, as the kernel cell and the
    problems panel show it (the captured wording above is what naga says today)."""
    pkg = pkg_copy(name="bools", forward__wgsl=[("let v = win[a];",
                                                  "let v = win[a]; var bb: bool = bool(v); let zz = bb + true;")])
    workers = DeviceWorkers()
    try:
        view = open_view(qtbot, pkg, workers)
        wait_checked(qtbot, view)
        qtbot.waitUntil(lambda: any(p.file == "forward.wgsl" for p in view.problems), timeout=90_000)
        msgs = [p.message for p in view.problems if p.file == "forward.wgsl"]
        assert msgs and all("naga::" not in m and "Scalar {" not in m for m in msgs), msgs
        assert any("bool" in m and "#" in m for m in msgs), msgs
    finally:
        workers.close()


def test_the_bindings_chip_counts_the_checks_errors_on_its_lines(qtbot, tmp_path):
    view = open_view(qtbot, create_from_template("windowed_median", tmp_path, "wm", "me"))
    cell = view.notebook.cell("bindings")
    assert cell.chip.text() == "ok"
    text = view.doc.manifest_text
    first = view.doc.field("bindings.text").strip().splitlines()[0].strip()
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.strip() == first)
    bad = Problem("binding 0 does not match the kernel's declaration", "op.toml", line, 1)
    view.notebook.set_problems([bad])
    assert cell.chip.kind == "error" and "problem" in cell.chip.text()
    assert "does not match" in cell.chip.toolTip()
    view.notebook.set_problems([])
    assert cell.chip.text() == "ok" and cell.chip.kind == "ok"


def test_a_case_header_has_no_empty_part():
    from studio.app.panels.conformance import describe_case
    f = {"case": 3, "shape_kind": "minimal", "dims": {"n": 1}, "params": {}, "value_kind": "edge"}
    assert describe_case(f) == "case 3: minimal — n = 1; values edge"
    f["params"] = {"w": 3}
    assert describe_case(f) == "case 3: minimal — n = 1; w = 3; values edge"


def test_chips_and_ids_elide_with_a_tooltip(qtbot):
    from studio.app.cells.base import Chip
    from studio.app.widgets.fitting import ElidedLabel
    chip = Chip("fails on purpose", "warn")
    qtbot.addWidget(chip)
    chip.show()
    chip.resize(chip.minimumSizeHint().width() + 6, chip.height())
    qtbot.wait(10)
    assert chip.shown_text().endswith("…") and chip.text() == "fails on purpose"
    assert "fails on purpose" in chip.toolTip()
    chip.resize(chip.sizeHint().width() + 10, chip.height())
    qtbot.wait(10)
    assert chip.shown_text() == "fails on purpose"
    title = ElidedLabel("user/someone/a_very_long_op_name_indeed@12", bold=True)
    qtbot.addWidget(title)
    title.show()
    title.resize(80, title.height())
    qtbot.wait(10)
    assert title.shown_text().endswith("…") and "a_very_long_op_name_indeed" in title.toolTip()
    assert title.minimumSizeHint().width() < 80                    # it never widens its row


def test_the_publish_dialog_is_as_wide_as_its_title(qtbot, pkg_copy):
    from studio.app.widgets.fitting import TITLE_BAR_EXTRA
    from studio.app.publish.dialogs import PublishDialog
    from studio.engine.contract.package import load_package
    pkg = load_package(pkg_copy(name="pub"))
    dlg = PublishDialog(pkg, ctx=Context.open(), profile="test")
    qtbot.addWidget(dlg)
    fm = QFontMetrics(QApplication.font("QMdiSubWindowTitleBar"))
    need = fm.horizontalAdvance(dlg.windowTitle()) + TITLE_BAR_EXTRA
    screen = QApplication.primaryScreen().availableGeometry().width()
    assert dlg.windowTitle() == f"Publish {pkg.id}"
    assert dlg.minimumWidth() >= min(need, screen - 40)
