"""A contribution that is a workflow's per-sample gradient (docs/learner.md "A pipeline as the
contribution"): the parameters are the workflow's trainable sources, flattened in the order the
workflow declares them; a sample is a few numbers that set step parameters (e.g. the seed of the
recording the signal step generates); the contribution of one sample is the gradient of the
workflow's [train] loss at that sample, by reverse mode through every op's declared VJP
(studio/engine/workflow/train.py, the ladder of studio/engine/train/autodiff.py included).

So the spike-removal pipeline with trainable gain, offset and FIR taps before the windowed median
(resources/workflows/train_median.toml) trains data-parallel: each owner computes the
gradients of its recordings, the canonical tree combines them, every owner applies the update.
Each owner is a process of its own and opens its own context (device, catalog, trust store) on
first use, from the user data folder ``home`` given here, so it judges the same receipts."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..errors import StudioError
from .fingerprint import digest

SGD = "for i in 0..k: param[i] := param[i] - rate * mean[i]"


class WorkflowGradient:
    """``workflow``: a workflow file with a [train] section; ``bind``: per sample word, the step
    parameter it sets (``["signal.seed"]``: word 0 is the signal step's seed, rounded to an
    integer); ``receipts``: where gradcheck receipts are looked up; ``home``: the user data folder
    each owner's context opens; ``place``: where VJPs run ("device" or "reference")."""

    def __init__(self, workflow: str | Path, bind: list[str], *, receipts: str | Path | None = None,
                 home: str | Path | None = None, place: str = "device", allow_unverified: bool = False):
        from ..workflow.spec import load_workflow
        self.path = Path(workflow).resolve()
        self.text = self.path.read_text(encoding="utf-8")
        self.bind = [tuple(b.split(".", 1)) for b in bind]
        self.receipts = str(receipts) if receipts is not None else None
        self.home = str(home) if home is not None else None
        self.place, self.allow_unverified = place, allow_unverified
        wf = load_workflow(self.path)
        if wf.train is None:
            raise wf.error(("train",), "the workflow has no [train] section: it has no loss to take the gradient of",
                           hint="add [train] with prediction, target and loss (docs/workflows.md)")
        for step, param in self.bind:
            if step not in wf.steps:
                raise StudioError(f"bind '{step}.{param}': the workflow has no step '{step}'", file=str(self.path),
                                  field="bind", hint="steps: " + ", ".join(wf.steps))
        self.names = [n for n, s in wf.sources.items() if s.trainable]
        self._ctx = None

    # pickled to the owners without their per-process context
    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_ctx"}

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._ctx = None

    def use(self, ctx) -> WorkflowGradient:
        """Compute in this process with ``ctx`` (an open Context) instead of opening one."""
        self._ctx = ctx
        return self

    @property
    def hash(self) -> str:
        return digest("workflow-gradient/v1", self.text, repr(self.bind), self.place)

    def _context(self):
        """This owner's context: one per owner process (kept on its Dask worker, so the device and
        the conformance verdicts it earned serve every step and every run on that worker)."""
        if self._ctx is None:
            from ..context import Context
            try:
                from distributed import get_worker
                held = get_worker().__dict__.setdefault("scellis_contexts", {})
            except ValueError:                                   # not on a worker: this process
                held = {}
            key = self.home or ""
            if key not in held:
                held[key] = Context.open(home=Path(self.home) if self.home else None)
            self._ctx = held[key]
        return self._ctx

    def shapes(self, ctx=None) -> dict[str, tuple[int, ...]]:
        t = self._trainer(self._workflow([]), ctx or self._context(), None)
        return {n: t.params[n].shape for n in self.names}

    def initial(self, ctx=None) -> np.ndarray:
        t = self._trainer(self._workflow([]), ctx or self._context(), None)
        return np.concatenate([t.params[n].reshape(-1) for n in self.names]).astype(np.float32)

    def _workflow(self, words):
        from ..workflow.spec import parse_workflow
        wf = parse_workflow(self.text, file=str(self.path), base=self.path.parent)
        steps = dict(wf.steps)
        for (step, param), w in zip(self.bind, words):
            steps[step] = replace(steps[step], params={**steps[step].params, param: round(float(w))})
        return replace(wf, steps=steps)

    def _trainer(self, wf, ctx, params):
        from ..workflow.train import Trainer
        return Trainer(ctx, wf, receipts=self.receipts, allow_unverified=self.allow_unverified, params=params,
                       place=self.place)

    def _unflatten(self, flat: np.ndarray, shapes) -> dict[str, np.ndarray]:
        out, i = {}, 0
        for n in self.names:
            size = int(np.prod(shapes[n]))
            out[n] = np.asarray(flat[i:i + size], np.float32).reshape(shapes[n])
            i += size
        return out

    def contributions(self, params: np.ndarray, samples: np.ndarray) -> np.ndarray:
        """Per sample: the flattened gradient of the loss at ``params`` (f32)."""
        ctx = self._context()
        rows = []
        shapes = None
        for words in np.asarray(samples):
            tr = self._trainer(self._workflow(words), ctx, None)
            shapes = shapes or {n: tr.params[n].shape for n in self.names}
            p = self._unflatten(np.asarray(params, np.float32), shapes)
            _, grads, _, _ = tr.gradients(p)
            rows.append(np.concatenate([np.asarray(grads[n], np.float32).reshape(-1) for n in self.names]))
        k = int(np.asarray(params).size)
        return np.asarray(rows, np.float32).reshape(-1, k)

    def losses(self, params: np.ndarray, samples: np.ndarray) -> np.ndarray:
        """Per sample: the loss at ``params`` (for reports)."""
        ctx = self._context()
        out = []
        for words in np.asarray(samples):
            tr = self._trainer(self._workflow(words), ctx, None)
            shapes = {n: tr.params[n].shape for n in self.names}
            _, loss, _, _ = tr.forward(self._unflatten(np.asarray(params, np.float32), shapes))
            out.append(float(loss.array.reshape(-1)[0]))
        return np.asarray(out, np.float64)
