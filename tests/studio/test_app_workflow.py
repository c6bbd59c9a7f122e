"""The Studio's workflow notebook (studio/app/tools/workflow_view.py), pytest-qt offscreen
with the real device worker: Run all plots every step with its time and gives the same output hashes
as `scellis workflow run` on the same file; a missing receipt is refused with the message and the
"Allow unverified" box; Stop cancels. The test's user data folder is empty (conftest), so the user's
median has no receipt here: the runs that should run tick "Allow unverified for this run" (the CLI
run gets --allow-unverified), and the refusal test uses a receipt-less copy of the package."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MEDIAN, copy_package
from PySide6.QtCore import Qt

from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.app.tools.workflow_view import WorkflowView
from studio.engine.services.outline import story_workflow
from studio.engine.errors import StudioError

N = 20_000


def story(tmp_path, n=N, edits=()):
    text = story_workflow().read_text()
    assert "n = 1000000" in text
    text = text.replace("n = 1000000", f"n = {n}")
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    p = tmp_path / "story.toml"
    p.write_text(text)
    return p


@pytest.fixture
def window(qtbot):
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.shutdown()


@pytest.mark.slow
def test_run_all_plots_every_step_and_matches_the_cli_hashes(qtbot, window, tmp_path):
    wf = story(tmp_path)
    assert window.menus["file.open_workflow"].text() == "Open workflow…"            # File ▸ Open workflow…
    view = window.open_workflow(wf)
    assert window.tabs.currentWidget() is view
    assert [c.name for c in view.cells] == ["signal", "limit", "median", "smooth"]
    med = view.cell("median")
    assert "user/demo/windowed_median@1" in med.header.text() and med.fields["w"].text() == "7"
    assert "tolerance" in med.header.text() and med.badge.get("category")      # from the op's card
    view.allow_box.setChecked(True)
    view.prove_box.setChecked(False)
    qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None or not view.job.active, timeout=120_000)
    assert view.result is not None, view.status.text()
    for c in view.cells:
        whole = view.result.arrays[f"{c.name}.y"].size          # (the median and the FIR trim their edges)
        assert c.samples == whole > N - 10 and c.seconds is not None and "ms" in c.time_label.text(), c.name
        _xs, ys = c.curve.getOriginalDataset()                  # the whole output, not a prefix
        assert ys is not None and len(ys) == whole
        assert c.badge["receipt"] and f"receipt <b>{c.badge['receipt']}</b>" in c.header.text(), c.badge
    text = view.provenance.toPlainText()
    assert "step      median" in text and "nothing moved between steps" in text
    gui = {s["name"]: s["outputs"] for s in view.result.record["steps"]}
    # the CLI on the same file, its own process and worker
    rec = tmp_path / "cli.record.json"
    cli = Path(sys.executable).parent / "scellis"
    p = subprocess.run([str(cli), "workflow", "run", str(wf), "--allow-unverified", "--record", str(rec),
                        "--out-dir", str(tmp_path / "cli")], capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    cli_steps = {s["name"]: s["outputs"] for s in json.loads(rec.read_text())["steps"]}
    assert gui["median"]["y"]["sha256"] == cli_steps["median"]["y"]["sha256"]
    assert {k: {o: v["sha256"] for o, v in outs.items()} for k, outs in gui.items()} == \
        {k: {o: v["sha256"] for o, v in outs.items()} for k, outs in cli_steps.items()}


@pytest.mark.slow
def test_run_to_here_runs_only_what_the_step_needs(qtbot, window, tmp_path):
    view = window.open_workflow(story(tmp_path))
    view.allow_box.setChecked(True)
    view.prove_box.setChecked(False)
    qtbot.mouseClick(view.cell("limit").run_here, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None or not view.job.active, timeout=120_000)
    assert view.result is not None, view.status.text()
    assert {s["name"] for s in view.result.record["steps"]} == {"signal", "limit"}
    assert view.cell("limit").samples == N and view.cell("median").samples == 0


@pytest.mark.slow
def test_a_missing_receipt_is_refused_with_the_allow_box(qtbot, window, tmp_path):
    mine = copy_package(MEDIAN, tmp_path / "median")             # a copy: no receipt on this profile
    view = window.open_workflow(story(tmp_path, edits=[('op = "user/demo/windowed_median@1"', f'op = "{mine}"')]))
    assert view.prove_box.isChecked() and not view.allow_box.isChecked()      # proving is the default
    view.prove_box.setChecked(False)
    job = view.run()
    qtbot.waitUntil(lambda: not job.active, timeout=120_000)
    assert job.state == "failed" and view.result is None
    text = view.status.text()
    assert "no valid conformance receipt" in text and "Prove missing receipts first" in text, text
    assert "bold" in view.prove_box.styleSheet() and view.allow_box.styleSheet() == ""   # not the loud one
    assert view.run_button.isEnabled() and not view.stop_button.isEnabled()


@pytest.mark.slow
def test_stop_cancels_a_run(qtbot, window, tmp_path):
    view = window.open_workflow(story(tmp_path, n=4_000_000))
    view.allow_box.setChecked(True)
    view.prove_box.setChecked(False)
    job = view.run()
    seen = []
    job.progress.connect(lambda done, total: seen.append((done, total)))
    qtbot.waitUntil(lambda: bool(seen) or not job.active, timeout=60_000)      # the first step is done: in flight
    assert view.stop_button.isEnabled()
    qtbot.mouseClick(view.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not job.active, timeout=60_000)
    assert job.state == "cancelled" and view.result is None and "stopped" in view.status.text(), seen
    assert view.run_button.isEnabled()


@pytest.fixture
def ops_proven_here(ctx, proof_store, tmp_path_factory):
    """This test's user folder with the conformance receipts of the training workflow's ops (proven
    once per run); their VJPs' gradcheck is still to be earned."""
    conformance_of_its_ops(ctx, proof_store, training_workflow(tmp_path_factory.mktemp("wf"), 30))
    return ctx.trust.home


@pytest.mark.slow
def test_train_lowers_the_loss_and_plots_it(qtbot, ops_proven_here, window, tmp_path):
    text = (Path(story_workflow()).parent / "train_median.toml").read_text()
    for old, new in (("n = 1000000", "n = 2048"), ("steps = 150", "steps = 30")):
        assert old in text
        text = text.replace(old, new)
    wf = tmp_path / "train.toml"
    wf.write_text(text)
    view = window.open_workflow(wf)
    assert view.train_button.isEnabled() and view.loss_plot.isVisible()
    view.allow_box.setChecked(True)          # (the ops hold their receipts here) ...
    view.prove_box.setChecked(True)          # ... but training needs the VJPs' gradcheck: earned first, in the window
    qtbot.mouseClick(view.train_button, Qt.MouseButton.LeftButton)
    live = []                                # the losses as they arrive, step by step, while it trains
    view.job.value.connect(lambda step, loss: live.append((step, loss, view.train_result is None)))
    qtbot.waitUntil(lambda: view.train_result is not None or not view.job.active, timeout=300_000)
    assert view.train_result is not None, view.status.text()
    losses = view.losses
    assert len(losses) == 30 and losses[-1] < losses[0] / 10, losses
    assert [s for s, _, _ in live] == list(range(1, 31)) and all(during for _, _, during in live)
    assert [loss for _, loss, _ in live] == losses            # the live curve is the record's curve
    _xs, ys = view.loss_curve.getData()
    assert len(ys) == 30
    assert "final loss" in view.status.text() and "checkpoint" in view.provenance.toPlainText()


def training_workflow(folder: Path, steps: int) -> Path:
    text = (Path(story_workflow()).parent / "train_median.toml").read_text().replace("steps = 150", f"steps = {steps}") \
        .replace("n = 1000000", "n = 2048")
    wf = folder / "train.toml"
    wf.write_text(text)
    return wf


def conformance_of_its_ops(ctx, store, wf: Path) -> None:
    """The conformance receipts of every kernel op the workflow runs (a composite's parts too), in
    ``ctx``'s user folder: each proven once per run (tests/proof_store.py; the public bar's test
    proves the builtins)."""
    from proof_store import proven
    from studio.engine.grad.composite import bind
    from studio.engine.workflow.spec import load_workflow
    for step in load_workflow(wf).steps.values():
        pkg = ctx.catalog.resolve(step.op)
        for part in [b.pkg for b in bind(pkg, ctx.catalog)] if pkg.contract.composite is not None else [pkg]:
            if part.contract.kernel is not None:
                assert proven(store, ctx, part)["verdict"] == "pass", part.id


@pytest.fixture(scope="module")
def trained_home(module_ctx, tmp_path_factory, proof_store):
    """A user folder in which the training workflow's ops hold their receipts and its VJPs earned
    their gradcheck (the engine's `scellis train --prove`, one step). The test of Stop starts from a
    copy of it: proving in the window is the training test's, above."""
    from studio.engine.services.workflows import train
    home = module_ctx.trust.home
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCELLIS_HOME", str(home))
        out = tmp_path_factory.mktemp("trained")
        wf = training_workflow(out, 1)
        conformance_of_its_ops(module_ctx, proof_store, wf)
        r = train(module_ctx, wf, prove=True, allow_unverified=True, out_dir=out)
    assert r["losses"], r
    return home


@pytest.fixture
def proven_here(trained_home, _isolated_home):
    """This test's user folder, a copy of the trained one (its key too, so its receipts are valid here)."""
    import shutil
    shutil.copytree(trained_home, _isolated_home, dirs_exist_ok=True)
    return _isolated_home


@pytest.mark.slow
def test_stop_ends_training(qtbot, proven_here, window, tmp_path):
    wf = training_workflow(tmp_path, 100000)
    view = window.open_workflow(wf)
    view.allow_box.setChecked(True)
    view.prove_box.setChecked(True)
    job = view.train()
    seen = []
    job.progress.connect(lambda done, total: seen.append((done, total)))
    qtbot.waitUntil(lambda: any(t == 100000 for _, t in seen) or not job.active, timeout=300_000)
    qtbot.mouseClick(view.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not job.active, timeout=60_000)
    assert job.state == "cancelled" and view.train_result is None and "stopped" in view.status.text()


def test_a_bad_workflow_file_is_a_studio_error_at_its_position(qtbot, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[workflow]\nname = "b"\n[steps.a]\nop = "core/signal/clip@1"\ninputs = { x = "nowhere" }\n')
    workers = DeviceWorkers()
    with pytest.raises(StudioError) as e:
        WorkflowView(bad, workers)
    assert e.value.format().startswith(f"{bad}:5:16 [steps.a.inputs.x]") and "dangling" in e.value.format()
    workers.deleteLater()          # (the test's frame and the kept error hold each other: Qt deletes it)


def test_a_workflow_tab_closes(qtbot, window, tmp_path):
    wf = tmp_path / "story.toml"
    wf.write_text(Path(story_workflow()).read_text())
    view = window.open_workflow(wf)
    assert window.close_view(view) and window.tabs.indexOf(view) < 0
    assert window.tabs.currentWidget() is window.welcome          # the last tab closed: the Welcome page
