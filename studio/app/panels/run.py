"""Run cell: pick every input the signature declares (the synthetic spiky signal, a .npy/.csv
file, or the output of another op), run the op on the device through the worker — proven or not:
a result with no valid receipt behind it is labelled "not proven" in the plot and the status line
— or run its reference alone (before any kernel exists), and plot input against output, smooth at
10^6 samples through pyqtgraph's peak downsampling and clip-to-view. Export the plot and data."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QWidget,
)

from ...engine.services.trial import NOT_PROVEN, RunProof
from ..widgets.export import plot_with_export
from ..widgets.theme import style_plot
from ..bridge.trying import SPIKY  # noqa: F401 - the builtin signal generator (the Run cell's default input)
from .job import JobPanel, error_html

SOURCES = ["synthetic spiky signal", ".npy / .csv file", "output of another op"]
SOURCE_KEYS = ("spiky", "file", "op")
WHAT = ["the kernel, on the device", "the reference alone (Python)"]
INFO = ("Runs on your own device from the first compile, proven or not: an output with no valid "
        "receipt behind it is marked “not proven”.")


X_LABEL, X_UNITS = "sample", "index"
Y_LABEL, Y_UNITS = "value", "signal units"


def make_plot(title: str = "") -> pg.PlotWidget:
    from ...figures import label_axes, plot_widget
    w = plot_widget(title=title)
    w.setObjectName("run_plot")
    w.addLegend(offset=(10, 10))
    w.showGrid(x=True, y=True, alpha=0.25)
    label_axes(w, X_LABEL, Y_LABEL, x_units=X_UNITS, y_units=Y_UNITS)
    style_plot(w)
    w.setMinimumHeight(300)
    # plot-wide, so every curve added later gets it too (PlotItem.addItem applies its own settings)
    w.getPlotItem().setDownsampling(auto=True, mode="peak")
    w.getPlotItem().setClipToView(True)
    w.getPlotItem().getViewBox().setMouseEnabled(x=True, y=False)     # a time series: the wheel zooms time
    return w


def limit_to_data(plot: pg.PlotWidget, n: int) -> None:
    """Zooming out stops at the data: samples 0 … n−1 (the y range follows what is in view)."""
    last = float(max(n - 1, 1))
    plot.getPlotItem().getViewBox().setLimits(xMin=-0.5, xMax=last + 0.5, maxXRange=last + 1.0)


def add_curve(plot: pg.PlotWidget, name: str, colour: str, width: float = 1) -> pg.PlotDataItem:
    """An empty curve that peak-downsamples to the screen and draws only what is in view."""
    item = pg.PlotDataItem(name=name, pen=pg.mkPen(colour, width=width), skipFiniteCheck=True)
    plot.addItem(item)
    return item


class InputRow(QWidget):
    """Where one input of the signature comes from: the spiky signal (n, seed), a file, or the output
    of another op (its id; it runs on the spiky signal of n samples, at its default parameters)."""

    def __init__(self, name: str, parent=None):
        super().__init__(parent)
        self.name = name
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.source = QComboBox()
        self.source.addItems(SOURCES)
        self.source.setObjectName(f"run_source_{name}")
        self.n = QSpinBox()
        self.n.setRange(1, 16_777_216)
        self.n.setValue(1_000_000)
        self.n.setGroupSeparatorShown(True)
        self.n.setPrefix("n = ")
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setValue(1)
        self.seed.setPrefix("seed ")
        self.file = QLineEdit()
        self.file.setPlaceholderText("a 1-D .npy or .csv file")
        self.browse = QPushButton("…")
        self.browse.clicked.connect(self._browse)
        self.op = QLineEdit()
        self.op.setPlaceholderText("an op id, e.g. user/demo/windowed_median@1")
        self.source.setToolTip(f"where {name} comes from: the builtin spiky signal generated on the device, a "
                               "file, or the output of another op")
        self.n.setToolTip("how many samples of the spiky signal to generate")
        self.seed.setToolTip("the spiky signal's random seed (the same seed gives the same signal)")
        self.file.setToolTip("a 1-D .npy or .csv file with the input signal")
        self.browse.setToolTip("choose the input file")
        self.op.setToolTip("another op of the catalog: it runs on the spiky signal (n, seed) at its default "
                           "parameters, and its first output feeds this input")
        for w in (self.source, self.n, self.seed, self.file, self.browse, self.op):
            row.addWidget(w)
        self.source.currentIndexChanged.connect(self._source_changed)
        self._source_changed()

    def _source_changed(self) -> None:
        key = SOURCE_KEYS[self.source.currentIndex()]
        self.n.setVisible(key in ("spiky", "op"))
        self.seed.setVisible(key in ("spiky", "op"))
        self.file.setVisible(key == "file")
        self.browse.setVisible(key == "file")
        self.op.setVisible(key == "op")

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, f"Input {self.name}", "", "Arrays (*.npy *.csv)")
        if path:
            self.file.setText(path)

    def request(self) -> dict:
        return {"source": SOURCE_KEYS[self.source.currentIndex()], "n": self.n.value(), "seed": self.seed.value(),
                "file": self.file.text().strip(), "op": self.op.text().strip()}


class RunPanel(JobPanel):
    title = "Run"
    key = "run"
    runRequested = Signal(dict)      # {"what", "inputs": {name: {"source", "n", "seed", "file", "op"}}, "params"}
    cancelRequested = Signal()
    exportDataRequested = Signal()

    def __init__(self, number: int, parent=None):
        super().__init__(number, parent)
        form = QFormLayout()
        self.what = QComboBox()
        self.what.addItems(WHAT)
        self.what.setObjectName("run_what")
        self.what.setToolTip("what runs: the kernel on the device (proven or not), or the reference alone — "
                             "which needs no kernel")
        form.addRow("run", self.what)
        self.form = form
        self.rows: dict[str, InputRow] = {}
        self.set_inputs(["x"])
        self.params_row = QHBoxLayout()
        self.params_box = QWidget()
        self.params_box.setLayout(self.params_row)
        form.addRow("params", self.params_box)
        self.body_layout.addLayout(form)
        bar = QHBoxLayout()
        self.run_button = QPushButton("▶ Run on device")
        self.run_button.setObjectName("run_run")
        self.cancel_button = QPushButton("■ Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setTextVisible(False)
        self.progress.setToolTip("busy while the signal is made and the op runs on the device")
        self.export_data = QPushButton("Export data…")
        self.export_data.setEnabled(False)
        self.export_data.setToolTip("save the output as .npy, or input and output as .csv with a header")
        self.run_button.setToolTip("run the op on the device on this input (Ctrl+Enter in this cell)")
        self.cancel_button.setToolTip("stop the run (its worker is restarted)")
        for w in (self.run_button, self.cancel_button):
            bar.addWidget(w)
        bar.addWidget(self.progress, 1)
        bar.addWidget(self.export_data)
        self.body_layout.addLayout(bar)
        self.info = QLabel(INFO)
        self.info.setWordWrap(True)
        self.info.setMinimumHeight(self.info.fontMetrics().lineSpacing() * 2 + 4)   # no relayout when it changes
        self.body_layout.addWidget(self.info)
        self.plot = make_plot()
        self.body_layout.addWidget(plot_with_export(self.plot, "run"))
        self.export_plot = self.plot.export_button
        self.export_plot.setEnabled(False)
        self.curve_in = add_curve(self.plot, "input", "#9aa5b1")
        self.curve_out = add_curve(self.plot, "output", "#d1495b", 1.5)
        self.param_spins: dict[str, QSpinBox] = {}
        self.data: dict[str, np.ndarray] = {}
        self.proven: bool | None = None
        self.run_button.clicked.connect(lambda: self.request_run())
        self.cancel_button.clicked.connect(self.cancelRequested.emit)
        self.export_data.clicked.connect(self.exportDataRequested.emit)

    def request_run(self) -> None:
        """Ask for a run on the chosen input (the ▶ button, Ctrl+Enter in this cell)."""
        self.runRequested.emit(self.request())

    def set_inputs(self, names: list[str]) -> None:
        """One row per input the signature declares (a row that stays keeps what the user chose). The
        first row's controls are also ``source``, ``n``, ``seed``, ``file``."""
        names = list(names) or ["x"]
        if names == list(self.rows):
            return
        old = self.rows
        for name, row in old.items():
            if name not in names:
                self.form.removeRow(row)
        rows = {}
        for i, name in enumerate(names):
            row = old.get(name)
            if row is None:
                row = InputRow(name)
                self.form.insertRow(1 + i, f"input {name}", row)
            rows[name] = row
        self.rows = rows
        first = next(iter(rows.values()))
        self.source, self.n, self.seed, self.file, self.browse = first.source, first.n, first.seed, first.file, first.browse

    def set_params(self, params: list[tuple[str, int, int, int]]) -> None:
        """(name, value, lo, hi) per signature param (spiky input aside)."""
        if [n for n, *_ in params] == list(self.param_spins):
            return
        while self.params_row.count():
            it = self.params_row.takeAt(0)
            if it.widget():
                it.widget().deleteLater()
        self.param_spins = {}
        for name, value, lo, hi in params:
            s = QSpinBox()
            s.setRange(lo, hi)
            s.setValue(value)
            s.setPrefix(f"{name} = ")
            s.setObjectName(f"run_param_{name}")
            s.setToolTip(f"the op's parameter {name} for this run ({lo} … {hi})")
            self.params_row.addWidget(s)
            self.param_spins[name] = s
        self.params_row.addStretch(1)

    def request(self) -> dict:
        inputs = {name: row.request() for name, row in self.rows.items()}
        first = next(iter(inputs.values()))
        return {"what": "reference" if self.what.currentIndex() == 1 else "kernel", "inputs": inputs,
                **{k: first[k] for k in ("source", "n", "seed", "file")},
                "params": {k: s.value() for k, s in self.param_spins.items()}}

    # ------------------------------------------------------------------ states
    def started(self, what: str) -> None:
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, 0)
        self.info.setText(what)
        self.set_status("running", "busy")

    def show_error(self, err) -> None:
        self.stopped("error", "error")
        self.info.setText(error_html(err))

    def set_proof(self, proven: bool) -> None:
        """Conformance just issued (or refused) a receipt: the line under the buttons says so until the
        next run (a run says again whether its own result is proven)."""
        if not self.run_button.isEnabled():
            return                                 # a run in flight says for itself
        if not proven:
            if not self.data:
                self.info.setText(INFO)
        elif self.data and self.proven is False:
            self.info.setText("This content has a valid conformance receipt now; the output shown is from an "
                              "earlier run, before it — run again for a proven result.")
        elif not self.data:
            self.info.setText("This content has a valid conformance receipt: a run inside its coverage is proven.")

    def show_result(self, x: np.ndarray, y: np.ndarray, label: str, seconds: float, *,
                    proof: RunProof | None = None, what: str = "kernel") -> None:
        """Plot input and output. A million samples take a few tens of ms to hand to pyqtgraph, so the
        two curves go in two turns of the event loop: the GUI thread never holds on for long.
        ``proof`` (the run's ``trial.RunProof``): a result with no valid receipt behind it says "not
        proven" in its curve's name, the plot's title (``RunProof.title``) and the status line."""
        proof = proof or RunProof(proven=False, why="")
        proven, why = proof.proven, proof.why
        self.proven = proven
        if what == "reference":
            label = f"{label} — reference"
        if not proven:
            label = f"{label} ({NOT_PROVEN})"
        self.plot.setTitle(proof.title())
        self.data = {"input": np.asarray(x), "output": np.asarray(y)}
        x = np.asarray(x, dtype=np.float32).reshape(-1)
        y = np.asarray(y, dtype=np.float32).reshape(-1)
        shift = max((x.size - y.size) // 2, 0)
        self.stopped("plotting", "busy")
        self.curve_out.setData([], [])
        self.curve_in.setData(x)
        limit_to_data(self.plot, max(x.size, shift + y.size))
        self.plot.setXRange(0, max(min(x.size, 2000), 1), padding=0.02)
        self.plot.setAutoVisible(y=True)
        self.plot.enableAutoRange(axis="y")

        def second():
            name = label + (f" (centred, +{shift})" if shift else "")
            self.curve_out.setData(np.arange(shift, shift + y.size, dtype=np.float64), y, name=name)
            legend = self.plot.getPlotItem().legend
            if legend is not None:
                legend.removeItem(self.curve_out)
                legend.addItem(self.curve_out, name)
            self.stopped("done", "ok" if proven else "warn")
            self.export_plot.setEnabled(True)
            self.export_data.setEnabled(True)
            where = "its reference ran on the CPU" if what == "reference" else "the op ran on the device"
            head = "proven: a valid receipt covers this run. " if proven else \
                f"<b>{NOT_PROVEN}</b>: {why}. " if why else f"<b>{NOT_PROVEN}</b>. "
            self.info.setText(f"{head}{x.size:,} samples in, {y.size:,} out; {where} in {seconds:.2f} s "
                              "(the plot shows the first samples — drag or zoom out: the curves are "
                              "peak-downsampled and clipped to the view)")
        QTimer.singleShot(0, second)
