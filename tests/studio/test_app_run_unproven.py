"""Runs before proof, through the real window and worker: the Run cell runs a kernel that has no
receipt — the story's failing first draft included — and labels its output "not proven" in the
plot and the status line; it feeds every input the signature declares (a file, the spiky signal,
another op's output); the reference runs alone while the kernel is not written yet; and once the
receipt is issued the cell no longer speaks of "a kernel with no receipt"."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from studio.app.panels.run import NOT_PROVEN, SOURCE_KEYS

from conftest import BUILTINS, _authored
from test_app_shell import dispose, make_window, wait_checked
from test_app_story import FIRST_DRAFT, GOOD_GUARD, type_replace


def run_and_wait(qtbot, rp, timeout=50_000):
    qtbot.mouseClick(rp.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: rp.run_button.isEnabled() and rp.chip.text() in ("done", "error"), timeout=timeout)
    assert rp.chip.text() == "done", rp.info.text()


def sliding_median(x: np.ndarray, w: int) -> np.ndarray:
    return np.median(np.lib.stride_tricks.sliding_window_view(x, w), axis=1).astype(np.float32)


@pytest.mark.slow
def test_an_unproven_kernel_runs_on_the_device_and_says_so(qtbot, tmp_path):
    win = make_window(qtbot, restore_session=False)
    try:
        view = win.new_op("windowed_median", tmp_path, "windowed_median", "me")
        wait_checked(qtbot, view)
        rp = view.run_panel
        assert "a kernel with no receipt" not in rp.info.text().lower()
        # the failing first draft runs on the device: its output is shown, marked not proven
        type_replace(view.notebook.cell("kernel").editor, GOOD_GUARD, FIRST_DRAFT)
        x = np.random.default_rng(3).normal(size=400).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        rp.source.setCurrentIndex(SOURCE_KEYS.index("file"))
        rp.file.setText(str(tmp_path / "x.npy"))
        run_and_wait(qtbot, rp)
        y = rp.data["output"]
        assert y.size == x.size - 6 and np.array_equal(y[:-1], sliding_median(x, 7)[:-1])   # all but the last
        assert rp.chip.kind == "warn" and NOT_PROVEN in rp.info.text() and rp.proven is False
        assert NOT_PROVEN in rp.plot.getPlotItem().titleLabel.text
        assert NOT_PROVEN in rp.curve_out.name()
    finally:
        dispose(win)


@pytest.mark.slow
def test_after_the_receipt_the_run_is_proven_and_the_cell_says_so(qtbot, tmp_path):
    win = make_window(qtbot, restore_session=False)
    try:
        view = win.new_op("windowed_median", tmp_path, "windowed_median", "me")
        rp, cp = view.run_panel, view.conformance_panel
        x = np.random.default_rng(3).normal(size=400).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        rp.source.setCurrentIndex(SOURCE_KEYS.index("file"))
        rp.file.setText(str(tmp_path / "x.npy"))
        qtbot.mouseClick(cp.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: cp.run_button.isEnabled(), timeout=50_000)
        assert cp.chip.text() == "PASS", cp.summary.text()
        assert "no receipt" not in rp.info.text() and "has a valid conformance receipt" in rp.info.text()
        run_and_wait(qtbot, rp)
        assert rp.proven is True and rp.chip.kind == "ok" and NOT_PROVEN not in rp.curve_out.name()
        assert np.array_equal(rp.data["output"], sliding_median(x, 7))
    finally:
        dispose(win)


@pytest.mark.slow
def test_every_input_is_fed_and_the_reference_runs_before_the_kernel(qtbot, tmp_path, pkg_copy):
    root = pkg_copy(BUILTINS / "add", "add")
    (root / "forward.wgsl").write_text("// the kernel is not written yet\n")
    _authored(root)
    win = make_window(qtbot, restore_session=False)
    try:
        view = win.open_path(root)
        rp = view.run_panel
        assert list(rp.rows) == ["a", "b"]                       # one row per declared input
        rp.what.setCurrentIndex(1)                               # the reference alone: no kernel yet
        for row in rp.rows.values():                             # a and b: the same spiky signal
            row.n.setValue(4000)
        run_and_wait(qtbot, rp)
        s = rp.data["output"] / 2
        assert s.size == 4000 and rp.proven is False and NOT_PROVEN in rp.curve_out.name()
        assert "reference" in rp.info.text() and "reference" in rp.curve_out.name()
        # a from a file, b the story op's output on that spiky signal
        a = np.random.default_rng(1).uniform(-1, 1, 3994).astype(np.float32)
        np.save(tmp_path / "a.npy", a)
        rp.rows["a"].source.setCurrentIndex(SOURCE_KEYS.index("file"))
        rp.rows["a"].file.setText(str(tmp_path / "a.npy"))
        rp.rows["b"].source.setCurrentIndex(SOURCE_KEYS.index("op"))
        rp.rows["b"].op.setText("user/demo/windowed_median@1")
        run_and_wait(qtbot, rp)
        want = (a.astype(np.float64) + sliding_median(s, 7)).astype(np.float32)
        assert np.array_equal(rp.data["output"], want)
        # the kernel itself cannot run yet: the cell says why
        rp.what.setCurrentIndex(0)
        qtbot.mouseClick(rp.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: rp.run_button.isEnabled() and rp.chip.text() in ("done", "error"), timeout=50_000)
        assert rp.chip.text() == "error"
        # and gradcheck judges the reference's VJP with no kernel written
        gp = view.gradcheck_panel
        qtbot.mouseClick(gp.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: gp.run_button.isEnabled() and gp.chip.text() not in ("", "running"), timeout=50_000)
        assert gp.chip.text() == "PASS", gp.verdict.text()
    finally:
        dispose(win)
