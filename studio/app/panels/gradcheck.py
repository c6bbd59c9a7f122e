"""Gradcheck cell: analytic against numeric per probe (pyqtgraph scatter on the diagonal),
skipped probes visibly marked, the report in the story's shape, and the negative control's
mutants with their fates — a check that cannot fail certifies nothing."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
)

from ..editors import mono_font
from .job import JobPanel, error_html


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def probe_points(report: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(analytic, numeric) of the kept probes, and of the skipped ones (numeric may be missing there:
    such a probe is drawn on the diagonal, as a cross)."""
    kept_a, kept_n, skip_a, skip_n = [], [], [], []
    for p in report.get("probes", []) or []:
        a, n = _num(p.get("analytic")), _num(p.get("numeric"))
        skipped = bool(p.get("skipped")) or str(p.get("status", "")).lower() == "skipped"
        if skipped:
            if a is not None:
                skip_a.append(a)
                skip_n.append(n if n is not None else a)
        elif a is not None and n is not None:
            kept_a.append(a)
            kept_n.append(n)
    return tuple(np.asarray(v, dtype=np.float64) for v in (kept_a, kept_n, skip_a, skip_n))


def mutant_rows(report: dict) -> list[tuple[str, str, str, str]]:
    """(mutant, what it does, fate, REJECTED | passed | n/a) for each negative-control mutant."""
    rows = []
    for m in report.get("negative_controls", []) or []:
        fate = str(m.get("fate", ""))
        err = m.get("max_error")
        shown = "n/a: identical to the declared vjp here" if fate == "n/a" else fate + (
            f"  (max error {float(err):.2g})" if isinstance(err, (int, float)) else "")
        rows.append((str(m.get("name", m.get("mutant", "?"))), str(m.get("description", "")), shown, fate))
    return rows


class GradcheckPanel(JobPanel):
    title = "Gradcheck"
    key = "gradcheck"
    runRequested = Signal(dict)          # params
    cancelRequested = Signal()

    def __init__(self, number: int, parent=None):
        super().__init__(number, parent)
        bar = QHBoxLayout()
        self.run_button = QPushButton("▶ Run gradcheck")
        self.run_button.setObjectName("gradcheck_run")
        self.cancel_button = QPushButton("■ Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        bar.addWidget(self.run_button)
        bar.addWidget(self.cancel_button)
        self.params_row = QHBoxLayout()
        bar.addLayout(self.params_row)
        bar.addWidget(self.progress, 1)
        self.body_layout.addLayout(bar)
        self.verdict = QLabel("Finite differences on the reference path in f64; probes on a kink are skipped, "
                              "and a corrupted VJP must be rejected.")
        self.verdict.setWordWrap(True)
        self.body_layout.addWidget(self.verdict)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setObjectName("gradcheck_plot")
        self.plot.setLabel("bottom", "analytic (declared VJP)")
        self.plot.setLabel("left", "numeric (central differences)")
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.addLegend(offset=(10, 10))
        self.plot.setMinimumHeight(280)
        split.addWidget(self.plot)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(mono_font())
        self.text.setObjectName("gradcheck_report")
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        split.addWidget(self.text)
        split.setSizes([380, 620])
        self.body_layout.addWidget(split)
        self.body_layout.addWidget(QLabel("negative control — every corrupted VJP must be REJECTED"))
        self.mutants = QTableWidget(0, 3)
        self.mutants.setObjectName("gradcheck_mutants")
        self.mutants.setHorizontalHeaderLabels(["mutant", "corruption", "fate"])
        self.mutants.verticalHeader().setVisible(False)
        self.mutants.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.mutants.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.mutants.horizontalHeader().setStretchLastSection(True)
        self.mutants.setFixedHeight(150)
        self.body_layout.addWidget(self.mutants)
        self.param_spins: dict[str, QSpinBox] = {}
        self.report: dict | None = None
        self.scatter = self.skipped = None
        self.run_button.clicked.connect(lambda: self.runRequested.emit(
            {k: s.value() for k, s in self.param_spins.items()}))
        self.cancel_button.clicked.connect(self.cancelRequested.emit)

    def set_params(self, params: list[tuple[str, int, int, int]]) -> None:
        if [n for n, *_ in params] == list(self.param_spins):
            return
        for s in self.param_spins.values():
            s.deleteLater()
        self.param_spins = {}
        for name, value, lo, hi in params:
            s = QSpinBox()
            s.setRange(lo, hi)
            s.setValue(value)
            s.setPrefix(f"{name} = ")
            self.params_row.addWidget(s)
            self.param_spins[name] = s

    def started(self) -> None:
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, 0)
        self.set_status("running", "busy")

    def show_error(self, err) -> None:
        self.stopped("error", "error")
        self.verdict.setText(error_html(err))

    def show_report(self, report: dict) -> None:
        self.report = report
        verdict = str(report.get("verdict", "?"))
        kind = {"pass": "ok", "fail": "error"}.get(verdict.lower(), "warn")
        self.stopped(verdict.upper(), kind)
        lines = report.get("lines")
        self.text.setPlainText("\n".join(lines) if isinstance(lines, list) else str(report.get("text", "")))
        ka, kn, sa, sn = probe_points(report)
        self.plot.clear()
        allv = np.concatenate([ka, kn, sa, sn]) if (ka.size + sa.size) else np.zeros(2)
        lo, hi = float(np.min(allv)), float(np.max(allv))
        pad = (hi - lo) * 0.05 or 1.0
        self.plot.plot([lo - pad, hi + pad], [lo - pad, hi + pad], pen=pg.mkPen("#bbbbbb", style=Qt.PenStyle.DashLine),
                       name="analytic = numeric")
        self.scatter = pg.ScatterPlotItem(ka, kn, size=7, brush=pg.mkBrush(31, 95, 168, 170), pen=None,
                                          name=f"probes ({ka.size})")
        self.skipped = pg.ScatterPlotItem(sa, sn, size=11, symbol="x", brush=pg.mkBrush("#d1495b"),
                                          pen=pg.mkPen("#d1495b"), name=f"skipped at a kink ({sa.size})")
        self.plot.addItem(self.scatter)
        self.plot.addItem(self.skipped)
        rows = mutant_rows(report)
        self.mutants.setRowCount(len(rows))
        for r, (name, what, shown, fate) in enumerate(rows):
            for c, v in enumerate((name, what, shown)):
                it = QTableWidgetItem(v)
                if c == 2:
                    it.setForeground({"REJECTED": Qt.GlobalColor.darkGreen, "n/a": Qt.GlobalColor.gray}.get(
                        fate, Qt.GlobalColor.red))
                self.mutants.setItem(r, c, it)
        measured = report.get("max_error")
        tol = report.get("tolerance")
        rejected = sum(r[3] == "REJECTED" for r in rows)
        self.verdict.setText(
            f"<b>{verdict.upper()}</b> — {report.get('counted', ka.size)} probes compared, "
            f"{report.get('skipped', sa.size)} skipped at kinks"
            + (f"; max error {float(measured):.2g} (tolerance {tol})" if isinstance(measured, (int, float)) else "")
            + f"; negative control: {rejected} of {len(rows)} mutants rejected"
            + (f"<br>{report.get('why')}" if report.get("why") else ""))
