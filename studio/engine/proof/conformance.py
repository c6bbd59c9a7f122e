"""Conformance: the kernel against the reference on the engine's corpus, judged by the
declared tolerance class; unwritten outputs and out-of-range writes caught by poison and canaries."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..context import Context
from ..contract.package import OpPackage
from ..contract.tolerance import Mismatch, class_rule, compare
from ..errors import StudioError
from ..trust.reference import References
from .backward_conformance import BackwardReport, conform_backward
from . import coverage, hints
from . import races as races_mod
from . import mutants as mutants_mod
from .bounds import forward_bounds
from . import progressive
from .category import verify_category
from .corpus import SEEDS, Corpus, CorpusCase, _dim_symbols, axis_env, generate, swept_env, swept_symbol
from .corpus import remember as remember_corpus
from .extremes import bytes_of
from ..device.launch import of_spec as launch_of
from .sizes import SizePlan
from .sizes import axis_workgroups, plan_axes
from .sizes import plan as plan_sizes

BATCH = 48
FOLD_BUDGET_BYTES = 96 << 20
HONESTY_SAMPLE = 1 << 16       # kernel outputs checked per case for the non-arithmetic categories   # the default corpus folds the launch when its inputs and outputs fit this


@dataclass
class CaseFailure:
    case: CorpusCase
    output: str
    kind: str                       # mismatch | unwritten | out_of_range_write | not_selected | reference_error | race
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
    plan: SizePlan | None = None     # the large sizes reached, and why any was not (sizes.py)
    workgroup_size: int | None = None
    coverage: dict | None = None     # what the run covered (coverage.py); goes on the receipt
    mutation: dict | None = None     # the mutation score (mutants.py), when mutants ran; goes on the receipt
    timing: progressive.Timing | None = None                    # the phases' seconds (progressive.py)
    races: dict | None = None        # the race sanitizer's run (races.py): its case, buffers and findings
    fails_when: str | None = None    # the values every failing case shares and no passing one (hints.fails_when)

    @property
    def ok(self) -> bool:
        return (not self.failures and not self.category_errors and self.passed == self.total > 0
                and (self.backward is None or self.backward.ok))

    def largest_size(self) -> int:
        """The largest swept size among the corpus's cases (the size a run is compared with)."""
        sym = swept_symbol(self.corpus.signature)
        return max((int({**c.params, **c.dims}.get(sym, 0)) for c in self.corpus.cases), default=0)

    def failing_classes(self) -> dict[str, int]:
        return dict(Counter(f.case.shape_kind for f in self.failures))

    def first_failure_lines(self) -> list[str]:
        if not self.failures:
            return []
        f = self.failures[0]
        lines = [f"first failure  {hints.labelled(f.case, self.fails_when)}",
                 f"               output {f.output}: {f.detail}"]
        if f.mismatch:
            lines.append(f"               {f.mismatch.describe()}")
        why = hints.hint(f.case, f.kind, f.mismatch, workgroup_size=self.workgroup_size, launch=self.fold)
        if why:
            lines.append(f"               hint: {why}")
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
                **({"fails_when": self.fails_when} if self.fails_when else {}),
                "category_errors": [e.format() for e in self.category_errors], "seconds": round(self.seconds, 3),
                "verdict": "pass" if self.ok else "fail", "reproduce": self.repro,
                "backward": self.backward.to_json() if self.backward is not None else None, "fold": self.fold,
                "sizes": self.plan.to_json() if self.plan is not None else None,
                "coverage": self.coverage, "mutation": self.mutation,
                "timing": self.timing.to_json() if self.timing is not None else None, "races": self.races,
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
    try:
        mags = _magnitude(refs, pkg, case) if tol.kind == "bound" and not tol.builtins else {}
        bounds = forward_bounds(refs, pkg, case.inputs, case.params, expected, mags)[0] if tol.kind == "bound" else {}
    except StudioError as e:           # no honest bound for this case: refused, never judged loosely
        return [CaseFailure(case, "-", "reference_error", f"its bound: {e.format()}")]
    for name, want in expected.items():
        b = bounds.get(name)
        terms, allowance = (b.terms, b.allowance) if b is not None else (1, None)
        if b is not None and b.magnitude is not None:
            mags[name] = b.magnitude
        arg = next((np.asarray(v).reshape(-1) for v in case.inputs.values() if np.asarray(v).size == want.size
                    and np.asarray(v).dtype.kind == "f"), None) if tol.kind == "ulp" and tol.builtins else None
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
                                     compare(tol, want, result.outputs[name], magnitude=mags.get(name), terms=terms, argument=arg,
                                             allowance=allowance)))
            continue
        mm = compare(tol, want, result.outputs[name], magnitude=mags.get(name), terms=terms, argument=arg,
                     allowance=allowance)
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
            extra_sizes: dict[str, int] | None = None, mutants: int = 0,
            progress=None, stop_after: int | None = None, on_failure=None,
            run_params: dict | None = None, seeds: int = SEEDS) -> ConformanceReport:
    """Run the generated corpus on ``ctx``'s device against the reference, small cases first
    (progressive.py). ``progress(done, total)`` is called after each batch, ``on_failure(failure)``
    the moment the first failure is found. ``seeds``: the small and extreme cases are made for
    this many seeds from ``seed`` (the large ones once; corpus.py)."""
    ctx.hosts.prestart()   # the reference's confined process boots while the device and corpus get ready
    device, refs = ctx.device, ctx.references
    t0 = time.perf_counter()
    plan = size_plan(pkg, device, seed, large)
    env_for = swept_env(pkg.contract.signature, seed)[0]     # a run's own size, at its own params (reliance.py)
    plan.add(extra_sizes or {}, pkg.contract, (lambda v: {**env_for(v), **run_params}) if run_params else env_for,
             device.profile.limits.get("max-compute-workgroups-per-dimension", 65535))
    corpus = progressive.corpus_for(ctx, pkg, generate, seed=seed, large=large, sizes=plan.sizes,
                                    seeds=seeds, workgroups=axis_workgroups(pkg.contract),
                                    **({"run_params": run_params} if run_params else {}))
    remember_corpus(ctx.corpora, corpus)      # the receipt made from it is checked without generating it again
    cases = corpus.cases if only_case is None else [c for c in corpus.cases if c.index == only_case]
    if only_case is not None and not cases:
        raise StudioError(f"the corpus has no case {only_case} (it has {len(corpus.cases)})", field="--case")
    rep = ConformanceReport(pkg.id, pkg.hash, str(pkg.contract.tolerance), corpus, device.profile.to_json(),
                            total=len(cases), plan=plan,
                            workgroup_size=pkg.contract.kernel.workgroup_size if pkg.contract.kernel else None)
    rep.repro = (f"scellis conform {pkg.root} --seed {seed}" + (f" --seeds {seeds}" if seeds != SEEDS else "")
                 + (" --large" if large else ""))
    timing = rep.timing = progressive.Timing(start=t0)
    timing.add("corpus", time.perf_counter() - t0)
    rep.category_errors = progressive.remembered(
        ctx, progressive.category_key(ctx, pkg, corpus, cases[:24]),
        lambda: progressive.category_check(refs, pkg, cases[:24], verify_category), timing=timing, phase="category")
    # the one class rule `scellis check` applies (tolerance.class_rule): what check refuses earns no receipt
    rep.category_errors = rep.category_errors + class_rule(pkg.contract, pkg.reference_source, file=pkg.manifest_path)
    passing: list[tuple[CorpusCase, dict]] = []

    def each(case, res, f):
        for name, v in pkg.contract.bindings.override_values(res.env).items():
            if v not in rep.overrides.setdefault(name, []):
                rep.overrides[name].append(v)
        rep.passed += not f
        if case.shape_kind == "fold" and (rep.fold is None or (f and not rep.fold.get("failed"))):
            rep.fold = {**_fold_facts(pkg, case, res, device), **({"failed": True} if f else {})}   # the first failing one
        if not f and pkg.contract.backward_kernel is not None:
            passing.append((case, res.outputs))
    with refs.caching():     # reference results by (reference hash, case): a kernel edit asks the reference nothing
        rep.failures = progressive.forward(ctx, pkg, cases, lambda case, res: judge(refs, pkg, case, res),
                                           timing=timing, progress=progress, on_failure=on_failure,
                                           stop_after=stop_after, each=each)
        if only_case is None and not rep.failures and pkg.contract.kernel is not None:   # one instrumented run
            s = time.perf_counter()
            found, rep.races = races_mod.sanitize(device, pkg, cases)
            rep.failures += [CaseFailure(case, r.buffer, "race", r.describe()) for case, r in found]
            rep.passed -= len({case.index for case, _ in found})
            timing.add("races", time.perf_counter() - s)
        if pkg.contract.backward_kernel is not None and (stop_after is None or len(rep.failures) < stop_after):
            passing.sort(key=lambda cr: cr[0].index)
            rep.backward = progressive.remembered(
                ctx, progressive.backward_key(ctx, pkg, corpus, passing),
                lambda: conform_backward(ctx, pkg, passing, plan.backward_fold_sizes(), races=True), timing=timing,
                phase="backward")
        if mutants and only_case is None and not rep.failures and not rep.category_errors:
            m0 = time.perf_counter()
            rep.mutation = mutants_mod.score(pkg, cases, lambda mpkg, cs: progressive.forward(
                ctx, mpkg, cs, lambda case, res: judge(refs, mpkg, case, res), timing=progressive.Timing(),
                stop_after=1), count=mutants, seed=seed)
            if rep.backward is not None and rep.backward.ok and pkg.backward_source:
                # the device VJP's mutants depend on what its conformance does (backward_key): a forward
                # kernel edit re-runs neither
                inner = progressive.Timing()           # timed within "mutants"; a hit is named in the line
                rep.mutation["backward"] = progressive.remembered(
                    ctx, ("backward mutants", mutants, seed, *progressive.backward_key(ctx, pkg, corpus, passing)),
                    lambda: mutants_mod.score(pkg, passing, lambda mpkg, cs: _backward_failures(ctx, mpkg, cs),
                                              count=mutants, seed=seed, part="backward"),
                    timing=inner, phase="backward mutants")
                timing.cached += inner.cached
            timing.add("mutants", time.perf_counter() - m0)
    if rep.failures and stop_after is None:
        rep.fails_when = hints.fails_when([f.case for f in rep.failures], cases)
    rep.coverage = coverage.summarize(rep)
    if rep.races is not None:        # the receipt says what the race sanitizer ran on and found
        rep.coverage["races"] = rep.races
    if rep.backward is not None and rep.backward.races is not None:   # and on the device VJP
        rep.coverage["backward_races"] = rep.backward.races
    timing.total = timing.since()
    rep.seconds = time.perf_counter() - t0
    return rep


def _backward_failures(ctx: Context, pkg: OpPackage, passing: list) -> list:
    """A backward mutant's failures: small cases first, a batch at a time, up to its first failing
    batch (the fold cases last: a mutant of the folded index survives every other)."""
    ordered = progressive.order([c for c, _ in passing])
    outs = {c.index: o for c, o in passing}
    for batch in progressive.batches(ordered):
        fails = conform_backward(ctx, pkg, [(c, outs[c.index]) for c in batch]).failures
        if fails:
            return fails
    return []


def size_plan(pkg: OpPackage, device, seed: int, large: bool) -> SizePlan:
    """The large sizes this op's corpus reaches (each kernel's own 2-D fold, a size near 10^6),
    and why any is not reached (sizes.py)."""
    limit = device.profile.limits.get("max-compute-workgroups-per-dimension", 65535)
    env_for, smallest = swept_env(pkg.contract.signature, seed)
    sig = pkg.contract.signature
    dims = _dim_symbols(sig)
    if pkg.contract.kernel is None or (smallest is None and len(dims) < 2):
        return SizePlan(not_reached=[{"what": "large sizes", "size": None,
                                      "why": "the op has no swept size or no kernel of its own"}])
    plan = plan_sizes(pkg.contract, env_for, smallest, limit, large=large, budget=FOLD_BUDGET_BYTES) \
        if smallest is not None else SizePlan(not_reached=[{
            "what": f"{swept_symbol(sig)}'s large sizes with the other dims at 1", "size": None,
            "why": "the signature admits no case with the other dims at 1: each axis's own sizes stand for them"}])
    if len(dims) > 1:             # each axis's own fold and large size, the other dims above 1
        plan_axes(plan, pkg.contract, {d: axis_env(sig, d, seed) for d in dims}, limit, large=large,
                  budget=FOLD_BUDGET_BYTES, bytes_at=lambda env: bytes_of(sig, env), primary=swept_symbol(sig))
    return plan


def _fold_facts(pkg: OpPackage, case: CorpusCase, res, device) -> dict:
    limit = device.profile.limits.get("max-compute-workgroups-per-dimension", 65535)
    g = launch_of(pkg.contract.kernel, res.env, limit, op=pkg.id)
    return {"case": case.index, "size": case.dims or case.params, "invocations": g.total_invocations,
            "workgroups": g.workgroups, "folded": g.folded is not None, "grid": list(g.grid), "fold": g.folded,
            "extra": g.extra}


def report_lines(rep: ConformanceReport) -> list[str]:
    lines = [f"conformance  {rep.op}  ({rep.package_hash[:16]})",
             f"  tolerance : {rep.tolerance}",
             f"  corpus    : {rep.total} cases, seed {rep.corpus.seed}"
             f"{f' (and the next {rep.corpus.seeds - 1}: small and extreme cases)' if rep.corpus.seeds > 1 else ''}"
             f"{', large' if rep.corpus.large else ''}, "
             f"hash {rep.corpus.hash[:16]}",
             f"  device    : {rep.profile['adapter'].get('device')} ({rep.profile['id']})",
             f"  result    : {rep.passed} passed, {rep.total - rep.passed} failed in {rep.seconds:.2f} s"]
    for e in rep.category_errors:
        lines.append("  category  : " + e.format().replace("\n", "\n              "))
    if rep.failures:
        classes = ", ".join(f"{k}: {v}" for k, v in rep.failing_classes().items())
        lines.append(f"  failing   : {classes}" + (f"; failures only where {rep.fails_when}" if rep.fails_when else ""))
        lines += ["  " + ln for ln in rep.first_failure_lines()]
    if rep.fold is not None:
        f = rep.fold
        lines.append(f"  geometry  : case {f['case']}: {f['invocations']} invocations in {f['workgroups']} workgroups"
                     + (f" (the launch folds, {f.get('fold') or 'into 2-D'}: a grid of "
                        f"{' × '.join(map(str, f.get('grid') or []))}, {f.get('extra', 0)} workgroup(s) past the end)"
                        if f["folded"] else " (no fold: the folded launch went untested)"))
    if rep.plan is not None:
        reached = ", ".join(f"{k} n = {v:,}" for k, v in sorted(rep.plan.sizes.items(), key=lambda kv: kv[1]))
        lines.append(f"  sizes     : largest {rep.largest_size():,}" + (f" ({reached})" if reached else ""))
        for k, g in rep.plan.invocations.items():
            if k == "backward_fold":
                lines.append(f"  geometry  : backward: {g['invocations']} invocations in {g['workgroups']} workgroups of "
                             f"{g['workgroup_size']}" + (" (folds into 2-D)" if g["folded"] else " (no fold)"))
        for miss in rep.plan.not_reached:
            lines.append(f"  not reached: {miss['what']}: {miss['why']}")
    lines += coverage.extremes_lines(rep.corpus)
    for name, vals in rep.overrides.items():
        vals = sorted(vals)
        lines.append(f"  overrides : {name}: {len(vals)} value(s) compiled and run: {', '.join(map(str, vals))}")
    if rep.backward is not None:
        lines += rep.backward.lines(rep.repro)
    lines += mutants_mod.lines(rep.mutation)
    lines += races_mod.lines(rep.races)
    if rep.timing is not None:
        lines.append(f"  time      : {rep.timing.line()}")
    lines.append("  verdict   : " + ("PASS" if rep.ok else "FAIL"))
    return lines
