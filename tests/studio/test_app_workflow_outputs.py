"""Where a workflow run's outputs go, and what its plots hold (studio/engine/services/outputs.py,
studio/app/tools/workflow_view.py, studio/figures.py), with the real device worker and the real widgets:

- Run all on the shipped example (inside the install) writes nothing under resources/: its data,
  plot and record go to the user's output folder, which the tab names;
- the CLI writes beside the --plot the user named, or into the folder named with --out-dir;
  a current folder inside the install gives way to the user's output folder, and a named folder
  inside the install is refused (exit 2);
- a million-sample step plots the whole output, drawn as a min/max envelope that keeps every
  spike, says so on the plot, and its CSV export holds every sample; a PNG export of a step plot
  (160 px tall in its cell) comes out at a readable size with its y label whole."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.cli import main
from studio.engine.resources import ROOT
from studio.engine.services.outline import story_workflow
from studio.engine.services.outputs import in_install, user_outputs
from studio.figures import EXPORT_SIZE

N = 20_000


def install_files() -> dict:
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in ROOT.rglob("*") if p.is_file()}


def small_story(folder, n=N):
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "story.toml"
    p.write_text(story_workflow().read_text().replace("n = 1000000", f"n = {n}"))
    return p


@pytest.fixture
def window(qtbot):
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.shutdown()


@pytest.mark.slow
def test_run_all_on_the_shipped_example_writes_only_to_the_user_output_folder(qtbot, window, tmp_path):
    wf = ROOT / "workflows" / "spike_removal.toml"
    assert in_install(wf)
    before = install_files()
    view = window.open_workflow(wf)
    out = user_outputs("spike_removal")
    assert view.out_dir == out and not in_install(view.out_dir) and str(out) in view.out_label.text()
    view.allow_box.setChecked(True)
    view.prove_box.setChecked(False)
    qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None or not view.job.active, timeout=120_000)
    assert view.result is not None, view.status.text()
    assert install_files() == before                      # not one file under resources/ written or added
    assert (out / "spike_removal.cleaned.npy").is_file() and (out / "spike_removal.record.json").is_file()
    assert view.result.record_path == str(out / "spike_removal.record.json")

    # the whole million samples, drawn as their envelope: the highest spike is on screen
    cell = view.cell("signal")
    full = np.asarray(view.result.arrays["signal.y"]).reshape(-1)
    assert cell.samples == full.size == 1_000_000
    xs, ys = cell.curve.getOriginalDataset()
    assert xs.size == full.size and np.array_equal(ys, full.astype(np.float32))
    qtbot.waitUntil(lambda: cell.curve.getData()[0] is not None and cell.curve.getData()[0].size < full.size)
    dx, dy = cell.curve.getData()                          # what is drawn: far fewer points than samples
    assert dx[-1] >= 0.99 * full.size, dx[-1]              # reaching the end, not the first 4,000
    assert dy.max() == full.max() and dy.min() == full.min()
    top = int(np.argmax(full))
    assert top > 4000 and dx.min() <= top <= dx.max()
    assert "1,000,000 samples" in cell.note and "min/max envelope" in cell.note
    assert cell.note in cell.plot.getPlotItem().titleLabel.text

    # the CSV export (off the GUI thread): every sample of the step
    csv = tmp_path / "signal.csv"
    with qtbot.waitSignal(cell.plot.export_button.exported, timeout=60_000):
        cell.plot.export_button.export(csv)
    with open(csv) as f:
        header = f.readline()
        rows = sum(1 for _ in f)
    assert rows == full.size and "signal output" in header


def test_a_step_plot_exports_a_readable_png_with_its_y_label_whole(qtbot, tmp_path):
    from studio.app.tools.workflow_view import WorkflowView
    view = WorkflowView(story_workflow(), workers=None)
    qtbot.addWidget(view)
    view.resize(1024, 700)
    view.show()
    cell = view.cell("smooth")
    cell.plot.setFixedSize(607, 160)                       # as a step's plot was seen in its cell
    cell.curve.setData(np.arange(50.0), np.sin(np.arange(50.0)))
    qtbot.waitUntil(lambda: cell.plot.height() == 160 and cell.plot.getAxis("left").height() < 160)   # laid out
    label = cell.plot.getAxis("left").label
    on_screen = cell.plot.size()
    # the control: the y label is longer than the cell plot is tall (it is clipped on screen)
    assert label.boundingRect().width() > cell.plot.getAxis("left").height()
    png = tmp_path / "smooth.png"
    cell.plot.export_button.export(png)
    img = QImage(str(png))
    assert img.width() >= EXPORT_SIZE[0] and img.height() >= EXPORT_SIZE[1], (img.width(), img.height())
    assert cell.plot.size() == on_screen and cell.plot.getPlotItem().geometry().height() == on_screen.height()
    from studio.figures import lay_out
    lay_out(cell.plot, (img.width(), img.height()))        # the export's layout: the label fits its axis
    assert label.boundingRect().width() <= cell.plot.getAxis("left").height()
    lay_out(cell.plot)


@pytest.mark.slow
def test_the_cli_writes_beside_the_plot_or_the_named_folder_never_the_install(tmp_path, monkeypatch, capsys):
    wf = small_story(tmp_path / "src")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    plots = tmp_path / "plots"
    assert main(["workflow", "run", str(wf), "--allow-unverified", "--plot", str(plots / "a.png")]) == 0
    out = capsys.readouterr().out
    assert f"outputs   {plots}: beside the --plot file" in out, out
    assert (plots / "a.png").is_file() and (plots / "spike_removal.record.json").is_file()
    assert (plots / "spike_removal.cleaned.npy").is_file() and not list(elsewhere.iterdir())
    # a current folder inside the install: the user's output folder, said on the first line
    before = install_files()
    monkeypatch.chdir(ROOT / "workflows")
    assert main(["workflow", "run", str(wf), "--allow-unverified"]) == 0
    out = capsys.readouterr().out
    mine = user_outputs("spike_removal")
    assert out.startswith(f"outputs   {mine}: your output folder"), out
    assert (mine / "spike_removal.record.json").is_file()
    # a folder named inside the install: refused, exit 2, nothing written
    assert main(["workflow", "run", str(wf), "--allow-unverified", "--out-dir", str(ROOT / "x")]) == 2
    err = capsys.readouterr().err
    assert "inside the Scellis Studio install" in err and "--out-dir" in err
    assert install_files() == before


TINY = """[workflow]
name = "tiny"
record = "tiny.record.json"

[sources.x]
values = [0.0, 9.0, -9.0, 1.5]

[steps.limit]
op = "core/signal/clip@1"
inputs = { x = "x" }
params = { lo = -8.0, hi = 8.0 }
"""


@pytest.mark.slow
def test_a_run_that_proves_first_names_the_proof_counts_its_time_and_its_bar_never_goes_back(qtbot, window,
                                                                                             tmp_path):
    """A fresh user folder: Run all proves clip's missing receipt first (seconds), then runs (a few
    ms). The status names the op and the step being proved; the bar only moves forward; the final
    line counts the proving in the time and says how much it was."""
    wf = tmp_path / "tiny.toml"
    wf.write_text(TINY)
    view = window.open_workflow(wf)
    assert view.prove_box.isChecked()
    values, texts = [], []
    view.progress.valueChanged.connect(lambda v: values.append((view.progress.maximum(), v)))
    job = view.run()
    job.note.connect(lambda e: texts.append(view.status.text()))
    qtbot.waitUntil(lambda: not job.active, timeout=60_000)
    assert view.result is not None, view.status.text()
    assert any("proving core/signal/clip@1 for step limit (1 of 1)" in t for t in texts), texts
    fractions = [v / m for m, v in values if m > 0]
    assert len(fractions) >= 3 and fractions[-1] == 1.0, fractions
    assert all(b >= a for a, b in zip(fractions, fractions[1:])), fractions          # never back
    wall = view.result.wall_seconds
    assert wall["proving"] > 0.5 and wall["total"] >= wall["proving"] + wall["steps"] - 1e-3, wall
    text = view.status.text()
    assert f"1 step(s) in {wall['total']:.1f} s (proving missing receipts {wall['proving']:.1f} s" in text, text
