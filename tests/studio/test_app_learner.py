"""The Studio's learner panel (studio/app/tools/learner_view.py), pytest-qt offscreen with
real Dask owners: a run shows the metric curve, the owners (their worker processes) and shares, and
the agreement check of every step, and ends with the same final parameter hash as the independent
implementation; a broken learner file is shown as a positioned error; the window offers the panel
under Tools."""
from __future__ import annotations

import pytest
from learner_reference import independent_run
from PySide6.QtCore import Qt

from studio.app.tools.learner_view import LearnerPanel
from studio.engine.learner.fingerprint import array_hash
from studio.engine.learner.system import load_system
from studio.engine.resources import ROOT


@pytest.mark.slow
def test_a_run_shows_the_curve_the_owners_and_the_agreement(qtbot):
    panel = LearnerPanel()
    qtbot.addWidget(panel)
    panel.choice.setCurrentText("online_mean")
    assert "online_mean" in panel.info.text() and "canonical" in panel.info.text()
    assert panel.owner_table.rowCount() == 3                        # the file's owners: shares 1, 0, 49
    assert [panel.owner_table.item(o, 2).text() for o in range(3)] == ["1", "0", "49"]
    panel.owners.setValue(2)
    panel.steps.setValue(3)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.result is not None or panel.status.text().startswith(("error", "stopped")),
                    timeout=180_000)
    assert panel.result is not None, panel.status.text()
    assert panel.steps_table.rowCount() == 3
    assert all(panel.steps_table.item(r, 2).text() == "✓ 2 owners agree" for r in range(3))
    xs, ys = panel.curve.getData()
    assert list(xs) == [1, 2, 3] and ys[0] > ys[2]
    assert panel.owner_table.rowCount() == 2
    assert all(panel.owner_table.item(o, 1).text().startswith("tcp://") for o in range(2))
    assert [panel.owner_table.item(o, 2).text() for o in range(2)] == ["25", "25"]
    want, _ = independent_run(load_system(ROOT / "learners" / "online_mean"), 3)
    assert array_hash(want) in panel.status.text()
    assert panel.run_button.isEnabled()


def test_a_broken_learner_file_is_a_positioned_error(qtbot, tmp_path):
    panel = LearnerPanel()
    qtbot.addWidget(panel)
    (tmp_path / "learner.toml").write_text("[learner]\nk = two\n")
    assert panel.open(tmp_path / "learner.toml") is None
    assert panel.status.text().startswith("error: ") and "learner.toml:2:" in panel.status.text()


@pytest.mark.slow
def test_the_window_offers_the_learner_panel(qtbot):
    from studio.app.shell.window import MainWindow
    from studio.app.bridge.worker_bridge import DeviceWorkers
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    qtbot.addWidget(win)
    try:
        act = next(a for a in win.menus.menu("tools").actions() if a.text() == "&Learner…")
        assert win.learner_dock.isHidden()
        act.trigger()
        assert not win.learner_dock.isHidden() and isinstance(win.learner_dock.panel, LearnerPanel)
    finally:
        win.shutdown()


@pytest.mark.slow
def test_stop_ends_the_run_after_the_step_in_flight(qtbot):
    panel = LearnerPanel()
    qtbot.addWidget(panel)
    panel.choice.setCurrentText("kmeans_pull")
    panel.steps.setValue(500)
    panel.relay.step.connect(lambda rec: panel.stop() if rec.step == 2 else None)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert panel.stop_button.isEnabled()
    qtbot.waitUntil(lambda: panel.result is not None or panel.status.text().startswith(("error", "stopped")),
                    timeout=180_000)
    assert panel.result is not None, panel.status.text()
    assert 2 <= panel.result.step < 500 and panel.steps_table.rowCount() == panel.result.step
    assert not panel.stop_button.isEnabled() and panel.run_button.isEnabled()
