"""Conformance cell: the kernel against the reference on the engine's own corpus — progress,
the failing cases, the first mismatch with its bit patterns, and the receipt.

The verdict is progressive: starting a run clears the last result at once; the first failure or
the forward PASS shows the moment the engine knows it (the worker's notes,
studio/engine/proof/progressive.py ``Stream``); the backward conformance, the mutation score and
the receipt follow as they land, each marked pending until then (``stages``); the gradcheck stage
is the Gradcheck cell's verdict on this content, when it has one (the document view tells it)."""
from __future__ import annotations

import html
import json
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
)

from ...engine.precision import POISON_WORD
from ..cells.base import Chip
from ..widgets.editors import mono_font
from ..widgets.style import colour
from .job import JobPanel, error_html

RUNNING = "running the corpus on the device…"
COLUMNS = ["case", "class", "values", "shape", "params", "output", "kind", "detail"]
POISON = f"{POISON_WORD:#010x}"


def describe_case(f: dict) -> str:
    dims = ", ".join(f"{k} = {v}" for k, v in f.get("dims", {}).items())
    params = ", ".join(f"{k} = {v}" for k, v in f.get("params", {}).items())
    parts = [p for p in (dims, params, f"values {f.get('value_kind')}") if p]     # no "; ;" without params
    return f"case {f.get('case')}: {f.get('shape_kind')} — " + "; ".join(parts)


def timing_line(timing: dict | None) -> str:
    """The run's per-phase split as the engine presents it (the report's ``timing["line"]``,
    studio/engine/proof/progressive.py ``timing_text``: the CLI prints the same line)."""
    return f"time — {timing['line']}" if timing and timing.get("line") else ""


def mutation_line(lines: list[str]) -> str:
    """The mutation score (docs/verification.md, "Mutation score") as the engine presents it (the
    report's ``mutation_lines``, proof/mutants.py ``lines``: `scellis conform` prints the same
    lines), the survivors in the error colour."""
    shown = []
    for ln in lines:
        text = html.escape(" ".join(ln.split()))
        bad = ln.lstrip().startswith("survivors") or ln.startswith(" " * 14)
        shown.append(f"<span style='color:{colour('error')}'>{text}</span>" if bad else text)
    return "<br>".join(shown)


STAGES = ("forward", "backward", "mutation score", "receipt", "gradcheck")
MARKS = {"ok": "✔", "error": "✖", "warn": "!", "busy": "○", "idle": "·"}


def stage_html(stages: dict) -> str:
    """One line: each stage with its mark and its word (``pending`` until its verdict lands)."""
    parts = []
    for name in STAGES:
        if name not in stages and name == "gradcheck":
            continue                           # told by the document (the Gradcheck cell's own run)
        text, kind = stages.get(name, ("pending", "busy"))
        body = f"{MARKS.get(kind, '')} {name}: {text}"
        parts.append(f"<span style='color:{colour(kind)}'>{body}</span>" if kind in ("ok", "error", "warn") else body)
    return " &nbsp;·&nbsp; ".join(parts)


def final_stages(report: dict, receipt: dict | None) -> dict:
    """Every stage's verdict, from the whole report."""
    out = {}
    fails = report.get("failures", [])
    out["forward"] = (f"PASS, {report.get('passed')} cases", "ok") if not fails and report.get("passed") \
        else (f"FAIL, {report.get('failed', len(fails))} case(s)", "error")
    back = report.get("backward")
    if isinstance(back, dict):
        out["backward"] = ("PASS", "ok") if back.get("verdict") == "pass" else ("FAIL", "error")
    else:
        out["backward"] = ("none declared", "idle")
    mut = report.get("mutation")
    if isinstance(mut, dict) and "killed" in mut:
        judged = mut.get("total", 0) - len(mut.get("acknowledged") or [])
        out["mutation score"] = (f"{mut['killed']} of {judged} killed", "warn" if mut.get("survivors") else "ok")
    else:
        out["mutation score"] = ("not run: every case must pass first" if report.get("verdict") != "pass"
                                 else "not run", "idle")
    if receipt is not None:
        good = receipt.get("verdict") == "pass"
        out["receipt"] = ("issued" if good else "fail", "ok" if good else "error")
    else:
        out["receipt"] = ("none: a receipt needs every case to pass", "error" if report.get("verdict") != "pass"
                          else "idle")
    return out


def is_n_equals_w(f: dict) -> bool:
    """The story's case: the smallest valid input, n = w."""
    n = f.get("dims", {}).get("n")
    w = f.get("params", {}).get("w")
    return n is not None and n == w


class ConformancePanel(JobPanel):
    title = "Conformance"
    key = "conformance"
    runRequested = Signal(int, bool)          # seed, large
    cancelRequested = Signal()

    def __init__(self, number: int, parent=None):
        super().__init__(number, parent)
        bar = QHBoxLayout()
        self.run_button = QPushButton("▶ Run conformance")
        self.run_button.setObjectName("conformance_run")
        self.cancel_button = QPushButton("■ Cancel")
        self.cancel_button.setEnabled(False)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setPrefix("seed ")
        self.large = QCheckBox("large corpus")
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m cases")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)        # no "0 / 100 cases" before the corpus size is known
        self.run_button.setToolTip("run the kernel against the reference on the engine's generated corpus "
                                   "(Ctrl+Enter in this cell, F5 anywhere)")
        self.cancel_button.setToolTip("stop the conformance run (its worker is restarted)")
        self.seed.setToolTip("the corpus seed: the same seed generates the same cases")
        self.large.setToolTip("a larger corpus: more shapes and values, slower")
        self.progress.setToolTip("cases run so far, of the corpus the engine generated")
        for w in (self.run_button, self.cancel_button, self.seed, self.large):
            bar.addWidget(w)
        bar.addWidget(self.progress, 1)
        self.body_layout.addLayout(bar)
        self.summary = QLabel("Cases are generated by the engine from the signature — shapes, windows, edge "
                              "inputs — never chosen by the author.")
        self.summary.setWordWrap(True)
        self.body_layout.addWidget(self.summary)
        self.stages_label = QLabel()
        self.stages_label.setObjectName("conformance_stages")
        self.stages_label.setWordWrap(True)
        self.stages_label.setToolTip("each verdict of the run as it lands: the forward corpus first, then the "
                                     "backward conformance, the mutation score and the receipt")
        self.stages_label.setVisible(False)
        self.body_layout.addWidget(self.stages_label)
        self.stages: dict[str, tuple[str, str]] = {}
        self.shown: dict[str, dict] = {}      # per verdict: when the engine knew it, when it was shown (time.time)

        self.mismatch_box = QGroupBox("first failure")
        grid = QGridLayout(self.mismatch_box)
        self.mm_case = QLabel()
        self.mm_case.setWordWrap(True)
        self.mm_expected = QLabel()
        self.mm_got = QLabel()
        self.mm_allowed = QLabel()
        self.mm_repro = QLabel()
        for w in (self.mm_expected, self.mm_got, self.mm_repro):
            w.setFont(mono_font())
            w.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(self.mm_case, 0, 0, 1, 2)
        grid.addWidget(QLabel("expected"), 1, 0)
        grid.addWidget(self.mm_expected, 1, 1)
        grid.addWidget(QLabel("got"), 2, 0)
        grid.addWidget(self.mm_got, 2, 1)
        grid.addWidget(QLabel("allowed"), 3, 0)
        grid.addWidget(self.mm_allowed, 3, 1)
        grid.addWidget(QLabel("reproduce"), 4, 0)
        grid.addWidget(self.mm_repro, 4, 1)
        self.mismatch_box.setVisible(False)
        self.body_layout.addWidget(self.mismatch_box)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("conformance_cases")
        self.table.setToolTip("the failing cases (the first 50); n = w rows are the smallest valid input")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setFixedHeight(170)
        self.table.setVisible(False)
        self.body_layout.addWidget(self.table)

        self.receipt_box = QGroupBox("receipt")
        rl = QHBoxLayout(self.receipt_box)
        self.receipt_chip = Chip()
        self.receipt_text = QLabel()
        self.receipt_text.setWordWrap(True)
        self.receipt_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        rl.addWidget(self.receipt_chip, 0, Qt.AlignmentFlag.AlignTop)
        rl.addWidget(self.receipt_text, 1)
        self.receipt_box.setVisible(False)
        self.body_layout.addWidget(self.receipt_box)

        self.run_button.clicked.connect(lambda: self.request_run())
        self.cancel_button.clicked.connect(self.cancelRequested.emit)
        self.report: dict | None = None
        self.receipt: dict | None = None

    # ------------------------------------------------------------------ states
    def request_run(self) -> None:
        """Ask for a run with the seed and corpus size as set (the ▶ button, Ctrl+Enter in this cell)."""
        self.runRequested.emit(self.seed.value(), self.large.isChecked())

    def started(self) -> None:
        """A new run: the last result goes at once (nothing of it stays on screen under "running")."""
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, 0)           # busy until the first batch reports
        self.progress.setTextVisible(False)
        self.set_status("running", "busy")
        self.report = self.receipt = None
        self.mismatch_box.setVisible(False)
        self.table.setRowCount(0)
        self.table.setVisible(False)
        self.receipt_box.setVisible(False)
        self.receipt_chip.set("", "idle")
        self.receipt_text.setText("")
        self.shown = {"started": {"shown": time.time()}}
        self.summary.setText(RUNNING)
        self.stages = {}
        self.set_stages({"forward": ("running", "busy")})

    def set_stages(self, stages: dict) -> None:
        """Replace the named stages' (text, kind); the others keep theirs (pending at first)."""
        self.stages.update(stages)
        self.stages_label.setText(stage_html(self.stages))
        self.stages_label.setVisible(True)

    def stage(self, name: str) -> tuple[str, str]:
        return self.stages.get(name, ("pending", "busy"))

    def _mark_shown(self, kind: str, event: dict) -> None:
        self.shown[kind] = {"engine": event.get("at"), "shown": time.time()}

    def on_note(self, event: dict) -> None:
        """Each verdict the moment the engine judged it (progressive.Stream): the first failing case,
        the forward verdict (the whole forward corpus judged), the backward conformance's verdict."""
        if not isinstance(event, dict) or not self.cancel_button.isEnabled():
            return                             # (a note that outlived its run)
        kind = event.get("kind")
        if kind == "first_failure":
            self.set_status("FAIL…", "error")
            text = str(event.get("text", ""))[:400].replace("&", "&amp;").replace("<", "&lt;")
            self.summary.setText(f"first failure (the rest of the corpus is still running): {text}")
            self.set_stages({"forward": ("FAIL", "error")})
            self._mark_shown(kind, event)
        elif kind == "forward_verdict":
            cases = int(event.get("cases") or 0)
            if event.get("verdict") == "pass":
                self.set_status("forward PASS", "ok")
                self.summary.setText(f"forward <b>PASS</b>: all {cases} cases match the reference. Still running: "
                                     "the race check, the backward conformance and the mutation score…")
                self.set_stages({"forward": (f"PASS, {cases} cases", "ok")})
            else:
                self.summary.setText(self.summary.text().replace(
                    "(the rest of the corpus is still running)", f"(all {cases} cases judged; the report follows)"))
                self.set_stages({"forward": ("FAIL", "error")})
            self._mark_shown(kind, event)
        elif kind == "backward_verdict":
            ok = event.get("verdict") == "pass"
            self.set_stages({"backward": ("PASS" if ok else "FAIL", "ok" if ok else "error")})
            self._mark_shown(kind, event)

    def on_progress(self, done: int, total: int) -> None:
        super().on_progress(done, total)
        if total and done >= total and self.summary.text() == RUNNING:
            self.summary.setText(f"the corpus is judged ({total} cases); the verdict follows…")

    def stopped(self, why: str, kind: str = "idle") -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        if self.progress.maximum() == 0:
            self.progress.setRange(0, 1)
            self.progress.setValue(0)
        self.set_status(why, kind)
        if why == "cancelled":
            self.summary.setText("cancelled: no verdict")
            self._no_stages()

    def show_error(self, err) -> None:
        self.stopped("error", "error")
        self.summary.setText(error_html(err))
        self._no_stages()

    def _no_stages(self) -> None:
        self.stages = {}
        self.stages_label.setVisible(False)

    def show_report(self, report: dict, receipt: dict | None = None, receipt_path: str | None = None,
                    mutation_lines: list[str] = ()) -> None:
        self.report, self.receipt = report, receipt
        total = int(report.get("corpus", {}).get("cases", report.get("passed", 0) + report.get("failed", 0)))
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(total)
        self.progress.setTextVisible(total > 0)
        ok = report.get("verdict") == "pass"
        self.stopped("PASS" if ok else "FAIL", "ok" if ok else "error")
        classes = ", ".join(f"{k}: {v}" for k, v in report.get("failing_classes", {}).items())
        corpus = report.get("corpus", {})
        self.summary.setText(
            f"<b>{report.get('passed')}</b> passed, <b>{report.get('failed')}</b> failed of {total} cases "
            f"(seed {corpus.get('seed')}{', large' if corpus.get('large') else ''}, corpus "
            f"{str(corpus.get('hash', ''))[:12]}) in {report.get('seconds', 0):.2f} s on GPU profile "
            f"{report.get('gpu_profile')}; tolerance <b>{report.get('tolerance')}</b>"
            + (f"<br>failing classes — {classes}" if classes else "")
            + (f"<br>{timing_line(report.get('timing'))}" if report.get("timing") else "")
            + (f"<br>{mutation_line(mutation_lines)}" if mutation_lines else "")
            + "".join(f"<br><span style='color:{colour('error')}'>category: {c}</span>"
                      for c in report.get("category_errors", [])))
        fails = report.get("failures", [])
        self._fill_table(fails)
        self._show_first(fails[0] if fails else None, report.get("reproduce", ""))
        self._show_receipt(receipt, receipt_path, ok)
        self.set_stages(final_stages(report, receipt))
        self.shown["report"] = {"shown": time.time()}

    def _fill_table(self, fails: list[dict]) -> None:
        self.table.setVisible(bool(fails))
        self.table.setRowCount(len(fails))
        for r, f in enumerate(fails):
            vals = [str(f.get("case")), f.get("shape_kind", ""), f.get("value_kind", ""),
                    ", ".join(f"{k} = {v}" for k, v in f.get("dims", {}).items()),
                    ", ".join(f"{k} = {v}" for k, v in f.get("params", {}).items()),
                    f.get("output", ""), f.get("kind", ""), f.get("detail", "")]
            for c, v in enumerate(vals):
                it = QTableWidgetItem(v)
                if is_n_equals_w(f):
                    from PySide6.QtGui import QColor
                    it.setBackground(QColor(colour("mark")))
                    it.setToolTip("the smallest valid input: n = w, exactly one output element")
                self.table.setItem(r, c, it)

    def _show_first(self, f: dict | None, repro: str) -> None:
        self.mismatch_box.setVisible(f is not None)
        if f is None:
            return
        self.mm_case.setText(f"<b>{describe_case(f)}</b><br>output {f.get('output')}: {f.get('kind')} — "
                             f"{f.get('detail')}" + (" <i>(n = w: the smallest valid input)</i>" if is_n_equals_w(f) else ""))
        if "expected_bits" in f:
            got_note = "  ← the poison: this element was never written" if f.get("got_bits") == POISON else ""
            self.mm_expected.setText(f"[{f.get('index')}] = {f.get('expected')}   bits {f.get('expected_bits')}")
            self.mm_got.setText(f"[{f.get('index')}] = {f.get('got')}   bits {f.get('got_bits')}{got_note}")
            self.mm_allowed.setText(str(f.get("allowed", "")))
        else:
            self.mm_expected.setText("—")
            self.mm_got.setText("—")
            self.mm_allowed.setText("")
        self.mm_repro.setText(f"{repro} --case {f.get('case')}")

    def _show_receipt(self, receipt: dict | None, path: str | None, ok: bool) -> None:
        self.receipt_box.setVisible(True)
        if receipt is None:
            self.receipt_chip.set("no receipt", "error" if not ok else "idle")
            self.receipt_text.setText("A receipt is issued only when every generated case matches the reference "
                                      "within the declared tolerance. The kernel still runs on your own device.")
            return
        h = receipt.get("hashes", {})
        prof = receipt.get("gpu_profile", {})
        self.receipt_chip.set("receipt ✔" if receipt.get("verdict") == "pass" else "receipt: fail",
                              "ok" if receipt.get("verdict") == "pass" else "error")
        adapter = prof.get("adapter", {}) if isinstance(prof, dict) else {}
        self.receipt_text.setText(
            f"<b>{receipt.get('op')}</b> — verdict {receipt.get('verdict')}, {receipt.get('cases', {}).get('total')} "
            f"cases<br>kernel {str(h.get('kernel', ''))[:16]} · reference {str(h.get('reference', ''))[:16]} · "
            f"package {str(h.get('package', ''))[:16]} · corpus {str(h.get('corpus', ''))[:16]}<br>"
            f"scoped to GPU profile <b>{prof.get('id') if isinstance(prof, dict) else prof}</b> "
            f"({adapter.get('device', '')}); another machine re-runs conformance locally"
            + (f"<br>{path}" if path else ""))

    def receipt_json(self) -> str:
        return json.dumps(self.receipt, indent=2) if self.receipt else ""
