"""Data-parallel training from the Studio's workflow tab (studio/app/tools/parallel_training.py): Train on
resnet_digits.toml runs the CLI's use case off the GUI thread, owners on Dask, and plots each epoch's
training loss and held-out accuracy as it comes; the record and the divisor check land in the side
pane; Stop ends the run after the step under way. The ops hold their receipts in this test's user
folder (the proof store: each proven once per run)."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers

REPO = Path(__file__).resolve().parents[2]
RESNET = REPO / "resources" / "workflows" / "resnet_digits.toml"


@pytest.fixture
def window(qtbot):
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.shutdown()


@pytest.fixture
def resnet_proven_here(ctx, proof_store):
    from proof_store import proven
    from studio.engine.workflow.plan import make_plan
    from studio.engine.workflow.spec import load_workflow
    for sp in {s.pkg.hash: s for s in make_plan(ctx, load_workflow(RESNET)).steps.values()}.values():
        assert proven(proof_store, ctx, sp.pkg)["verdict"] == "pass", sp.pkg.id


@pytest.mark.slow
def test_train_plots_loss_and_held_out_accuracy_per_epoch(qtbot, resnet_proven_here, window, tmp_path):
    view = window.open_workflow(RESNET)
    assert view.train_button.isEnabled() and view.wf.data_parallel
    view.out_dir = tmp_path
    view.prove_box.setChecked(True)
    view.parallel.steps = 3                      # the file trains 10 epochs; three steps end the first
    epochs = []
    view.parallel.epoch.connect(lambda ep: epochs.append(ep))
    qtbot.mouseClick(view.train_button, Qt.MouseButton.LeftButton)
    assert not view.train_button.isEnabled() and view.stop_button.isEnabled()
    # the run's thread ends before its result reaches the GUI thread (a queued signal): wait for the result
    qtbot.waitUntil(lambda: view.train_result is not None or bool(view.error_text), timeout=300_000)
    assert view.train_result is not None, view.status.text()
    rec = view.train_result["record"]
    assert len(rec["steps"]) == 3 and len(epochs) == 1 and rec["owners"] == 4
    xs, ys = view.accuracy_curve.getData()
    assert list(xs) == [1.0] and ys[0] == pytest.approx(rec["epochs"][0]["accuracy"])
    _, losses = view.loss_curve.getData()
    assert losses[0] == pytest.approx(rec["epochs"][0]["loss"])
    text = view.provenance.toPlainText()
    assert "power of two" in text and "held-out accuracy" in text and str(tmp_path) in text
    assert "3 steps on 4 owners" in view.status.text() and view.train_button.isEnabled()


@pytest.mark.slow
def test_a_refused_run_says_why_in_the_tab(qtbot, window, tmp_path):
    view = window.open_workflow(RESNET)           # no receipt here, and neither proving nor allowing
    view.out_dir = tmp_path
    view.prove_box.setChecked(False)
    view.allow_box.setChecked(False)
    view.train()
    qtbot.waitUntil(lambda: bool(view.error_text), timeout=300_000)
    assert view.train_result is None and "no valid conformance receipt" in view.error_text, view.error_text
    assert view.train_button.isEnabled()
