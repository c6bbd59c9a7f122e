"""The learner panel (issue 16 point 8, docs/learner.md): open a learner (a learner.toml or a shipped
one), choose the owners and the steps, run it — owners on Dask, the same ``learn`` the CLI calls,
off the GUI thread — and watch the metric curve, the owners and their shares, and the agreement
check of every step (the owners' parameter-and-state hash, or the disagreement that stopped the
run). The final parameter hash is shown at the end."""
from __future__ import annotations

import threading
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...engine.errors import StudioError
from ...engine.services import learning
from ..widgets.theme import style_plot


class _Relay(QObject):
    """Carries the run's callbacks (on the run's thread) to the GUI thread."""
    step = Signal(object)
    event = Signal(str)
    done = Signal(object)
    failed = Signal(str)


class LearnerPanel(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.system = None                              # the learner as loaded (services/learning.py)
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()
        self.result = None
        self.relay = _Relay()
        self.relay.step.connect(self.add_step)
        self.relay.event.connect(self._event)
        self.relay.done.connect(self._done)
        self.relay.failed.connect(self._failed)
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.choice = QComboBox()
        self.shipped = learning.shipped()
        self.choice.addItems(list(self.shipped))
        self.choice.setToolTip("a shipped learner (resources/learners)")
        self.choice.currentTextChanged.connect(lambda n: self.open(self.shipped[n]) if n else None)
        top.addWidget(self.choice, 1)
        self.browse = QPushButton("Open…")
        self.browse.setToolTip("open a learner.toml")
        self.browse.clicked.connect(self._browse)
        top.addWidget(self.browse)
        lay.addLayout(top)
        row = QHBoxLayout()
        row.addWidget(QLabel("owners"))
        self.owners = QSpinBox()
        self.owners.setRange(0, 16)
        self.owners.setSpecialValueText("file")
        self.owners.setToolTip("0: the file's owners and shares; N: N contiguous even shares")
        self.owners.valueChanged.connect(lambda _: self._warn())
        row.addWidget(self.owners)
        row.addWidget(QLabel("steps"))
        self.steps = QSpinBox()
        self.steps.setRange(1, 100000)
        row.addWidget(self.steps)
        self.run_button = QPushButton("Learn")
        self.run_button.setToolTip("run the learner: one Dask worker process per owner")
        self.run_button.clicked.connect(self.run)
        row.addWidget(self.run_button)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("end the run after the step in flight")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        row.addWidget(self.stop_button)
        lay.addLayout(row)
        self.info = QLabel()
        self.info.setWordWrap(True)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.info)
        self.warning = QLabel()                          # the bf16 divisor warning (docs/learner.md "bf16 combine")
        self.warning.setWordWrap(True)
        self.warning.setProperty("warn", True)           # the warning colour, from the app style sheet
        self.warning.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.warning)
        from ...figures import plot_widget
        self.plot = plot_widget(title="|mean contribution| per step")
        self.plot.setMinimumHeight(140)
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setLabel("bottom", "step")
        self.plot.setLabel("left", "|mean contribution|")
        style_plot(self.plot)
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#1f77b4", width=2), symbol="o", symbolSize=5)
        lay.addWidget(self.plot, 2)
        self.owner_table = QTableWidget(0, 3)
        self.owner_table.setHorizontalHeaderLabels(["owner", "worker", "samples"])
        self.owner_table.horizontalHeader().setStretchLastSection(True)
        lay.addWidget(self.owner_table, 1)
        self.steps_table = QTableWidget(0, 4)
        self.steps_table.setHorizontalHeaderLabels(["step", "metric", "agreement", "parameter-and-state hash"])
        self.steps_table.horizontalHeader().setStretchLastSection(True)
        lay.addWidget(self.steps_table, 2)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.status)
        self.xs: list[int] = []
        self.ys: list[float] = []
        if self.choice.count():
            self.open(self.shipped[self.choice.currentText()])

    # ------------------------------------------------------------------ the system
    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open learner", "", "Learner (learner.toml *.toml)")
        if path:
            self.open(path)

    def open(self, path):
        """The learner at ``path`` (its system), or None with the error shown."""
        try:
            self.system = learning.open_learner(Path(path))      # a local cluster: the owners capped
        except StudioError as e:
            self.status.setText(f"error: {e.format()}")
            return None
        s = self.system
        self.steps.setValue(s.steps)
        self._owners(s, [])
        self._clear()
        self.status.setText("")
        self._warn()
        return s

    def _warn(self) -> None:
        """The system as it will run on the owners chosen (the file's, or N even shares): its combine
        order and contract (a per-owner contract names the split), and a bf16 learner's divisor
        warning."""
        text = None
        if self.system is not None:
            s = self.system
            placed = learning.place(s, self.owners.value() or None)
            self.info.setText(f"<b>{s.name}</b> — {s.summary}<br>k = {s.k}, s = {s.s}, m = {s.m}, "
                              f"{s.samples.shape[0]} samples, rate {float(s.rate):g}<br>combine "
                              f"{placed.order}<br>contract {placed.contract[:16]}")
            text = placed.warning
        self.warning.setText(f"⚠ {text}" if text else "")

    def _owners(self, system, addresses: list[str]) -> None:
        shares = system.shares
        self.owner_table.setRowCount(len(shares))
        for o, n in enumerate(shares):
            for c, text in enumerate((str(o), addresses[o] if o < len(addresses) else "—", str(n))):
                self.owner_table.setItem(o, c, QTableWidgetItem(text))

    def _clear(self) -> None:
        self.xs, self.ys = [], []
        self.curve.setData([], [])
        self.steps_table.setRowCount(0)

    # ------------------------------------------------------------------ a run
    def run(self) -> None:
        if self.system is None or (self.thread is not None and self.thread.is_alive()):
            return
        system, owners, steps = self.system, self.owners.value() or None, self.steps.value()
        self._owners(learning.place(system, owners).system, [])
        self._clear()
        self.run_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.stopping.clear()
        self.result = None
        self.status.setText(f"starting {owners or len(system.owners)} owner(s) on a local Dask cluster…")
        relay, stopping = self.relay, self.stopping

        def work():
            try:
                out = learning.run(system, owners=owners, steps=steps, on_step=relay.step.emit,
                                   on_event=relay.event.emit, stop=stopping)
            except StudioError as e:
                relay.failed.emit("error: " + e.format())
            except Exception as e:                        # noqa: BLE001 - shown, never a crash of the GUI
                relay.failed.emit(f"error: {type(e).__name__}: {e}")
            else:
                if out.disagreement is not None:
                    relay.failed.emit("stopped: " + out.disagreement.format())
                else:
                    relay.done.emit(out.result)

        self.thread = threading.Thread(target=work, name="learner", daemon=True)
        self.thread.start()

    def add_step(self, rec) -> None:
        """One step's record: the curve, the owners (their workers and shares), the agreement."""
        while self.xs and self.xs[-1] >= rec.step:      # a rollback after a fault: the steps again
            self.xs.pop()
            self.ys.pop()
            self.steps_table.removeRow(self.steps_table.rowCount() - 1)
        self.xs.append(rec.step)
        self.ys.append(rec.metric)
        self.curve.setData(self.xs, self.ys)
        if self.system is not None:
            self.owner_table.setRowCount(len(rec.shares))
            for o, n in enumerate(rec.shares):
                for c, text in enumerate((str(o), rec.owners[o], str(n))):
                    self.owner_table.setItem(o, c, QTableWidgetItem(text))
        r = self.steps_table.rowCount()
        self.steps_table.insertRow(r)
        agree = f"✓ {len(rec.hashes)} owners agree" if rec.agreed else "✗ DISAGREE"
        for c, text in enumerate((str(rec.step), f"{rec.metric:.6e}", agree, rec.hashes[0][:16])):
            self.steps_table.setItem(r, c, QTableWidgetItem(text))
        self.status.setText(f"step {rec.step}: {rec.seconds:.3f} s")

    def stop(self) -> None:
        self.stopping.set()
        self.status.setText("stopping after the step in flight…")

    def _event(self, text: str) -> None:
        self.status.setText(text)

    def _done(self, res) -> None:
        self.result = res
        self.run_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.status.setText(f"done: {res.step} steps on {len(res.system.owners)} owner(s); final parameter hash "
                            f"{res.params_hash}")

    def _failed(self, text: str) -> None:
        self.run_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.status.setText(text)


def install_learner(window, layout) -> QDockWidget:
    """The Learner dock (hidden until asked for) and Tools ▸ Learner."""
    window.learner_dock = window.docks.add_tool_dock("Learner", "learner_dock", LearnerPanel, layout)
    return window.learner_dock
