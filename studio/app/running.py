"""The run cell's controller: make the input (the builtin spiky-signal generator on the device, or
a file read off the GUI thread), run the document's op on it through the worker, plot, export."""
from __future__ import annotations

import time

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog

from ..engine.contract.signature import parse_signature
from ..engine.errors import StudioError
from .panels.run import SPIKY


def param_specs(signature_text: str) -> list[tuple[str, int, int, int]]:
    """(name, default, lo, hi) for each integer parameter of the signature (a 7 for the story's w)."""
    try:
        sig = parse_signature(signature_text)
    except StudioError:
        return []
    out = []
    for p in sig.params:
        lo = int(p.lo.eval({})) if p.lo is not None and not p.lo.symbols() else 0
        hi = int(p.hi.eval({})) if p.hi is not None and not p.hi.symbols() else 2**31 - 1
        default = min(max(7, lo), hi)
        if p.parity == "odd" and default % 2 == 0:
            default += 1
        if p.parity == "even" and default % 2 == 1:
            default += 1
        out.append((p.name, default, lo, min(hi, 2**31 - 1)))
    return out


class RunController(QObject):
    finished = Signal(dict)      # {"x": input, "y": output, "seconds": ...}
    started = Signal(object)     # a job of the run, however it was asked for (button, Ctrl+Enter, F7)

    def __init__(self, session, workers, background, panel, parent=None):
        super().__init__(parent)
        self.session, self.workers, self.background, self.panel = session, workers, background, panel
        self.job = None
        self.result: dict | None = None
        panel.runRequested.connect(self.run)
        panel.cancelRequested.connect(self.cancel)
        panel.exportDataRequested.connect(self.export_data_dialog)
        panel.export_plot.background = background          # a million-sample CSV is written off the GUI thread
        panel.export_plot.failed.connect(panel.show_error)
        session.doc.changed.connect(lambda key, _o: self._params() if key == "field:signature" else None)
        self._params()

    def _params(self) -> None:
        self.panel.set_params(param_specs(str(self.session.doc.field("signature") or "")))

    def _input_name(self) -> str:
        try:
            sig = parse_signature(str(self.session.doc.field("signature") or ""))
        except StudioError as e:
            raise StudioError("the signature does not parse, so the op cannot run yet", hint=e.message) from None
        if len(sig.inputs) != 1:
            raise StudioError(f"the run cell feeds one input; {sig.name} has {len(sig.inputs)}",
                              hint="run it from the CLI: scellis run PATH --input name=file.npy")
        return sig.inputs[0].name

    def run(self, req: dict | None = None):
        req = req or self.panel.request()
        if self.job is not None and self.job.active:
            return self.job
        try:
            name = self._input_name()
        except StudioError as e:
            self.panel.show_error(e)
            return None
        if not self.session.runnable:
            self.panel.show_error(StudioError("this package's code is not trusted here", field="trust",
                                              hint="use Trust in the toolbar"))
            return None
        self.t0 = time.perf_counter()
        if req["source"] == "spiky":
            self.panel.started(f"generating {req['n']:,} samples of the spiky signal on the device…")
            job = self.workers.submit("run", "run", target=SPIKY, inputs={},
                                      params={"n": int(req["n"]), "seed": int(req["seed"])}, require_receipt=True)
            job.succeeded.connect(lambda out: self._run_op(name, _first(out), req["params"]))
        else:
            path = req["file"]
            self.panel.started(f"reading {path}…")
            from ..engine.arrays import load_array
            self.background.run(lambda: np.asarray(load_array(path), dtype=np.float32).reshape(-1),
                                lambda x: self._run_op(name, x, req["params"]), self.panel.show_error)
            return None
        self._watch(job)
        return job

    def _run_op(self, name: str, x: np.ndarray, params: dict) -> None:
        self.panel.started(f"running {self.session.doc.field('id')} on {x.size:,} samples…")
        t = time.perf_counter()
        job = self.workers.submit("run", "run", prepare=self.session.target(), inputs={name: x}, params=dict(params),
                                  require_receipt=True,   # a result is shown only from a proven op
                                  budget_s=self._budget(x, params))
        job.succeeded.connect(lambda out: self._done(x, out, time.perf_counter() - t))
        self._watch(job)

    def _budget(self, x: np.ndarray, params: dict) -> float:
        """The run lane's budget, or more for a big input: the engine's rule, scaled with the size."""
        from ..engine.services.proof_budget import run_budget_s
        from .worker_bridge import LANES
        try:
            sig = parse_signature(str(self.session.doc.field("signature") or ""))
        except StudioError:
            return LANES["run"]
        return max(LANES["run"], run_budget_s(sig, {sig.inputs[0].name: x}, dict(params)))

    def _watch(self, job) -> None:
        self.job = job
        job.failed.connect(self.panel.show_error)
        job.cancelled.connect(lambda: self.panel.stopped("cancelled", "warn"))
        self.started.emit(job)

    def _done(self, x: np.ndarray, out, seconds: float) -> None:
        y = _first(out)
        label = str(self.session.doc.field("id") or "output")
        self.result = {"x": x, "y": y, "seconds": seconds}
        self.panel.show_result(x, y, label, seconds)
        self.finished.emit(self.result)

    def cancel(self) -> None:
        if self.job is not None:
            self.workers.cancel(self.job)

    # ------------------------------------------------------------------ export
    def export_plot(self, path: str) -> None:
        """The plot as PNG or SVG (or its data as CSV), as the plot's Export button writes it."""
        from ..figures import export_plot
        export_plot(self.panel.plot, path)

    def export_data_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self.panel, "Export data", "output.npy",
                                              "NumPy, the output array (*.npy);;CSV, input and output with a header (*.csv)")
        if path:
            self.export_data(path)

    def export_data(self, path: str, which: str = "output"):
        """.npy: the ``which`` array as it came from the device (to feed another op). .csv: every plotted
        series with a header — the sample index, the input and the output on the input's axis (blank
        where the windowed output has no sample). Written off the GUI thread; returns the future."""
        if str(path).lower().endswith(".csv"):
            from ..engine.atomic import write_bytes
            from ..figures import series_table, table_csv
            table = series_table(self.panel.plot)
            return self.background.run(lambda: write_bytes(path, table_csv(*table).encode("utf-8")), None,
                                       self.panel.show_error, ordered=True)
        from ..engine.arrays import save_array
        data = self.panel.data[which]
        return self.background.run(lambda: save_array(path, data), None, self.panel.show_error, ordered=True)


def _first(out) -> np.ndarray:
    if isinstance(out, dict):
        if not out:
            raise StudioError("the op returned no outputs")
        return np.asarray(next(iter(out.values())))
    return np.asarray(out)
