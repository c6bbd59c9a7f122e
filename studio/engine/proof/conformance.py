"""Conformance: the kernel against the reference on the engine's corpus, judged by the
declared tolerance class; unwritten outputs and out-of-range writes caught by poison and canaries."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..context import Context
from ..contract.package import OpPackage
from ..contract.tolerance import Mismatch, compare
from ..device.execution import Case, run_cases
from ..errors import StudioError
from ..precision import DTYPE_BYTES
from ..trust.reference import References
from .backward_conformance import BackwardReport, conform_backward
from .category import verify_category
from .corpus import Corpus, CorpusCase, fold_case_size, generate

BATCH = 48
FOLD_BUDGET_BYTES = 96 << 20
HONESTY_SAMPLE = 1 << 16       # kernel outputs checked per case for the non-arithmetic categories   # the default corpus folds the launch when its inputs and outputs fit this


@dataclass
class CaseFailure:
    case: CorpusCase
    output: str
    kind: str                       # mismatch | unwritten | out_of_range_write | not_selected | reference_error
    detail: str
    mismatch: Mismatch | None = None

    def describe(self) -> str:
        return f"{self.case.describe()}: {self.output}: {self.detail}"


@dataclass
class ConformanceReport:
    op: str
    package_hash: str
    tolerance: str
    corpus: Corpus
    profile: dict
    total: int = 0
    passed: int = 0
    failures: list[CaseFailure] = field(default_factory=list)
    category_errors: list[StudioError] = field(default_factory=list)
    seconds: float = 0.0
    repro: str = ""
    backward: BackwardReport | None = None
    fold: dict | None = None         # the 2-D launch fold case: its size, invocations and workgroups
    overrides: dict[str, list] = field(default_factory=dict)   # WGSL override -> every value compiled and run

    @property
    def ok(self) -> bool:
        return (not self.failures and not self.category_errors and self.passed == self.total > 0
                and (self.backward is None or self.backward.ok))

    def failing_classes(self) -> dict[str, int]:
        return dict(Counter(f.case.shape_kind for f in self.failures))

    def first_failure_lines(self) -> list[str]:
        if not self.failures:
            return []
        f = self.failures[0]
        lines = [f"first failure  {f.case.describe()}",
                 f"               output {f.output}: {f.detail}"]
        if f.mismatch:
            lines.append(f"               {f.mismatch.describe()}")
            if np.isnan(f.mismatch.expected) != np.isnan(f.mismatch.got):
                lines.append("               hint: WGSL lets the compiler assume no NaNs, so `x != x` or `isNan`-"
                             "style comparisons may be folded away; test NaN by its bits: "
                             "(bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u")
        lines.append(f"reproduce      {self.repro} --case {f.case.index}")
        return lines

    def to_json(self) -> dict:
        def fail(f: CaseFailure):
            d = {"case": f.case.index, "shape_kind": f.case.shape_kind, "value_kind": f.case.value_kind,
                 "dims": f.case.dims, "params": f.case.params, "output": f.output, "kind": f.kind, "detail": f.detail}
            if f.mismatch:
                m = f.mismatch
                d.update(index=m.index, expected=repr(m.expected), got=repr(m.got),
                         expected_bits=f"0x{m.expected_bits:08x}", got_bits=f"0x{m.got_bits:08x}", allowed=m.allowed)
            return d
        return {"op": self.op, "package_hash": self.package_hash, "tolerance": self.tolerance,
                "corpus": {**self.corpus.identity, "hash": self.corpus.hash, "cases": self.total},
                "gpu_profile": self.profile["id"], "passed": self.passed, "failed": self.total - self.passed,
                "failing_classes": self.failing_classes(), "failures": [fail(f) for f in self.failures[:50]],
                "category_errors": [e.format() for e in self.category_errors], "seconds": round(self.seconds, 3),
                "verdict": "pass" if self.ok else "fail", "reproduce": self.repro,
                "backward": self.backward.to_json() if self.backward is not None else None, "fold": self.fold,
                **({"overrides": {k: sorted(v) for k, v in self.overrides.items()}} if self.overrides else {})}


def _magnitude(refs: References, pkg: OpPackage, case: CorpusCase) -> dict[str, np.ndarray]:
    """Sum of |terms| per output, for the bound classes: the reference's own `magnitude`
    when it defines one, else the forward on |inputs| in f64."""
    try:
        fn = refs.function(pkg, "magnitude")
    except StudioError:
        fn = None
    if fn is not None:
        out = refs.call(pkg, "magnitude", case.inputs, case.params)
    else:
        absin = {k: np.abs(np.asarray(v, np.float64)) for k, v in case.inputs.items()}
        out = refs.call(pkg, pkg.contract.reference_forward, absin, case.params)
    if not isinstance(out, dict):
        out = {pkg.contract.signature.outputs[0].name: out}
    return {k: np.abs(np.asarray(v, np.float64)).reshape(-1) for k, v in out.items()}


def judge(refs: References, pkg: OpPackage, case: CorpusCase, result) -> list[CaseFailure]:
    tol = pkg.contract.tolerance
    fails = []
    try:
        expected = refs.forward(pkg, case.inputs, case.params)
    except StudioError as e:
        return [CaseFailure(case, "-", "reference_error", e.format())]
    mags = _magnitude(refs, pkg, case) if tol.kind == "bound" else {}
    terms = max([np.asarray(v).size for v in case.inputs.values()] + [1])
    for name, want in expected.items():
        hits, unwritten = result.guard(name, want)
        if hits.size:
            fails.append(CaseFailure(case, name, "out_of_range_write",
                                     f"wrote past the end: the word(s) at {want.size + int(hits[0])} "
                                     f"(element {int(hits[0])} past the last) changed"))
            continue
        if unwritten.size:
            fails.append(CaseFailure(case, name, "unwritten",
                                     f"{unwritten.size} element(s) never written, first at index {int(unwritten[0])} "
                                     f"(of {want.size})",
                                     # the first unwritten element as a mismatch: expected bits vs the poison
                                     compare(tol, want, result.outputs[name], magnitude=mags.get(name), terms=terms)))
            continue
        mm = compare(tol, want, result.outputs[name], magnitude=mags.get(name), terms=terms)
        if mm is not None:
            fails.append(CaseFailure(case, name, "mismatch", f"differs beyond {tol}", mm))
            continue
        foreign = not_from_inputs(pkg, case, name, result.outputs[name])
        if foreign:
            fails.append(CaseFailure(case, name, "not_selected", foreign))
    return fails


def not_from_inputs(pkg: OpPackage, case: CorpusCase, name: str, got: np.ndarray) -> str | None:
    """Honesty on the kernel's own outputs: an op of a category that does no arithmetic (selection,
    permutation, copy) outputs, bit for bit, values of its inputs or parameters (clip's bounds)."""
    if pkg.contract.tolerance.category not in ("selection", "permutation", "copy"):
        return None
    got = np.ascontiguousarray(got)
    if got.dtype.itemsize != 4:
        return None
    pool = [np.ascontiguousarray(np.asarray(v, got.dtype)).reshape(-1).view(np.uint32) for v in case.inputs.values()]
    pool += [np.asarray([v], got.dtype).view(np.uint32) for v in case.params.values()]
    bits = got.reshape(-1).view(np.uint32)
    where = np.arange(bits.size)
    if bits.size > HONESTY_SAMPLE:   # a seeded sample of the big cases' outputs keeps the check cheap
        where = np.sort(np.random.default_rng(case.index).choice(bits.size, HONESTY_SAMPLE, replace=False))
    allowed = np.sort(np.concatenate(pool)) if pool else np.array([], np.uint32)
    at = np.minimum(np.searchsorted(allowed, bits[where]), max(allowed.size - 1, 0))
    bad = where[allowed[at] != bits[where]] if allowed.size else where
    if bad.size == 0:
        return None
    i = int(bad[0])
    return (f"the kernel's {name}[{i}] = {got.reshape(-1)[i]!r} (0x{bits[i]:08x}) is not bit for bit one of the "
            f"inputs, yet the category '{pkg.contract.tolerance.category}' selects ({bad.size} such element(s))")


def conform(ctx: Context, pkg: OpPackage, *, seed: int = 0, large: bool = False, only_case: int | None = None,
            progress=None, stop_after: int | None = None) -> ConformanceReport:
    """Run the generated corpus on ``ctx``'s device against the reference. ``progress(done, total)``
    is called after each batch."""
    ctx.hosts.prestart()   # the reference's confined process boots while the device and corpus get ready
    device, refs = ctx.device, ctx.references
    t0 = time.perf_counter()
    corpus = generate(pkg.contract.signature, seed=seed, large=large, fold_size=_fold_size(pkg, device, large))
    cases = corpus.cases if only_case is None else [c for c in corpus.cases if c.index == only_case]
    if only_case is not None and not cases:
        raise StudioError(f"the corpus has no case {only_case} (it has {len(corpus.cases)})", field="--case")
    rep = ConformanceReport(pkg.id, pkg.hash, str(pkg.contract.tolerance), corpus, device.profile.to_json(),
                            total=len(cases))
    rep.repro = f"scellis conform {pkg.root} --seed {seed}" + (" --large" if large else "")
    rep.category_errors = verify_category(refs, pkg, cases[:24])
    done = 0
    passing: list[tuple[CorpusCase, dict]] = []
    for start in range(0, len(cases), BATCH):
        batch = cases[start:start + BATCH]
        results = run_cases(pkg, [Case(c.inputs, c.params) for c in batch], device=device, guard=True)
        for case, res in zip(batch, results):
            for name, v in pkg.contract.bindings.override_values(res.env).items():
                if v not in rep.overrides.setdefault(name, []):
                    rep.overrides[name].append(v)
            f = judge(refs, pkg, case, res)
            rep.failures.extend(f)
            rep.passed += not f
            if case.shape_kind == "fold":
                rep.fold = _fold_facts(pkg, case, res, device)
            if not f and pkg.contract.backward_kernel is not None:
                passing.append((case, res.outputs))
        done += len(batch)
        if progress:
            progress(done, len(cases))
        if stop_after is not None and len(rep.failures) >= stop_after:
            break
    if pkg.contract.backward_kernel is not None and (stop_after is None or len(rep.failures) < stop_after):
        rep.backward = conform_backward(ctx, pkg, passing)
    rep.seconds = time.perf_counter() - t0
    return rep


def _fold_size(pkg: OpPackage, device, large: bool) -> int | None:
    """A size past the engine's 2-D launch fold: always under --large; in the default corpus when its
    inputs and outputs fit FOLD_BUDGET_BYTES (about a second of lavapipe time for the story op)."""
    k = pkg.contract.kernel
    if k is None:
        return None
    size = fold_case_size(k.workgroup_size, device.profile.limits.get("max-compute-workgroups-per-dimension", 65535))
    if large:
        return size
    sig = pkg.contract.signature
    per_element = sum(DTYPE_BYTES[t.dtype] for t in sig.inputs + sig.outputs) or 4
    return size if size * per_element <= FOLD_BUDGET_BYTES else None


def _fold_facts(pkg: OpPackage, case: CorpusCase, res, device) -> dict:
    invocations = int(pkg.contract.kernel.invocations.eval(res.env))
    groups = -(-invocations // pkg.contract.kernel.workgroup_size)
    limit = device.profile.limits.get("max-compute-workgroups-per-dimension", 65535)
    return {"case": case.index, "size": case.dims or case.params, "invocations": invocations, "workgroups": groups,
            "folded": groups > limit}


def report_lines(rep: ConformanceReport) -> list[str]:
    lines = [f"conformance  {rep.op}  ({rep.package_hash[:16]})",
             f"  tolerance : {rep.tolerance}",
             f"  corpus    : {rep.total} cases, seed {rep.corpus.seed}{', large' if rep.corpus.large else ''}, "
             f"hash {rep.corpus.hash[:16]}",
             f"  device    : {rep.profile['adapter'].get('device')} ({rep.profile['id']})",
             f"  result    : {rep.passed} passed, {rep.total - rep.passed} failed in {rep.seconds:.2f} s"]
    for e in rep.category_errors:
        lines.append("  category  : " + e.format().replace("\n", "\n              "))
    if rep.failures:
        classes = ", ".join(f"{k}: {v}" for k, v in rep.failing_classes().items())
        lines.append(f"  failing   : {classes}")
        lines += ["  " + ln for ln in rep.first_failure_lines()]
    if rep.fold is not None:
        f = rep.fold
        lines.append(f"  geometry  : case {f['case']}: {f['invocations']} invocations in {f['workgroups']} workgroups"
                     + (" (the launch folds into 2-D)" if f["folded"] else " (no fold: the 2-D launch went untested)"))
    for name, vals in rep.overrides.items():
        vals = sorted(vals)
        lines.append(f"  overrides : {name}: {len(vals)} value(s) compiled and run: {', '.join(map(str, vals))}")
    if rep.backward is not None:
        lines += rep.backward.lines(rep.repro)
    lines.append("  verdict   : " + ("PASS" if rep.ok else "FAIL"))
    return lines
