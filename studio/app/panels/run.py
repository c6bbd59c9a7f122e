"""Run cell: pick an input (the synthetic spiky signal or a .npy/.csv file), run the op on the
device through the worker, and plot input against output — smooth at 10^6 samples through
pyqtgraph's peak downsampling and clip-to-view. Export the plot (PNG/SVG) and the data."""
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

from ..export import plot_with_export
from ..theme import style_plot
from .job import JobPanel, error_html

SPIKY = "core/signal/spiky_signal@1"
SOURCES = ["synthetic spiky signal", ".npy / .csv file"]


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


class RunPanel(JobPanel):
    title = "Run"
    key = "run"
    runRequested = Signal(dict)      # {"source": "spiky"|"file", "n", "seed", "file", "params": {...}}
    cancelRequested = Signal()
    exportDataRequested = Signal()

    def __init__(self, number: int, parent=None):
        super().__init__(number, parent)
        form = QFormLayout()
        src_row = QHBoxLayout()
        self.source = QComboBox()
        self.source.addItems(SOURCES)
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
        self.source.setToolTip("what the op runs on: the builtin spiky signal generated on the device, or a file")
        self.n.setToolTip("how many samples of the spiky signal to generate")
        self.seed.setToolTip("the spiky signal's random seed (the same seed gives the same signal)")
        self.file.setToolTip("a 1-D .npy or .csv file with the input signal")
        self.browse.setToolTip("choose the input file")
        for w in (self.source, self.n, self.seed, self.file, self.browse):
            src_row.addWidget(w)
        form.addRow("input", src_row)
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
        self.info = QLabel("A kernel with no receipt runs on your own device from its first compile.")
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
        self.source.currentIndexChanged.connect(self._source_changed)
        self.run_button.clicked.connect(lambda: self.runRequested.emit(self.request()))
        self.cancel_button.clicked.connect(self.cancelRequested.emit)
        self.export_data.clicked.connect(self.exportDataRequested.emit)
        self._source_changed()

    def _source_changed(self) -> None:
        spiky = self.source.currentIndex() == 0
        self.n.setVisible(spiky)
        self.seed.setVisible(spiky)
        self.file.setVisible(not spiky)
        self.browse.setVisible(not spiky)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Input signal", "", "Arrays (*.npy *.csv)")
        if path:
            self.file.setText(path)

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
        return {"source": "spiky" if self.source.currentIndex() == 0 else "file", "n": self.n.value(),
                "seed": self.seed.value(), "file": self.file.text().strip(),
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

    def show_result(self, x: np.ndarray, y: np.ndarray, label: str, seconds: float) -> None:
        """Plot input and output. A million samples take a few tens of ms to hand to pyqtgraph, so the
        two curves go in two turns of the event loop: the GUI thread never holds on for long."""
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
            self.stopped("done", "ok")
            self.export_plot.setEnabled(True)
            self.export_data.setEnabled(True)
            self.info.setText(f"{x.size:,} samples in, {y.size:,} out; the op ran on the device in {seconds:.2f} s "
                              "(the plot shows the first samples — drag or zoom out: the curves are "
                              "peak-downsampled and clipped to the view)")
        QTimer.singleShot(0, second)
