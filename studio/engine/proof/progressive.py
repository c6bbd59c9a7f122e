"""How conformance dispatches its corpus: the progressive verdict (docs/performance.md).

- **Order.** The small cases first (fewest elements, then the corpus order): they are the most
  discriminating per second — the minimum sizes, the edges, the ties — so a broken kernel's first
  failure is found in the first submission; the big ones (the 2-D fold) come last.
- **Batched.** Each batch of cases is one submission on the device (execution.dispatch: one
  input arena, one output arena, one readback), with each case's outputs poisoned and canaried.
- **Streamed.** ``on_failure(failure)`` is called the moment the first failure is judged, and
  ``progress(done, total)`` after each batch; the report keeps failures in corpus order.
- **Cached by what they depend on.** Reference results come from the reference cache
  (trust/results.py); the category check and the backward conformance are remembered by the
  hashes their verdicts depend on (``category_key``, ``backward_key``), so a forward-only kernel
  edit re-runs neither, while a backward kernel, reference or contract edit re-runs them.
- **Timed.** Each phase's seconds, the first failure's and the forward verdict's (``Timing``).
- **Told as they land** (``Stream``): a front end hears the first failure, the forward verdict
  (the whole forward corpus judged) and the backward conformance's verdict the moment each is
  known, each with the wall-clock time the engine knew it; the mutation score and the receipt
  come with the report."""
from __future__ import annotations

import contextvars
import hashlib
import json
import time
from dataclasses import dataclass, field

import numpy as np

from ..contract.package import MANIFEST, OpPackage
from ..device.execution import Case, run_cases
from ..grad.vjp import backward_tensors

FIRST_BATCH = 16      # the first submission: small enough to answer at once
BATCH = 48

_PHASE_LISTENER: contextvars.ContextVar = contextvars.ContextVar("phase_listener", default=None)


class Stream:
    """The verdicts of one conformance run, told as they land through ``note(event)`` (a dict:
    ``kind`` is ``first_failure``, ``forward_verdict`` or ``backward_verdict``; ``at`` the
    wall-clock second the engine knew it). Use ``progress`` and ``on_failure`` as the run's
    callbacks, inside ``with stream:`` (which hears the remembered phases, e.g. the backward)."""

    def __init__(self, note, progress=None):
        self.note, self._progress = note, progress
        self.failed = False
        self.told: set = set()
        self._token = None

    def _tell(self, kind: str, **event) -> None:
        if self.note is not None and kind not in self.told:
            self.told.add(kind)
            self.note({"kind": kind, "at": time.time(), **event})

    def on_failure(self, failure) -> None:
        self.failed = True
        self._tell("first_failure", text=failure.describe())

    def progress(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress(done, total)
        if total and done >= total:                 # the forward corpus is judged (progressive.forward)
            self._tell("forward_verdict", verdict="fail" if self.failed else "pass", cases=int(total))

    def phase(self, phase: str, out) -> None:
        if phase == "backward" and out is not None and hasattr(out, "ok"):
            self._tell("backward_verdict", verdict="pass" if out.ok else "fail")

    def __enter__(self):
        self._token = _PHASE_LISTENER.set(self.phase)
        return self

    def __exit__(self, *exc) -> None:
        _PHASE_LISTENER.reset(self._token)


@dataclass
class Timing:
    """Seconds per phase of one conformance run, and when the first verdicts were known (seconds
    from its start): ``first_failure`` (None: no failure), ``forward`` (the forward corpus
    judged), ``total``; ``cached`` names the phases answered from a cache."""
    start: float = field(default_factory=time.perf_counter)
    phases: dict = field(default_factory=dict)
    first_failure: float | None = None
    forward: float | None = None
    total: float | None = None
    cached: list = field(default_factory=list)

    def add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def since(self) -> float:
        return time.perf_counter() - self.start

    def to_json(self) -> dict:
        def r(v):
            return None if v is None else round(v, 4)
        out = {"phases": {k: r(v) for k, v in self.phases.items()}, "first_failure_s": r(self.first_failure),
               "forward_verdict_s": r(self.forward), "total_s": r(self.total), "cached": list(self.cached)}
        return out | {"line": timing_text(out)}

    def line(self) -> str:
        return timing_text(self.to_json())


def timing_text(timing: dict | None) -> str:
    """The one presenter of a run's timing (its ``to_json``): each phase's seconds, "cached" for a
    phase answered from a cache, when the first failure and the forward verdict were known. The
    CLI's report line and the Studio's Conformance cell (the report's ``timing["line"]``) show it."""
    if not timing:
        return ""
    cached = set(timing.get("cached") or [])
    parts = [f"{k} {'cached' if k in cached else f'{v:.2f} s'}" for k, v in (timing.get("phases") or {}).items()]
    if timing.get("first_failure_s") is not None:
        parts.append(f"first failure at {timing['first_failure_s']:.2f} s")
    if timing.get("forward_verdict_s") is not None:
        parts.append(f"forward verdict at {timing['forward_verdict_s']:.2f} s")
    return " · ".join(parts)


def order(cases: list) -> list:
    """The small cases first, then the corpus order."""
    return sorted(cases, key=lambda c: (sum(int(np.size(v)) for v in c.inputs.values()), c.index))


def batches(cases: list):
    """FIRST_BATCH cases, then BATCH at a time."""
    if cases:
        yield cases[:FIRST_BATCH]
    for start in range(FIRST_BATCH, len(cases), BATCH):
        yield cases[start:start + BATCH]


def forward(ctx, pkg: OpPackage, cases: list, judge, *, timing: Timing, progress=None, on_failure=None,
            stop_after: int | None = None, each=None) -> list:
    """Dispatch and judge ``cases`` (small first, batched); ``judge(case, result) -> failures``,
    ``each(case, result, failures)`` per case. Returns the failures in corpus order."""
    failures: list = []
    done = 0
    for batch in batches(order(cases)):
        s = time.perf_counter()
        results = run_cases(pkg, [Case(c.inputs, c.params) for c in batch], device=ctx.device, guard=True)
        timing.add("dispatch", time.perf_counter() - s)
        s = time.perf_counter()
        for case, res in zip(batch, results):
            f = judge(case, res)
            if f and timing.first_failure is None:
                timing.first_failure = timing.since()
                if on_failure is not None:
                    on_failure(f[0])
            failures.extend(f)
            if each is not None:
                each(case, res, f)
        timing.add("compare", time.perf_counter() - s)
        done += len(batch)
        if progress:
            progress(done, len(cases))
        if stop_after is not None and len(failures) >= stop_after:
            break
    timing.forward = timing.since()
    failures.sort(key=lambda f: f.case.index)
    return failures


def _sha(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def corpus_for(ctx, pkg: OpPackage, generate, **kw):
    """``generate(signature, **kw)``, once per process for the same signature and settings (the
    corpus is a function of them alone: a kernel edit reuses it)."""
    sig = pkg.contract.signature
    key = ("corpus", sig.text, json.dumps(kw, sort_keys=True, default=repr))
    hit = ctx.references.results.recall(key)
    if hit is None:
        hit = generate(sig, **kw)
        ctx.references.results.remember(key, hit)
    return hit


def category_check(refs, pkg: OpPackage, cases: list, verify):
    """``verify(refs, pkg, cases)`` with reference results from the cache, except for a generator,
    whose check is that two real runs agree."""
    if pkg.contract.tolerance.category == "generator":
        return verify(refs, pkg, cases)
    with refs.caching():
        return verify(refs, pkg, cases)


def category_key(ctx, pkg: OpPackage, corpus, cases: list) -> tuple:
    """What the category check's verdict depends on: the reference, the contract, the cases."""
    return ("category", ctx.references.code_hash(pkg), _sha(pkg.files.get(MANIFEST)), corpus.hash,
            tuple(c.index for c in cases))


def backward_key(ctx, pkg: OpPackage, corpus, passing: list) -> tuple:
    """What the backward conformance's verdict depends on: the backward kernel, the reference, the
    contract, the cases it runs on, the GPU profile, and the forward kernel when the backward reads
    the forward's outputs (a role ``output`` binding)."""
    reads_outputs = any(backward_tensors(pkg).get(b.name, ("",))[0] == "output"
                        for b in pkg.contract.backward_kernel.bindings.bindings)
    return ("backward", ctx.references.code_hash(pkg), _sha(pkg.files.get(MANIFEST)), _sha(pkg.backward_source),
            _sha(pkg.kernel_source) if reads_outputs else "", corpus.hash, tuple(c.index for c, _ in passing),
            ctx.device.profile.id)


def remembered(ctx, key: tuple, compute, *, timing: Timing, phase: str):
    """The verdict remembered under ``key``, else ``compute()`` (remembered); timed as ``phase``."""
    s = time.perf_counter()
    cache = ctx.references.results
    hit = cache.recall(key)
    if hit is not None:
        timing.cached.append(phase)
        out = hit
    else:
        out = compute()
        cache.remember(key, out)
    timing.add(phase, time.perf_counter() - s)
    listener = _PHASE_LISTENER.get()
    if listener is not None:
        listener(phase, out)
    return out
