"""The run cell's controller: make every input the signature declares (the builtin spiky-signal
generator on the device, a file read off the GUI thread, or another op's output), run the
document's op on them through the worker — its kernel, proven or not (trying.py says which), or
its reference alone — plot, export."""
from __future__ import annotations

import time

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog

from ...engine.contract.signature import parse_signature
from ...engine.errors import StudioError
from ...engine.services.requests import Kind
from ...engine.services.trial import RunProof
from ..panels.run import SPIKY
from .trying import param_specs

__all__ = ["RunController", "param_specs"]


class RunController(QObject):
    finished = Signal(dict)      # {"x": input, "y": output, "seconds": ...}
    started = Signal(object)     # a job of the run, however it was asked for (button, Ctrl+Enter, F7)

    def __init__(self, session, workers, background, panel, parent=None):
        super().__init__(parent)
        self.session, self.workers, self.background, self.panel = session, workers, background, panel
        self.job = None
        self.result: dict | None = None
        self._fed_unproven: RunProof | None = None
        self._declared: dict[str, tuple[str, int]] = {}
        panel.runRequested.connect(self.run)
        panel.cancelRequested.connect(self.cancel)
        panel.exportDataRequested.connect(self.export_data_dialog)
        panel.export_plot.background = background          # a million-sample CSV is written off the GUI thread
        panel.export_plot.failed.connect(panel.show_error)
        session.doc.changed.connect(lambda key, _o: self._params() if key == "field:signature" else None)
        self._params()

    def _params(self) -> None:
        text = str(self.session.doc.field("signature") or "")
        self.panel.set_params(param_specs(text))
        try:
            self.panel.set_inputs([t.name for t in parse_signature(text).inputs])
        except StudioError:
            pass                                   # the checker says why; the rows stay as they were

    def _input_names(self) -> list[str]:
        try:
            sig = parse_signature(str(self.session.doc.field("signature") or ""))
        except StudioError as e:
            raise StudioError("the signature does not parse, so the op cannot run yet", hint=e.message) from None
        self._declared = {t.name: (t.dtype, len(t.dims)) for t in sig.inputs}
        return [t.name for t in sig.inputs]

    def run(self, req: dict | None = None):
        req = req or self.panel.request()
        if self.job is not None and self.job.active:
            return self.job
        try:
            names = self._input_names()
        except StudioError as e:
            self.panel.show_error(e)
            return None
        if not self.session.runnable:
            self.panel.show_error(StudioError("this package's code is not trusted here", field="trust",
                                              hint="use Trust in the toolbar"))
            return None
        self.t0 = time.perf_counter()
        self._fed_unproven = None                  # set when another op's unproven output feeds an input
        given = req.get("inputs") or {}
        fallback = {k: req.get(k) for k in ("source", "n", "seed", "file", "op")}
        specs = [(name, given.get(name) or fallback) for name in names]
        self._gather(specs, {}, lambda inputs: self._run_op(inputs, req.get("params") or {}, req.get("what", "kernel")))
        return self.job

    def _gather(self, specs: list, got: dict, then) -> None:
        """Make each input in turn (each off the GUI thread), then ``then(inputs)``."""
        if not specs:
            then(got)
            return
        (name, spec), rest = specs[0], specs[1:]

        def next_one(x):
            got[name] = np.asarray(x)
            self._gather(rest, got, then)
        source = spec.get("source") or "spiky"
        if source == "file":
            path = spec.get("file") or ""
            self.panel.started(f"reading {name} from {path}…")
            from ...engine.arrays import load_array
            dtype, rank = self._declared.get(name, ("f32", 1))
            cast = {"f32": np.float32, "u32": np.uint32, "i32": np.int32}.get(dtype)

            def load():                       # as declared: a 1-D input flattened, a 2-D one kept whole
                a = np.asarray(load_array(path))
                a = a.astype(cast) if cast is not None else a
                return a.reshape(-1) if rank == 1 else a
            self.background.run(load, next_one, self.panel.show_error)
            return
        n, seed = int(spec.get("n") or 1_000_000), int(spec.get("seed") or 0)
        if source == "op":
            op = spec.get("op") or ""
            if not op:
                self.panel.show_error(StudioError(f"input {name}: name the op whose output feeds it", field="run.op"))
                return
            self.panel.started(f"{name}: running {op} on {n:,} samples of the spiky signal…")
            job = self.workers.submit("run", Kind.OP_OUTPUT, target=op, n=n, seed=seed)
            job.succeeded.connect(lambda out: (self._unproven(out.proof), next_one(_first(out.outputs))))
        else:
            self.panel.started(f"{name}: generating {n:,} samples of the spiky signal on the device…")
            job = self.workers.submit("run", Kind.RUN, target=SPIKY, inputs={}, params={"n": n, "seed": seed},
                                      require_receipt=True)
            job.succeeded.connect(lambda out: next_one(_first(out.outputs)))
        self._watch(job)

    def _unproven(self, proof: RunProof) -> None:
        if not proof.proven:
            self._fed_unproven = proof

    def _run_op(self, inputs: dict, params: dict, what: str = "kernel") -> None:
        x = next(iter(inputs.values())) if inputs else np.zeros(0, np.float32)
        who = "its reference" if what == "reference" else self.session.doc.field("id")
        self.panel.started(f"running {who} on {x.size:,} samples…")
        t = time.perf_counter()
        if what == "reference":
            job = self.workers.submit("run", Kind.TRY_REFERENCE, prepare=self.session.target(), inputs=inputs,
                                      params=dict(params), budget_s=self._budget(inputs, params))
        else:                                  # proven or not: the result says which (trying.py)
            job = self.workers.submit("run", Kind.TRY_RUN, prepare=self.session.target(), inputs=inputs,
                                      params=dict(params), budget_s=self._budget(inputs, params))
        fed, self._fed_unproven = self._fed_unproven, None
        job.succeeded.connect(lambda out: self._done(x, out, time.perf_counter() - t, what, fed))
        self._watch(job)

    def _budget(self, inputs: dict, params: dict) -> float:
        """The run lane's budget, or more for a big input: the engine's rule, scaled with the size."""
        from ...engine.services.proof_budget import run_budget_s
        from .worker_bridge import LANES
        try:
            sig = parse_signature(str(self.session.doc.field("signature") or ""))
            return max(LANES["run"], run_budget_s(sig, dict(inputs), dict(params)))
        except StudioError:
            return LANES["run"]

    def _watch(self, job) -> None:
        self.job = job
        job.failed.connect(self.panel.show_error)
        job.cancelled.connect(lambda: self.panel.stopped("cancelled", "warn"))
        self.started.emit(job)

    def _done(self, x: np.ndarray, out, seconds: float, what: str = "kernel", fed: RunProof | None = None) -> None:
        y, proof = _first(out.outputs), out.proof                # a trial.TryReport
        if fed is not None and proof.proven:          # an unproven op fed it: so is the result
            proof = RunProof(proven=False, why=f"an input came from an op that is not proven ({fed.why})")
        label = str(self.session.doc.field("id") or "output")
        self.result = {"x": x, "y": y, "seconds": seconds, "proof": proof, "what": what}
        self.panel.show_result(x, y, label, seconds, proof=proof, what=what)
        self.finished.emit(self.result)

    def proof_known(self, report) -> None:
        """Conformance finished (its ``actions.ConformReport``): the run cell's line says whether this
        content now has a receipt."""
        self.panel.set_proof(report.ok and bool(report.receipt))

    def cancel(self) -> None:
        if self.job is not None:
            self.workers.cancel(self.job)

    # ------------------------------------------------------------------ export
    def export_plot(self, path: str) -> None:
        """The plot as PNG or SVG (or its data as CSV), as the plot's Export button writes it."""
        from ...figures import export_plot
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
            from ...engine.atomic import write_bytes
            from ...figures import series_table, table_csv
            table = series_table(self.panel.plot)
            return self.background.run(lambda: write_bytes(path, table_csv(*table).encode("utf-8")), None,
                                       self.panel.show_error, ordered=True)
        from ...engine.arrays import save_array
        data = self.panel.data[which]
        return self.background.run(lambda: save_array(path, data), None, self.panel.show_error, ordered=True)


def _first(out) -> np.ndarray:
    if isinstance(out, dict):
        if not out:
            raise StudioError("the op returned no outputs")
        return np.asarray(next(iter(out.values())))
    return np.asarray(out)
