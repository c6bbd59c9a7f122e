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

from ..widgets.editors import mono_font
from ..widgets.export import plot_with_export
from ..widgets.style import colour
from ..widgets.theme import style_plot
from .job import JobPanel, error_html

X_LABEL = Y_LABEL_UNITS = "∂L/∂x"


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
        self.progress.setTextVisible(False)
        self.run_button.setToolTip("compare the declared VJP with central differences of the reference, then run "
                                   "the negative control (Ctrl+Enter in this cell)")
        self.cancel_button.setToolTip("stop the gradcheck (its worker is restarted)")
        self.progress.setToolTip("probes compared so far")
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
        from ...figures import label_axes, plot_widget
        self.plot = plot_widget()
        self.plot.setObjectName("gradcheck_plot")
        label_axes(self.plot, "analytic: the declared VJP", "numeric: central differences (f64)",
                   x_units=X_LABEL, y_units=Y_LABEL_UNITS)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.addLegend(offset=(10, 10))
        self.plot.setMinimumHeight(280)
        style_plot(self.plot)
        split.addWidget(plot_with_export(self.plot, "gradcheck"))
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(mono_font())
        self.text.setObjectName("gradcheck_report")
        self.text.setToolTip("the gradcheck report, as `scellis gradcheck` prints it")
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)   # a long line wraps: none is cut off
        split.addWidget(self.text)
        split.setSizes([380, 620])
        self.body_layout.addWidget(split)
        self.body_layout.addWidget(QLabel("negative control — every corrupted VJP must be REJECTED"))
        self.mutants = QTableWidget(0, 3)
        self.mutants.setObjectName("gradcheck_mutants")
        self.mutants.setToolTip("each deliberately corrupted VJP and its fate: every one must be REJECTED")
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
        self.run_button.clicked.connect(lambda: self.request_run())
        self.cancel_button.clicked.connect(self.cancelRequested.emit)

    def request_run(self) -> None:
        """Ask for a run with the parameters as set (the ▶ button, Ctrl+Enter in this cell)."""
        self.runRequested.emit({k: s.value() for k, s in self.param_spins.items()})

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
            s.setToolTip(f"the op's parameter {name} for the gradcheck ({lo} … {hi})")
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
        self.plot.plot([lo - pad, hi + pad], [lo - pad, hi + pad], pen=pg.mkPen(
            self.palette().color(self.palette().ColorRole.Mid), style=Qt.PenStyle.DashLine), name="analytic = numeric")
        self.scatter = pg.ScatterPlotItem(ka, kn, size=7, brush=pg.mkBrush(31, 95, 168, 170), pen=None,
                                          name=f"probes ({ka.size})")
        muted = colour("muted")        # skipped is neither pass nor fail: a hollow ring, never a red cross
        self.skipped = pg.ScatterPlotItem(sa, sn, size=11, symbol="o", brush=None,
                                          pen=pg.mkPen(muted, width=1.5), name=f"skipped at a kink ({sa.size})")
        self.plot.addItem(self.scatter)
        self.plot.addItem(self.skipped)
        rows = mutant_rows(report)
        self.mutants.setRowCount(len(rows))
        for r, (name, what, shown, fate) in enumerate(rows):
            for c, v in enumerate((name, what, shown)):
                it = QTableWidgetItem(v)
                if c == 2:
                    from PySide6.QtGui import QColor
                    it.setForeground(QColor(colour({"REJECTED": "ok", "n/a": "muted"}.get(fate, "error"))))
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
