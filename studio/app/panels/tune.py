"""The Tune panel (issue 30, docs/performance.md "Tuning per GPU"): choose an op with tunable
overrides, its parameter class and the sizes, and see every candidate — proven by the conformance
corpus, then timed — as a plot of time per candidate, the failing ones marked at zero in red
(never timed, never chosen), the winner in its own colour. The work runs in a device worker of its
own, off the GUI thread, through the same ``tune`` use case as ``scellis tune``; the winner is
written to the sealed tuning record that later runs on this GPU profile use."""
from __future__ import annotations

import threading

import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.errors import StudioError
from ...engine.services.requests import Kind
from ...engine.services.tuning import TuneReport
from ..widgets.theme import style_plot

DEFAULT_OP = "user/demo/windowed_median_fast@1"
PROVEN, WINNER, FAILED = "#1f77b4", "#2ca02c", "#d62728"


def parse_params(text: str) -> dict:
    """``w=7, k=2`` -> {"w": 7, "k": 2}; a StudioError names what is wrong."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        try:
            out[name.strip()] = int(value) if sep else None
        except ValueError:
            try:
                out[name.strip()] = float(value)
            except ValueError:
                out[name.strip()] = None
        if not sep or not name.strip() or out[name.strip()] is None:
            raise StudioError(f"parameters: {part!r} is not NAME=NUMBER", field="params", hint="e.g. w=7")
    return out


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.replace(",", " ").split()]
    except ValueError:
        raise StudioError(f"sizes: {text!r} is not a list of whole numbers", field="sizes",
                          hint="e.g. 65536, 1048576") from None
    if not sizes or any(not 1 <= s <= 1 << 28 for s in sizes):
        raise StudioError("sizes: give one or more sizes in [1, 268435456]", field="sizes", hint="e.g. 65536, 1048576")
    return sizes


class _Relay(QObject):
    done = Signal(object)
    failed = Signal(str)


class TunePanel(QWidget):
    def __init__(self, parent=None, *, client_factory=None):
        super().__init__(parent)
        self._factory = client_factory
        self.thread: threading.Thread | None = None
        self.result: TuneReport | None = None
        self.relay = _Relay()
        self.relay.done.connect(self.show_result)
        self.relay.failed.connect(self._failed)
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.op = QLineEdit(DEFAULT_OP)
        self.op.setToolTip("an op id or a package folder whose bindings declare `tune [..]`")
        top.addWidget(self.op, 2)
        top.addWidget(QLabel("params"))
        self.params = QLineEdit("w=7")
        self.params.setToolTip("the parameter class to tune for (empty: class *)")
        top.addWidget(self.params, 1)
        top.addWidget(QLabel("sizes"))
        self.sizes = QLineEdit("65536, 1048576")
        self.sizes.setToolTip("representative sizes of the swept dimension")
        top.addWidget(self.sizes, 1)
        self.run_button = QPushButton("Tune")
        self.run_button.setToolTip("prove every candidate by conformance, then time the proven ones")
        self.run_button.clicked.connect(self.run)
        top.addWidget(self.run_button)
        lay.addLayout(top)
        from ...figures import plot_widget
        self.plot = plot_widget(title="time per candidate (failing candidates: red, never timed)")
        self.plot.setMinimumHeight(160)
        self.plot.showGrid(x=False, y=True, alpha=0.2)
        self.plot.setLabel("left", "ms (sum over sizes)")
        style_plot(self.plot)
        lay.addWidget(self.plot, 2)
        self.status = QLabel("choose an op with tunable overrides")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        lay.addWidget(self.text, 1)
        self.bars: list[dict] = []          # what the plot shows, per candidate: label, ms, colour

    def _client(self):
        if self._factory is not None:
            return self._factory()
        from ...engine.worker.client import WorkerClient
        return WorkerClient(budget_s=1800.0)

    def run(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        try:
            params, sizes = parse_params(self.params.text()), parse_sizes(self.sizes.text())
        except StudioError as e:
            self._failed(e.format())
            return
        op = self.op.text().strip()
        self.run_button.setEnabled(False)
        self.status.setText(f"tuning {op}: every candidate is proven first…")

        def work():
            try:
                with self._client() as client:
                    self.relay.done.emit(client.call(Kind.TUNE, target=op, params=params, sizes=sizes))
            except StudioError as e:
                self.relay.failed.emit(e.format())
            except Exception as e:  # noqa: BLE001 - a worker that died: said, not raised into Qt
                self.relay.failed.emit(f"{type(e).__name__}: {e}")

        self.thread = threading.Thread(target=work, daemon=True, name="tune")
        self.thread.start()

    def show_result(self, data: TuneReport) -> None:
        """Plot a ``tune`` result (services.tuning.TuneReport): a bar per proven candidate, a red mark at
        zero per failing one; its lines below."""
        self.result = data
        self.run_button.setEnabled(True)
        self.bars = []
        for c in data.candidates:
            label = ", ".join(f"{k}={v}" for k, v in c.values.items())
            if c.proven:
                colour = WINNER if c.values == data.winner else PROVEN
                self.bars.append({"label": label, "ms": sum(c.seconds) * 1e3, "colour": colour, "failed": False})
            else:
                self.bars.append({"label": label + " (fails)", "ms": 0.0, "colour": FAILED, "failed": True})
        self.plot.clear()
        xs = list(range(len(self.bars)))
        ok = [i for i in xs if not self.bars[i]["failed"]]
        if ok:
            self.plot.addItem(pg.BarGraphItem(x=ok, height=[self.bars[i]["ms"] for i in ok], width=0.6,
                                              brushes=[self.bars[i]["colour"] for i in ok]))
        bad = [i for i in xs if self.bars[i]["failed"]]
        if bad:
            self.plot.plot(bad, [0.0] * len(bad), pen=None, symbol="x", symbolSize=14,
                           symbolBrush=FAILED, symbolPen=pg.mkPen(FAILED, width=2))
        self.plot.getAxis("bottom").setTicks([[(i, b["label"]) for i, b in enumerate(self.bars)]])
        self.text.setPlainText("\n".join(data.lines()))
        winner = data.winner
        failing = sum(b["failed"] for b in self.bars)
        self.status.setText((f"winner {', '.join(f'{k}={v}' for k, v in winner.items())}" if winner
                             else "no candidate passes conformance: nothing recorded")
                            + (f"; {failing} candidate(s) fail conformance and are never used" if failing else ""))

    def _failed(self, message: str) -> None:
        self.run_button.setEnabled(True)
        self.status.setText("tuning failed")
        self.text.setPlainText(message)


def install_tune(window, layout) -> QDockWidget:
    """The Tune dock (hidden until asked for) and Tools ▸ Tune kernel."""
    window.tune_dock = window.docks.add_tool_dock("Tune", "tune_dock", TunePanel, layout)
    return window.tune_dock
