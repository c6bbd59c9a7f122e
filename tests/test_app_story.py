"""The user's story, driven through the Studio's GUI (pytest-qt, offscreen, the real device worker):
new op from the template, the first-draft guard failing conformance at n = w with the mismatch
shown, the fix, a pass with a receipt, gradcheck with its plot, a run on the spiky signal with
its plot; and compile errors marked at line:col, one click away in the problems panel."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication

from studio.app.new_op import NewOpDialog
from studio.app.window import MainWindow
from studio.app.worker_bridge import DeviceWorkers
from studio.engine.proof.receipts import gradcheck_receipt_path, receipt_dir
from studio.engine.contract.package import load_package

GOOD_GUARD = "if (i >= p.n - p.w + 1u) { return; }"
FIRST_DRAFT = "if (i >= p.n - p.w) { return; }"


@pytest.fixture
def window(qtbot):
    workers = DeviceWorkers()
    win = MainWindow(workers=workers, offer_recovery=False)
    qtbot.addWidget(win)
    win.show()
    yield win
    for v in list(win.views):
        win.close_view(v, discard=True)
    win.shutdown()


def type_replace(editor, old: str, new: str) -> None:
    """Select ``old`` in a code editor and type ``new`` over it, as a user would."""
    text = editor.toPlainText()
    at = text.index(old)
    c = editor.textCursor()
    c.setPosition(at)
    c.setPosition(at + len(old), QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(c)
    editor.insertPlainText(new)


def new_op_through_dialog(qtbot, win: MainWindow, folder, name="windowed_median", author="me"):
    """File ▸ New op from template: fill the dialog's fields and press OK."""
    def fill():
        dlg = next((w for w in QApplication.topLevelWidgets() if isinstance(w, NewOpDialog) and w.isVisible()), None)
        if dlg is None:
            QTimer.singleShot(20, fill)
            return
        dlg.name.setText(name)
        dlg.author.setText(author)
        dlg.folder.setText(str(folder))
        qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Ok), Qt.MouseButton.LeftButton)
    QTimer.singleShot(0, fill)
    win.act_new.trigger()
    view = win.current()
    assert view is not None and view.doc.field("id") == f"user/{author}/{name}@1"
    return view


def wait_checked(qtbot, view, timeout=60_000):
    start = view.checker.checks_done
    qtbot.waitUntil(lambda: view.checker.checks_done > start and not view.checker.timer.isActive(), timeout=timeout)


@pytest.mark.slow
def test_the_story_through_the_gui(qtbot, window, tmp_path):
    win = window
    # 1. a new op from the story's template, in a folder the user picked
    view = new_op_through_dialog(qtbot, win, tmp_path)
    pkg_dir = tmp_path / "windowed_median"
    assert (pkg_dir / "op.toml").is_file() and (pkg_dir / "forward.wgsl").is_file()
    nb = view.notebook
    assert nb.cell("signature").text.text().startswith("windowed_median(x: f32[n] finite; w: u32 odd in [1, 31]")
    assert nb.cell("tolerance").kind.currentText() == "exact"
    assert nb.cell("tolerance").category.currentText() == "selection"
    view.checker.check_now()
    wait_checked(qtbot, view)
    assert view.problems == [], view.problems

    # 2. the first draft: the guard written as i >= n - w, typed into the kernel editor
    kernel = nb.cell("kernel").editor
    type_replace(kernel, GOOD_GUARD, FIRST_DRAFT)
    assert FIRST_DRAFT in view.doc.text("forward.wgsl") and view.doc.dirty
    panel = view.conformance_panel
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.chip.text() in ("PASS", "FAIL", "error"), timeout=90_000)
    assert panel.chip.text() == "FAIL", panel.summary.text()
    rep = panel.report
    assert rep["failed"] > 0
    minimum = [f for f in rep["failures"] if f["shape_kind"] == "minimum"]
    assert minimum and all(f["dims"]["n"] == f["params"]["w"] for f in minimum)
    assert any(f["dims"]["n"] == 7 and f["params"]["w"] == 7 for f in rep["failures"])   # the story's n = w = 7
    # the first mismatch, with its bit patterns: the poison shows the element was never written
    assert panel.mismatch_box.isVisible()
    assert "n = w" in panel.mm_case.text()
    assert "0x7fbadbad" in panel.mm_got.text() and "never written" in panel.mm_got.text()
    assert "bits 0x" in panel.mm_expected.text()
    assert panel.table.rowCount() == min(rep["failed"], 50)
    assert panel.receipt_chip.text() == "no receipt"
    assert not list(receipt_dir(load_package(pkg_dir)).glob("*.json"))      # nothing issued for the saved content

    # 3. the fix, saved; conformance passes and the receipt lands in the package
    type_replace(kernel, FIRST_DRAFT, GOOD_GUARD)
    assert win.save_current() == pkg_dir
    assert not view.doc.dirty and GOOD_GUARD in (pkg_dir / "forward.wgsl").read_text()
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled() and panel.chip.text() in ("PASS", "FAIL", "error"),
                    timeout=90_000)
    assert panel.chip.text() == "PASS", panel.summary.text()
    assert panel.receipt_chip.text() == "receipt ✔"
    receipts = list(receipt_dir(load_package(pkg_dir)).glob("*.json"))
    assert len(receipts) == 1
    receipt = json.loads(receipts[0].read_text())
    assert receipt["verdict"] == "pass" and receipt["op"] == "user/me/windowed_median@1"
    assert receipt["hashes"]["package"] == view.doc.content_hash()
    # the catalog card shows it, judged for this GPU profile
    qtbot.waitUntil(lambda: "user/me/windowed_median@1" in win.catalog.cards and
                    win.catalog.cards["user/me/windowed_median@1"].receipt.text() == "receipt ✔", timeout=30_000)
    card = win.catalog.cards["user/me/windowed_median@1"]
    assert [c.text() for c in card.findChildren(type(card.receipt))][:3] == ["user", "exact", "selection"]
    # the catalog opens ops by double-click; an open one is just brought to the front
    item = next(g.child(i) for g in win.catalog.groups.values() for i in range(g.childCount())
                if win.catalog.tree.itemWidget(g.child(i), 0) is card)
    win.tabs.setCurrentIndex(0)
    win.catalog.tree.itemDoubleClicked.emit(item, 0)
    assert win.current() is view and len(win.views) == 1

    # 4. gradcheck with its plot (analytic against numeric per probe, skipped marked, mutants' fates)
    from studio.engine.worker.client import HANDLERS
    if "gradcheck" in HANDLERS:
        gp = view.gradcheck_panel
        qtbot.mouseClick(gp.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: gp.run_button.isEnabled() and gp.chip.text() not in ("", "running"), timeout=90_000)
        assert gp.chip.text() == "PASS", gp.verdict.text()
        xs, ys = gp.scatter.getData()
        assert len(xs) > 0 and np.allclose(xs, ys, atol=1e-6)
        assert len(gp.skipped.getData()[0]) == gp.report["skipped"] > 0      # kinks skipped, and shown
        fates = [m["fate"] for m in gp.report["negative_controls"]]
        assert "REJECTED" in fates and "passed" not in fates
        shown = [gp.mutants.item(r, 2).text() for r in range(gp.mutants.rowCount())]
        assert len(shown) == len(fates) and any(t.startswith("REJECTED") for t in shown)
        assert any("negative control" in ln for ln in gp.text.toPlainText().splitlines())
        assert gradcheck_receipt_path(load_package(pkg_dir)).is_file()

    # 5. a run on the spiky signal (10^6 samples) with its plot
    rp = view.run_panel
    assert rp.n.value() == 1_000_000 and rp.param_spins["w"].value() == 7
    qtbot.mouseClick(rp.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: rp.chip.text() in ("done", "error"), timeout=90_000)
    assert rp.chip.text() == "done", rp.info.text()
    x, y = rp.data["input"], rp.data["output"]
    assert x.size == 1_000_000 and y.size == 1_000_000 - 7 + 1
    assert np.abs(np.diff(y)).max() < np.abs(np.diff(x)).max()        # the spikes are gone
    curves = rp.plot.getPlotItem().listDataItems()
    assert len(curves) == 2 and all(c.opts["autoDownsample"] and c.opts["clipToView"] for c in curves)
    # export the plot and the data
    for name in ("run.png", "run.svg"):
        view.runner.export_plot(str(tmp_path / name))
        assert (tmp_path / name).stat().st_size > 1000
    view.runner.export_data(str(tmp_path / "y.npy")).result(10)
    view.runner.export_data(str(tmp_path / "y.csv")).result(30)
    assert np.array_equal(np.load(tmp_path / "y.npy"), y)
    # .csv: a header, then sample, input, output (issue 13: every plotted series, the input too)
    assert (tmp_path / "y.csv").read_text().splitlines()[0].startswith("sample [index],input,")
    assert np.loadtxt(tmp_path / "y.csv", delimiter=",", skiprows=1, usecols=(0, 1)).shape == (x.size, 2)

    # 6. the same op on a signal from a file (.csv here): median of the median
    np.savetxt(tmp_path / "signal.csv", x[:5000], delimiter=",")
    rp.source.setCurrentIndex(1)
    rp.file.setText(str(tmp_path / "signal.csv"))
    qtbot.mouseClick(rp.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: rp.chip.text() in ("done", "error") and rp.data["input"].size == 5000, timeout=60_000)
    assert rp.chip.text() == "done" and rp.data["output"].size == 5000 - 6
    assert np.array_equal(rp.data["output"], y[:5000 - 6])


@pytest.mark.slow
def test_compile_error_is_marked_and_one_click_away(qtbot, window, tmp_path):
    view = new_op_through_dialog(qtbot, window, tmp_path, name="median_typo")
    kernel = view.notebook.cell("kernel").editor
    type_replace(kernel, "var win: array<f32, 31>;", "var win: array<f32, 31>")     # a missing semicolon
    wait_checked(qtbot, view)
    errs = [p for p in view.problems if p.file == "forward.wgsl"]
    assert errs and errs[0].line is not None and errs[0].col is not None, view.problems
    p = errs[0]
    assert kernel.markers and kernel.markers[0].line == p.line
    # the problems panel lists it; a click jumps to its line and column
    panel = window.problems
    qtbot.waitUntil(lambda: panel.row_of(p) is not None, timeout=5_000)
    kernel.moveCursor(QTextCursor.MoveOperation.Start)
    panel.itemClicked.emit(panel.row_of(p), 0)
    assert kernel.cursor_line_col() == (p.line, p.col)
    # fixing it clears the problem
    type_replace(kernel, "var win: array<f32, 31>\n", "var win: array<f32, 31>;\n")
    wait_checked(qtbot, view)
    assert [p for p in view.problems if p.file == "forward.wgsl"] == []


@pytest.mark.slow
def test_long_work_shows_progress_and_can_be_cancelled(qtbot, window, tmp_path):
    view = new_op_through_dialog(qtbot, window, tmp_path, name="median_cancel")
    panel = view.conformance_panel
    panel.large.setChecked(True)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert not panel.run_button.isEnabled() and panel.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: panel.progress.maximum() > 0 or not panel.cancel_button.isEnabled(), timeout=60_000)
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=30_000)
    if panel.chip.text() != "PASS":          # (on a very fast device it may finish first)
        assert panel.chip.text() == "cancelled"
    # the worker was restarted: the next run works
    panel.large.setChecked(False)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=90_000)
    assert panel.chip.text() == "PASS", panel.summary.text()
