"""The workflow notebook (issue 14 point 6): one cell per step in run order — its op id and card
badge, its parameters, and after a run a plot of its output and its time; Run all, Run to here,
Train, Stop; the provenance record as text. Every run goes through the device worker (the
``workflow_run`` / ``train`` request kinds of studio/engine/services/workflows.py, the same the CLI
calls), never on the GUI thread."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ...engine.services import data_parallel
from ...engine.services.outline import outline
from ...engine.services.outputs import user_outputs
from ...engine.services.requests import Kind
from ...figures import draw_whole, note_title
from ..widgets.export import plot_with_export
from ..widgets.fitting import fit_column
from ..panels.job import error_html
from .parallel_training import ParallelRun
from ..widgets.theme import style_plot

BAR_UNITS = 1000
PROVE_SHARE = 0.9          # of the progress bar, for proving missing receipts (it takes most of the time)


def _plot(title: str = "", x_label: str = "sample", y_label: str = "value", *, x_units: str | None = "index",
          y_units: str | None = None) -> pg.PlotWidget:
    from ...figures import label_axes, plot_widget
    w = plot_widget(title=title)
    w.setMinimumHeight(160)
    w.getPlotItem().setDownsampling(auto=True, mode="peak")
    w.getPlotItem().setClipToView(True)
    w.showGrid(x=True, y=True, alpha=0.2)
    label_axes(w, x_label, y_label, x_units=x_units, y_units=y_units)
    style_plot(w)
    return w


class StepCell(QFrame):
    """One step: header (op, badge), parameters (read-only: edit the .toml), Run to here, plot, time."""

    def __init__(self, view: WorkflowView, name: str, step, badge: dict):
        super().__init__()
        self.name, self.step, self.badge = name, step, dict(badge)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.header = QLabel()
        self.header.setWordWrap(True)          # (a long op id and badge wrap: the cell never outgrows the view)
        top.addWidget(self.header, 1)
        self.run_here = QPushButton("Run to here")
        self.run_here.setToolTip(f"run the workflow up to {name} (and the steps it needs)")
        self.run_here.clicked.connect(lambda: view.run(until=name))
        top.addWidget(self.run_here)
        lay.addLayout(top)
        form = QFormLayout()
        self.fields: dict[str, QLineEdit] = {}
        for k, v in step.params.items():
            f = QLineEdit(str(v))
            f.setReadOnly(True)
            f.setToolTip("read from the workflow file; edit the .toml to change it")
            form.addRow(k, f)
            self.fields[k] = f
        lay.addLayout(form)
        self.plot = _plot(y_label=f"{name} output", y_units="signal units")
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#1f77b4", width=1), name=f"{name} output")
        lay.addWidget(plot_with_export(self.plot, f"step_{name}", getattr(view, "background", None)))
        self.note = ""
        self.time_label = QLabel("not run yet")
        self.time_label.setWordWrap(True)
        lay.addWidget(self.time_label)
        self.seconds: float | None = None
        self.samples = 0
        self._header()

    def _header(self) -> None:
        b = self.badge
        self.header.setText(f"<b>{self.name}</b> &nbsp; <code>{b.get('op', self.step.kind)}</code> &nbsp; "
                            f"tolerance {b.get('tolerance', '?')} ({b.get('category', '?')}) &nbsp; "
                            f"receipt <b>{b.get('receipt', 'checked when run')}</b>")

    def show_result(self, rec_step: dict | None, arrays: dict) -> None:
        if rec_step is not None:
            self.badge["receipt"] = rec_step["receipt"]["status"]
            sec = rec_step["seconds"]
            self.seconds = sec["compile"] + sec["run"]
            outs = ", ".join(f"{k} {v['sha256'][:12]}" for k, v in rec_step["outputs"].items())
            self.time_label.setText(f"{1e3 * self.seconds:.1f} ms (compile {1e3 * sec['compile']:.1f}, "
                                    f"run {1e3 * sec['run']:.1f}) → {outs}")
            self._header()
        a = next((v for k, v in arrays.items() if k.startswith(self.name + ".")), None)
        if a is None:
            self.curve.setData([], [])
            self.samples = 0
            self.note = ""
            self.plot.setTitle(None)
            return
        # the whole output, never a prefix: drawn as its min/max envelope when long (a spike stays
        # visible), every sample kept for the CSV export; the plot says so
        self.note = draw_whole(self.curve, a)
        self.plot.setTitle(note_title("", self.note) if self.note else None)
        self.samples = int(np.size(a))


class WorkflowView(QWidget):
    """A workflow file's notebook tab."""

    def __init__(self, path: str | Path, workers, *, ctx=None, out_dir: str | Path | None = None, background=None,
                 parent=None):
        # a StudioError with file:line:col on a bad file, raised before any Qt object is made (a kept
        # error would keep a half-made widget); each step's badge from the catalog (no device)
        path = Path(path).resolve()
        wf = outline(path, ctx, strict=False)
        super().__init__(parent)
        self.path = path
        self.workers, self.ctx = workers, ctx
        self.background = background              # a million-sample CSV is written off the GUI thread
        self.wf = wf
        # never beside the file (a shipped example lies in the install): the user's output folder
        self.out_dir = Path(out_dir) if out_dir is not None else user_outputs(wf.name)
        self.job = None
        self.result = None                        # the last run's WorkflowRunReport (services/workflows.py)
        self.train_result = None                  # the last training's report (a TrainReport, or data-parallel's dict)
        self.losses: list[float] = []
        self.error_text = ""

        outer = QVBoxLayout(self)
        bar = QHBoxLayout()
        self.run_button = QPushButton("Run all")
        self.run_button.setToolTip("run every step on the device, in order (the record pins every op by hash)")
        self.run_button.clicked.connect(lambda: self.run())
        self.train_button = QPushButton("Train")
        self.train_button.setToolTip("run the workflow's [train] section: steps of the optimizer, the loss plotted "
                                     "as it goes" if self.wf.trains else "this workflow has no [train] section")
        self.train_button.setEnabled(self.wf.trains)
        self.train_button.clicked.connect(lambda: self.train())
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("stop the run (its worker is restarted)")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        self.allow_box = QCheckBox("Allow unverified for this run")
        self.allow_box.setToolTip("run ops without a valid conformance receipt on this GPU; the record says so")
        self.prove_box = QCheckBox("Prove missing receipts first")
        self.prove_box.setChecked(True)           # the first Run all of a fresh install proves, then runs
        self.prove_box.setToolTip("conformance for ops without a receipt here (training: also gradcheck of the "
                                  "declared VJPs on the way to the loss), as `--prove` does")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setTextVisible(False)
        self.progress.setToolTip("steps done, of the workflow's steps")
        for w in (self.run_button, self.train_button, self.stop_button):
            bar.addWidget(w)
        self.progress.setMinimumWidth(48)
        bar.addWidget(self.progress, 1)
        outer.addLayout(bar)
        boxes = QHBoxLayout()                   # the run's options on a row of their own: the tab stays
        boxes.addWidget(self.prove_box)         # narrow enough for a 1024 px window with a tool dock open
        boxes.addWidget(self.allow_box)
        boxes.addStretch(1)
        outer.addLayout(boxes)
        self.status = QLabel(f"{self.wf.name}: {len(self.wf.steps)} steps")
        self.status.setWordWrap(True)
        outer.addWidget(self.status)
        self.out_label = QLabel(f"outputs go to <code>{self.out_dir}</code>")
        self.out_label.setToolTip("the run's data files, plots and provenance record are written here "
                                  "(your Scellis folder), never beside a shipped workflow")
        self.out_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.out_label.setWordWrap(True)
        outer.addWidget(self.out_label)

        split = QSplitter()
        cells_host = QWidget()
        cells_lay = QVBoxLayout(cells_host)
        self.cells: list[StepCell] = []
        for step in self.wf.steps:
            cell = StepCell(self, step.name, step, step.badge)
            cells_lay.addWidget(cell)
            self.cells.append(cell)
        cells_lay.addStretch(1)
        fit_column(cells_host)                  # labels wrap, forms put a long row under its label
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(cells_host)
        split.addWidget(scroll)
        side = QWidget()
        side_lay = QVBoxLayout(side)
        side_lay.addWidget(QLabel("Provenance record"))
        self.provenance = QPlainTextEdit()
        self.provenance.setReadOnly(True)
        self.provenance.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.provenance.setToolTip("the provenance record of the last run: every op by hash, inputs and outputs")
        side_lay.addWidget(self.provenance, 2)
        if self.wf.data_parallel:               # per epoch: the training loss and the held-out accuracy
            self.loss_plot = _plot("training loss and held-out accuracy", "epoch", "loss, accuracy", x_units=None)
            self.loss_plot.addLegend()
            self.accuracy_curve = self.loss_plot.plot([], [], pen=pg.mkPen("#00798c", width=2), symbol="s",
                                                      symbolSize=5, name="held-out accuracy")
        else:
            self.loss_plot = _plot("training loss", "training step", "loss", x_units="step", y_units="MSE, log scale")
            self.loss_plot.setLogMode(y=True)
        self.loss_curve = self.loss_plot.plot([], [], pen=pg.mkPen("#d62728", width=2), symbol="o", symbolSize=4,
                                              name="loss")
        self.parallel = ParallelRun(self)       # data-parallel training: owners on Dask (parallel_training.py)
        self.parallel.step.connect(self._parallel_step)
        self.parallel.epoch.connect(self._parallel_epoch)
        self.parallel.note.connect(self._note)
        self.parallel.done.connect(self._parallel_done)
        self.parallel.failed.connect(self._failed)
        self.epochs: list = []
        loss_box = plot_with_export(self.loss_plot, "training_loss")
        loss_box.setVisible(self.wf.trains)
        side_lay.addWidget(loss_box, 1)
        split.addWidget(side)
        outer.addWidget(split, 1)

    def cell(self, name: str) -> StepCell:
        return next(c for c in self.cells if c.name == name)

    # ------------------------------------------------------------------ jobs
    def _start(self, text: str) -> None:
        self.run_button.setEnabled(False)
        self.train_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.progress.setRange(0, 0)
        self.status.setText(text)
        self.started = time.perf_counter()
        self.phase = None                     # "proving" (a missing receipt earned first), then "running"
        self.proving = (0, 1)                 # (this proof's index, how many)
        self.bar_value = 0
        self.proved_first = False
        self.phase_text = ""

    def _end(self, text: str) -> None:
        self.run_button.setEnabled(True)
        self.train_button.setEnabled(self.wf.trains)
        self.stop_button.setEnabled(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.progress.setTextVisible(False)
        self.status.setText(text)

    def _note(self, e) -> None:
        """The worker says what it does now: proving a missing receipt (which op, for which step), or
        running the steps."""
        if not isinstance(e, dict):
            return
        if e.get("kind") == "proving":
            self.phase = "proving"
            self.proved_first = True
            self.proving = (int(e["index"]), max(1, int(e["total"])))
            step = f" for step {e['step']}" if e.get("step") else ""
            self.phase_text = (f"proving {e['op']}{step} ({e['index'] + 1} of {e['total']}): conformance on "
                               "this GPU, to earn its missing receipt")
            self.status.setText(self.phase_text + "…")
            self._bar(0.0)
        elif e.get("kind") == "running":
            proved = e.get("proved", 0)
            self.phase = "running"
            self.phase_text = (f"running the steps (receipts earned for {proved} op(s) in "
                               f"{e.get('proving_s', 0):.1f} s)" if proved else "running the steps")
            self.status.setText(self.phase_text + "…")
            self._bar(0.0)

    def _bar(self, part: float) -> None:
        """One bar for the whole run, never going back: proving (when a receipt is missing) fills the
        first PROVE_SHARE of it, op by op; the steps the rest."""
        part = min(max(part, 0.0), 1.0)
        if self.phase == "proving":
            k, n = self.proving
            frac = PROVE_SHARE * (k + part) / n
        else:
            base = PROVE_SHARE if self.proved_first else 0.0
            frac = base + (1.0 - base) * part
        self.bar_value = max(self.bar_value, int(round(BAR_UNITS * frac)))
        self.progress.setRange(0, BAR_UNITS)
        self.progress.setValue(self.bar_value)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%p%" + (" — proving" if self.phase == "proving" else ""))

    def _progress(self, done: int, total: int) -> None:
        if total:
            self._bar(done / total)

    def _live_loss(self, step: int, loss: float) -> None:
        """A training step's loss, as it arrives from the worker: the curve grows while training runs."""
        self.losses.append(loss)
        self.loss_curve.setData(np.arange(1, len(self.losses) + 1), np.maximum(self.losses, 1e-30))

    def _wire(self, job, on_ok) -> None:
        self.job = job
        job.progress.connect(self._progress)
        job.note.connect(self._note)
        job.value.connect(self._live_loss)
        job.succeeded.connect(on_ok)
        job.failed.connect(self._failed)
        job.cancelled.connect(lambda: self._end("stopped: the worker was cancelled (it restarts for the next run)"))

    def run(self, until: str | None = None):
        """Run all (or up to ``until`` and what it needs) in the worker's run lane."""
        if self.job is not None and self.job.active:
            return self.job
        allow = self.allow_box.isChecked()
        self._start(f"running {self.wf.name}" + (f" up to {until}" if until else "") + "…")
        job = self.workers.submit("run", Kind.WORKFLOW_RUN, path=str(self.path), out_dir=str(self.out_dir),
                                  allow_unverified=allow, prove=self.prove_box.isChecked(), until=until,
                                  all_outputs=True, budget_s=600.0 if self.prove_box.isChecked() else None)
        self._wire(job, self._ran)
        return job

    def _ran(self, r) -> None:
        """A run's report (services/workflows.py's WorkflowRunReport)."""
        self.result = r
        arrays = r.arrays or {}
        steps = {s["name"]: s for s in r.record["steps"]}
        for c in self.cells:
            c.show_result(steps.get(c.name), arrays)
        self.provenance.setPlainText("\n".join(r.text_lines() + [f"record    {r.record_path}"]))
        # the time the user waited, proving included, and where it went
        wall = r.wall_seconds or {"total": time.perf_counter() - self.started, "proving": 0.0,
                                  "steps": r.record["seconds"].get("total", 0.0)}
        where = (f" (proving missing receipts {wall['proving']:.1f} s, the steps {wall['steps']:.2f} s)"
                 if wall["proving"] else "")
        self._end(f"{r.status}: {len(steps)} step(s) in {wall['total']:.1f} s{where}; record {r.record_path}")

    def _failed(self, err) -> None:
        text = err.format() if hasattr(err, "format") else str(err)
        self._end("")
        extra = ""
        if "no valid conformance receipt" in text:            # the plan's refusal (plan.require_verified)
            extra = ("<br><b>Tick “Prove missing receipts first” and run again</b> (or run Conformance in the "
                     "op's tab). “Allow unverified for this run” runs it unproven: the record says so.")
            self.prove_box.setStyleSheet("font-weight: bold")       # the way forward, not the way around
        self.status.setText(error_html(err) + extra)
        self.error_text = text

    def train(self):
        if self.job is not None and self.job.active:
            return self.job
        if self.wf.data_parallel:
            return self._train_parallel()
        self.losses = []
        self.loss_curve.setData([], [])
        self._start(f"training {self.wf.name}…")
        job = self.workers.submit("run", Kind.TRAIN, path=str(self.path), out_dir=str(self.out_dir),
                                  allow_unverified=self.allow_box.isChecked(), prove=self.prove_box.isChecked(),
                                  budget_s=600.0)
        self._wire(job, self._trained)
        return job

    def _trained(self, r) -> None:
        """A training's report (services/workflows.py's TrainReport)."""
        # the curve grew live from the progress messages; the result's losses are the record's, exactly
        self.train_result = r
        self.losses = [float(x) for x in r.losses]
        self.loss_curve.setData(np.arange(1, len(self.losses) + 1), np.maximum(self.losses, 1e-30))
        self.provenance.setPlainText("\n".join(r.text_lines()))
        self._end(f"trained: {r.status}, final loss {r.final_loss:.4g}")

    # ------------------------------------------------------------------ data-parallel training
    def _train_parallel(self):
        if self.parallel.active:
            return self.parallel
        self.epochs = []
        self.error_text = ""
        self.loss_curve.setData([], [])
        self.accuracy_curve.setData([], [])
        self._start(f"training {self.wf.name} data-parallel (owners on Dask)…")
        self.parallel.start(self.path, self.out_dir, prove=self.prove_box.isChecked(),
                            allow_unverified=self.allow_box.isChecked())
        return self.parallel

    def _parallel_step(self, rec) -> None:
        self.status.setText(data_parallel.step_line(rec))

    def _parallel_epoch(self, ep) -> None:
        self.epochs.append(ep)
        x = np.array([e.epoch for e in self.epochs], float)
        self.loss_curve.setData(x, np.array([e.loss for e in self.epochs]))
        self.accuracy_curve.setData(x, np.array([e.accuracy for e in self.epochs]))

    def _parallel_done(self, r: dict) -> None:
        self.train_result = r
        rec = r["record"]
        last = rec["epochs"][-1] if rec["epochs"] else None
        lines = [data_parallel.epoch_line(e) for e in r["result"].epochs] + [rec["divisor"]]
        if rec["warning"]:
            lines.append(f"warning: {rec['warning']}")
        lines += [f"params    sha256 {rec['params_sha256']}", f"record    {r['record_path']}"]
        self.provenance.setPlainText("\n".join(lines))
        acc = f", held-out accuracy {last['accuracy'] * 100:.1f} %" if last else ""
        self._end(f"trained: {rec['status']}, {len(rec['steps'])} steps on {rec['owners']} owners{acc}")

    def stop(self) -> None:
        if self.parallel.active:
            self.parallel.stop()
            return
        if self.job is not None and self.job.active:
            self.workers.cancel(self.job)
