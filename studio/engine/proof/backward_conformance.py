"""Backward conformance: the device VJP (the `[backward]` kernel) against the reference VJP, on
the forward's own corpus cases — the same sizes and value kinds, ties included — with engine-made
cotangents of the same value kinds, judged by the class the contract declares for the backward
(`[backward] tolerance`). Gradients are poisoned and canaried like the forward's outputs, so an
element the kernel never writes, or a write past the end, is caught too.

Once the values pass, the race sanitizer (races.py) runs the device VJP instrumented on one of
these cases: a gradient element (or scratch) two invocations wrote fails, naming both, as in the
forward (failure kind ``race``).

The reference VJP runs at the signature's precision (f32 inputs and cotangents, as the device
sees them): a backward that gathers in a fixed order — the story median's — can then honestly
claim `exact`."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..context import Context
from ..contract.package import OpPackage
from ..contract.tolerance import compare
from ..errors import StudioError
from ..grad.vjp import backward_dispatch, cotangent_name, device_inputs, gradient_name
from ..trust.reference import cast_inputs
from . import hints
from . import races as races_mod
from .bounds import backward_bounds
from .corpus import VALUE_KINDS, CorpusCase, cotangent_values

BATCH = 32


@dataclass
class BackwardFailure:
    case: CorpusCase
    gradient: str
    kind: str                        # mismatch | unwritten | out_of_range_write | reference_error | race
    detail: str
    mismatch: object = None

    def describe(self) -> str:
        return f"{self.case.describe()}: {self.gradient}: {self.detail}"


@dataclass
class BackwardReport:
    tolerance: str
    total: int = 0
    passed: int = 0
    failures: list[BackwardFailure] = field(default_factory=list)
    workgroup_size: int | None = None
    fold_sizes: tuple = ()           # swept sizes at which the backward launch folds (sizes.py)
    races: dict | None = None        # the race sanitizer's run on the device VJP (races.py)

    def folded(self, f) -> bool:
        return any(v in self.fold_sizes for v in [*f.case.dims.values(), *f.case.params.values()])

    @property
    def ok(self) -> bool:
        return not self.failures and self.passed == self.total > 0

    def to_json(self) -> dict:
        return {"tolerance": self.tolerance, "cases": self.total, "passed": self.passed,
                "failed": self.total - self.passed, "verdict": "pass" if self.ok else "fail",
                "failing_classes": dict(Counter(f.case.shape_kind for f in self.failures)),
                "failures": [{"case": f.case.index, "gradient": f.gradient, "kind": f.kind, "detail": f.detail}
                             for f in self.failures[:20]], "races": self.races}

    def lines(self, repro: str) -> list[str]:
        out = [f"  backward  : device VJP vs reference VJP under {self.tolerance}: {self.passed} passed, "
               f"{self.total - self.passed} failed"]
        out += races_mod.lines(self.races, "vjp races")
        if self.failures:
            f = self.failures[0]
            out.append(f"  first backward failure  {f.describe()}")
            if f.mismatch is not None:
                out.append(f"               {f.mismatch.describe()}")
            why = hints.hint(f.case, f.kind, f.mismatch, workgroup_size=self.workgroup_size, folded=self.folded(f),
                             what="backward kernel")
            if why:
                out.append(f"               hint: {why}")
            out.append(f"  reproduce      {repro} --case {f.case.index}")
        return out


def cotangents_for(pkg: OpPackage, case: CorpusCase, outputs: dict) -> dict[str, np.ndarray]:
    """Engine-made cotangents for one case: the case's value kind over each output's shape
    (finite: a cotangent is a gradient), seeded by the case's index."""
    rng = np.random.default_rng([case.index, 11])
    kind = case.value_kind if case.value_kind in VALUE_KINDS else "normal"   # bands, kinks, inf, nan
    return {cotangent_name(o.name): cotangent_values(kind, outputs[o.name].shape, rng)
            for o in pkg.contract.signature.outputs}


def reference_gradients(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, cts: dict) -> dict:
    """The reference VJP at the signature's precision, for the inputs the device kernel computes."""
    want = set(device_inputs(pkg))
    arrays = cast_inputs(pkg, inputs, "f32")
    grads = {}
    for rule in pkg.contract.backward.rules:
        if not rule.device_kernel:
            continue
        out = ctx.references.call_as_given(pkg, rule.function, arrays, params, **cts)
        if not isinstance(out, dict):
            out = {rule.inputs[0]: out}
        for name in rule.inputs:
            if name in want:
                if name not in out:
                    raise StudioError(f"reference {rule.function} returned no gradient for '{name}'",
                                      file=pkg.reference_path, hint=f"return {{'{name}': gradient, ...}}")
                g = np.asarray(out[name])
                if g.size != np.size(inputs[name]):
                    raise StudioError(f"reference {rule.function} gradient '{name}' has shape {g.shape}, "
                                      f"the input has {np.shape(inputs[name])}", file=pkg.reference_path,
                                      hint=f"return an array of shape {np.shape(inputs[name])}")
                with np.errstate(over="ignore"):    # a gradient past the largest f32 rounds to inf, as on the device
                    grads[gradient_name(name)] = g.astype(np.float32).reshape(np.shape(inputs[name]))
    return grads


def conform_backward(ctx: Context, pkg: OpPackage, cases: list[tuple[CorpusCase, dict]],
                     fold_sizes=(), *, races: bool = False) -> BackwardReport:
    """``cases``: the forward's corpus cases with the device's forward outputs of each. ``races``:
    when every case's values pass, run the race sanitizer on the device VJP once (races.py;
    conformance does; a mutant's batches do not)."""
    bk = pkg.contract.backward_kernel
    rep = BackwardReport(str(bk.tolerance), workgroup_size=bk.workgroup_size, fold_sizes=tuple(fold_sizes))
    rep.total = len(cases)
    for start in range(0, len(cases), BATCH):
        batch = cases[start:start + BATCH]
        items = []
        for case, outs in batch:
            items.append((case.inputs, case.params, cotangents_for(pkg, case, outs), outs))
        results = backward_dispatch(ctx, pkg, items, guard=True)
        for (case, _outs), (inputs, params, cts, _), res in zip(batch, items, results):
            fails = _judge(ctx, pkg, bk.tolerance, case, inputs, params, cts, res)
            rep.failures.extend(fails)
            rep.passed += not fails
    if races and cases and not rep.failures:
        outs = {case.index: o for case, o in cases}
        found, rep.races = races_mod.sanitize(
            ctx.device, pkg, [case for case, _ in cases], check_case=lambda case: races_mod.check_backward(
                ctx, pkg, case, outs[case.index], cotangents_for(pkg, case, outs[case.index])))
        rep.failures += [BackwardFailure(case, r.buffer, "race", r.describe()) for case, r in found]
        rep.passed -= len({case.index for case, _ in found})
    return rep


def _judge(ctx, pkg, tol, case, inputs, params, cts, res) -> list[BackwardFailure]:
    try:
        want = reference_gradients(ctx, pkg, inputs, params, cts)
    except StudioError as e:
        return [BackwardFailure(case, "-", "reference_error", e.format())]
    try:
        hooked = vjp_terms(ctx, pkg, inputs, params, cts) if tol.kind == "bound" else None
        mags = _magnitudes(ctx, pkg, inputs, params, cts) if tol.kind == "bound" and hooked is None else {}
        bounds = backward_bounds(tol, lambda i, c: hooked,
                                 lambda i, c: reference_gradients(ctx, pkg, i, params, c), inputs, cts, want,
                                 mags) if tol.kind == "bound" else {}
    except StudioError as e:           # no honest bound for this case: refused, never judged loosely
        return [BackwardFailure(case, "-", "reference_error", f"its bound: {e.format()}")]
    fails = []
    for name, expected in want.items():
        b = bounds.get(name)
        terms, allowance = (b.terms, b.allowance) if b is not None else (1, None)
        if b is not None and b.magnitude is not None:
            mags[name] = b.magnitude
        hits, unwritten = res.guard(name, expected)
        if hits.size:
            fails.append(BackwardFailure(case, name, "out_of_range_write",
                                         f"wrote past the end of the gradient (element {int(hits[0])} past the last)"))
            continue
        if unwritten.size:
            fails.append(BackwardFailure(case, name, "unwritten",
                                         f"{unwritten.size} gradient element(s) never written, first at index "
                                         f"{int(unwritten[0])} (of {expected.size})"))
            continue
        mm = compare(tol, expected, res.outputs[name], magnitude=mags.get(name), terms=terms, allowance=allowance)
        if mm is not None:
            fails.append(BackwardFailure(case, name, "mismatch", f"differs beyond {tol}", mm))
    return fails


def vjp_terms(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, cts: dict) -> dict | None:
    """The reference's ``<vjp function>_terms`` for every device rule, in f64, keyed by gradient
    name (bounds.py); None when a rule's reference defines none."""
    want = set(device_inputs(pkg))
    out = {}
    for rule in pkg.contract.backward.rules:
        if not rule.device_kernel:
            continue
        try:
            ctx.references.function(pkg, f"{rule.function}_terms")
        except StudioError:
            return None
        raw = ctx.references.call(pkg, f"{rule.function}_terms", inputs, params,
                                  **{k: np.asarray(v, np.float64) for k, v in cts.items()})
        if len(rule.inputs) == 1 and not (isinstance(raw, dict) and rule.inputs[0] in raw and "terms" not in raw):
            raw = {rule.inputs[0]: raw}
        for name in rule.inputs:
            if name in want:
                if not isinstance(raw, dict) or name not in raw:
                    raise StudioError(f"reference {rule.function}_terms() gives nothing for '{name}'",
                                      file=pkg.reference_path, hint=f"return {{'{name}': {{'terms': ..., ...}}, ...}}")
                out[gradient_name(name)] = raw[name]
    return out


def _magnitudes(ctx, pkg, inputs, params, cts) -> dict:
    """For bound classes: the VJP of |inputs| and |cotangents| (every term's magnitude for the
    products-and-sums a VJP is), at least |the gradient| itself."""
    absin = {k: np.abs(np.asarray(v)) if np.asarray(v).dtype.kind == "f" else v for k, v in inputs.items()}
    abscts = {k: np.abs(v) for k, v in cts.items()}
    try:
        out = reference_gradients(ctx, pkg, absin, params, abscts)
        plain = reference_gradients(ctx, pkg, inputs, params, cts)
    except StudioError:
        return {}
    return {k: np.maximum(np.abs(out[k].astype(np.float64)), np.abs(plain[k].astype(np.float64))).reshape(-1)
            for k in out}

