"""The sharding panel (issue 17, docs/bf16.md): choose a workflow or a learner and a replica count,
and see each node classified — exact under sharding, rounded per replica — with what the device
(or the learner's own path) measured, and the divisor warning when the count is not a power of
two. The report runs in a device worker of its own, off the GUI thread, through the same
``shard_report`` use case as ``scellis shard-report``."""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...engine.errors import StudioError
from ...engine.resources import ROOT
from ...engine.services.requests import Kind

COLUMNS = ("node", "op", "under sharding", "verified", "measured")


def shipped() -> dict[str, Path]:
    """The shipped things a report makes sense of: the bf16 workflow and the learners."""
    from ...engine.services import learning
    out = {"workflow: bf16_conv": ROOT / "workflows" / "bf16_conv.toml"}
    for name, folder in learning.shipped().items():
        out[f"learner: {name}"] = folder
    return out


def measured(node: dict) -> str:
    """One line of what was measured at a workflow node."""
    parts = []
    for name, o in node.get("outputs", {}).items():
        if "replica_equals_shard" in o:
            eq = o["replica_equals_shard"]
            parts.append(f"{name}: {sum(eq)}/{len(eq)} replicas bit for bit")
        else:
            d, i = o["device"], o["den_f32"]
            parts.append(f"{name}: max {d['max_ulps']:.3g} ulp, mean {d['mean_ulps']:.3g} ulp, max rel {d['max_rel']:.3g}"
                         f" (rnd = id: {i['max']:g})")
    for name, d in node.get("divisor", {}).items():
        parts.append(f"{name}: divisor step fails on {d['fails']}/{d['elements']}")
    return "; ".join(parts) or node.get("kind", {}).get("why", "")


class _Relay(QObject):
    done = Signal(object)
    failed = Signal(str)


class ShardPanel(QWidget):
    def __init__(self, parent=None, *, client_factory=None):
        super().__init__(parent)
        self._factory = client_factory
        self.thread: threading.Thread | None = None
        self.report: dict | None = None
        self.relay = _Relay()
        self.relay.done.connect(self.show_report)
        self.relay.failed.connect(self._failed)
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.choice = QComboBox()
        self.paths = shipped()
        self.choice.addItems(list(self.paths))
        self.choice.setToolTip("a shipped workflow or learner; Open… for your own")
        top.addWidget(self.choice, 1)
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("a workflow .toml or a learner.toml")
        self.open_button.clicked.connect(self._open)
        top.addWidget(self.open_button)
        top.addWidget(QLabel("replicas"))
        self.replicas = QSpinBox()
        self.replicas.setRange(1, 4096)
        self.replicas.setValue(4)
        self.replicas.setToolTip("R: the batch is split into R equal shards")
        top.addWidget(self.replicas)
        self.prove_box = QCheckBox("prove missing receipts")
        self.prove_box.setChecked(True)          # as the workflow tab: the first report of a fresh install proves
        self.prove_box.setToolTip("a workflow: run conformance first for its ops without a receipt on this GPU "
                                  "(as `scellis workflow run --prove`), then report")
        top.addWidget(self.prove_box)
        self.unverified = QCheckBox("allow unverified")
        self.unverified.setToolTip("run ops without a conformance receipt on this GPU profile; the rows say "
                                   "which ran unproven")
        top.addWidget(self.unverified)
        self.run_button = QPushButton("Report")
        self.run_button.setToolTip("classify every node and measure it on real data")
        self.run_button.clicked.connect(self.run)
        top.addWidget(self.run_button)
        lay.addLayout(top)
        self.warning = QLabel("")
        self.warning.setWordWrap(True)
        self.warning.setProperty("warn", True)           # the warning colour, from the app style sheet
        lay.addWidget(self.warning)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setStretchLastSection(True)
        lay.addWidget(self.table, 1)
        self.status = QLabel("choose a workflow or a learner and a replica count")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        lay.addWidget(self.text, 1)

    def path(self) -> Path:
        return self.paths[self.choice.currentText()]

    def _open(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Workflow or learner", str(Path.home()), "TOML (*.toml)")
        if name:
            self.add_path(Path(name))

    def add_path(self, path: Path) -> None:
        label = f"file: {path}"
        self.paths[label] = path
        if self.choice.findText(label) < 0:
            self.choice.addItem(label)
        self.choice.setCurrentText(label)

    def _client(self):
        if self._factory is not None:
            return self._factory()
        from ...engine.worker.client import WorkerClient
        return WorkerClient(budget_s=600.0)

    def run(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        path, replicas, unverified = str(self.path()), self.replicas.value(), self.unverified.isChecked()
        prove = self.prove_box.isChecked()
        self.run_button.setEnabled(False)
        self.prove_box.setStyleSheet("")
        self.status.setText(f"reporting {Path(path).name} on {replicas} replica(s)"
                            + (" (proving missing receipts first)" if prove else "") + "…")

        def work():
            try:
                with self._client() as client:
                    self.relay.done.emit(client.call(Kind.SHARD_REPORT, path=path, replicas=replicas,
                                                     allow_unverified=unverified, prove=prove))
            except StudioError as e:
                self.relay.failed.emit(e.format())
            except Exception as e:  # noqa: BLE001 - a worker that died: said, not raised into Qt
                self.relay.failed.emit(f"{type(e).__name__}: {e}")

        self.thread = threading.Thread(target=work, daemon=True, name="shard-report")
        self.thread.start()

    def show_report(self, report) -> None:
        """Fill the table from a report (services/sharding.py's ShardingReport: a workflow's or a learner's)."""
        self.report = report
        self.run_button.setEnabled(True)
        data = report.measured | {"name": report.name}
        rows = []
        if report.kind == "learner":
            for name, m in data["nodes"].items():
                if "bitwise_steps" in m:
                    what = f"bit for bit at {m['bitwise_steps']}/{m['steps']} steps"
                    ok = m["bitwise_steps"] == m["steps"]
                else:
                    what = f"max {m['max_ulps']:.3g} ulp, mean {m['mean_ulps']:.3g} ulp, max rel {m['max_rel']:.3g}"
                    ok = True
                rows.append((name, data["name"], m["label"], "yes" if ok else "NO", what))
        else:
            unproven = set(report.unverified)
            for n in data["nodes"]:
                v = n["verified"]
                claim = "-" if v is None else "yes" if v else "NO"
                if n["name"] in unproven:        # measured, but with an op that has no receipt here
                    claim = f"unverified op (claim measured: {claim})"
                rows.append((n["name"], n["op"], n["kind"]["label"], claim, measured(n)))
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                item = QTableWidgetItem(str(value))
                item.setToolTip(str(value))
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.warning.setText("\n".join(f"⚠ {w}" for w in report.warnings))
        self.text.setPlainText("\n".join(report.lines))
        self.status.setText(f"{len(rows)} node(s) on {data['replicas']} replica(s): {report.verdict()}")

    def _failed(self, message: str) -> None:
        self.run_button.setEnabled(True)
        if "no valid conformance receipt" in message:          # the plan's refusal: the way forward, short
            self.status.setText("refused: some ops have no conformance receipt on this GPU. Tick “prove missing "
                                "receipts” and report again (or “allow unverified”: the rows then say so). "
                                "The details are below.")
            self.prove_box.setStyleSheet("font-weight: bold")
        else:
            self.status.setText("the report failed")
        self.text.setPlainText(message)


def install_shard(window, layout) -> QDockWidget:
    """The Sharding dock (hidden until asked for) and Tools ▸ Sharding report."""
    window.shard_dock = window.docks.add_tool_dock("Sharding", "shard_dock", ShardPanel, layout)
    return window.shard_dock
