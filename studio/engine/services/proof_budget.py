"""The proof inside a run has its own time budget: conformance that runs first because an
op has no receipt here may take up to PROOF_BUDGET_S, however short the run's own budget
(``scellis run --timeout``; by default ``run_budget_s``, which scales with the run's size), and the
run's budget starts only when the proof ends.

The device worker restarts a request's budget at each sign of life (progress, worker/child.py and
worker/client.py). While a proof runs, ``ProofBudget`` gives one every HEARTBEAT_S — repeating the
proof's latest progress — until PROOF_BUDGET_S have passed; after that the heartbeat stops, so a
proof that hangs is still stopped, by the run's budget, one budget after its own ran out."""
from __future__ import annotations

import math
import threading
import time

from ..errors import StudioError

PROOF_BUDGET_S = 120.0
HEARTBEAT_S = 0.25
RUN_BASE_S = 5.0               # a run's default budget: this much, plus
RUN_PER_MILLION_S = 5.0        # this much per 10^6 elements of its inputs and outputs together


def run_budget_s(sig, inputs: dict, params: dict) -> float:
    """A run's default time budget (``sig``: the op's Signature), from its size: RUN_BASE_S plus RUN_PER_MILLION_S per million
    elements of its inputs and outputs (a 4-megapixel image in and out: 45 s; lavapipe needs 10 to
    40 s for such runs). Outputs whose shapes do not resolve count as the inputs do."""
    n_in = sum(int(getattr(a, "size", 0)) for a in inputs.values())
    try:
        env = sig.resolve({t.name: tuple(getattr(inputs.get(t.name), "shape", ())) for t in sig.inputs}, dict(params))
        n_out = sum(math.prod(s) for s in sig.output_shapes({**env, **params}).values())
    except (StudioError, KeyError, TypeError, ValueError, OverflowError):   # the run's own error, later
        n_out = n_in
    return RUN_BASE_S + RUN_PER_MILLION_S * (n_in + n_out) / 1e6


class ProofBudget:
    """``with ProofBudget(progress) as beat: conform(..., progress=beat.progress)``. Without a
    ``progress`` (not in the worker: nothing times the call) it does nothing."""

    def __init__(self, progress, budget_s: float = PROOF_BUDGET_S, every_s: float = HEARTBEAT_S):
        self._forward, self.budget_s, self.every_s = progress, budget_s, every_s
        self._last: tuple = (0, 1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.beats = 0

    def progress(self, *args) -> None:
        self._last = args
        if self._forward is not None:
            self._forward(*args)

    def _run(self) -> None:
        end = time.monotonic() + self.budget_s
        while True:
            self.beats += 1
            self._forward(*self._last)
            if self._stop.wait(self.every_s) or time.monotonic() >= end:
                return

    def __enter__(self) -> "ProofBudget":
        if self._forward is not None:
            self._thread = threading.Thread(target=self._run, name="scellis-proof-budget", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
