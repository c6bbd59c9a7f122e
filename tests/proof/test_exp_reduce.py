"""Honest classes for exp-and-reduce ops (docs/tolerance.md, "The bound, per output"): a per-output
bound from the reference's own terms(), for the forward and the device VJP alike, with WGSL's
exp / log / inverseSqrt accuracy; one class rule for `scellis check` and conformance; backward
classes capped like forward ones; and the shipped core/nn ops (softmax, logsumexp, layernorm),
each with broken twins that fail, judged on the conformance path (judge, conform_backward) over
cases of five seeds."""
from dataclasses import replace

import numpy as np
import pytest
from conftest import BUILTINS, copy_package

from studio.engine.contract.package import load_package
from studio.engine.contract.tolerance import (
    check_backward_class,
    check_class_fits_category,
    class_rule,
    compare,
    parse_tolerance,
)
from studio.engine.device.execution import Case, run_cases
from studio.engine.errors import StudioError
from studio.engine.proof import progressive
from studio.engine.proof.backward_conformance import conform_backward
from studio.engine.proof.bounds import forward_bounds
from studio.engine.proof.checker import check_package
from studio.engine.proof.conformance import conform, judge
from studio.engine.proof.corpus import CorpusCase

NN = BUILTINS / "nn"
SEEDS = range(5)


def _cases(name: str, seed: int) -> list[CorpusCase]:
    """Cases of one seed: a full-width row (cols = 256), odd widths, one column; values from
    N(0, 1) to wide spreads (exp arguments down to about -700) and large magnitudes."""
    rng = np.random.default_rng([seed, 37])
    shapes = [(3, 256), (65, 7), (2, 255), (4, 1), (1, 33)]
    scales = [1.0, 30.0, 300.0] if name != "layernorm" else [1.0, 1e3, 1e-3]
    out = []
    for shape in shapes:
        for scale in scales:
            x = (rng.normal(size=shape) * scale + rng.normal() * scale).astype(np.float32)
            out.append(CorpusCase(len(out), "random", "normal", {"rows": shape[0], "cols": shape[1]}, {}, {"x": x},
                                  seed=seed))
    return out


def _forward_failures(ctx, pkg, cases):
    refs = ctx.references
    return progressive.forward(ctx, pkg, cases, lambda c, r: judge(refs, pkg, c, r), timing=progressive.Timing())


def _backward(ctx, pkg, cases):
    with ctx.references.caching():
        passing = [(c, ctx.references.forward(pkg, c.inputs, c.params)) for c in cases]
        return conform_backward(ctx, pkg, passing)


# ------------------------------------------------------------------ one rule at check and conformance
RULE_TABLE = [   # (forward class, category, backward class): accepted by both, or refused by both
    ("bound(exp)", "normalization", "bound(exp)", True),
    # the class fits 'elementwise' at both; whether softmax *is* elementwise is the category check's
    # verdict on the reference path (refused at conformance, and check's line says it is verified there)
    ("ulp(4, exp)", "elementwise", "bound(exp)", True),
    ("bound(0.5, exp)", "normalization", "exact", True),
    ("ulp(4, exp)", "normalization", "bound(exp)", False),        # a fixed ulp count for an accumulation
    ("bound(exp)", "stencil", "bound(exp)", True),                 # a stencil with exp: bound(exp) + terms()
    ("ulp(4, exp)", "stencil", "bound(exp)", False),               # judged at its own input element: elementwise only
    ("bound(exp)", "reduction", "bound(exp)", True),
    ("ulp(4)", "reduction", "bound(exp)", False),
    ("bound(2, exp)", "normalization", "bound(exp)", False),       # looser than the standard bound
    ("bound", "elementwise", "bound(exp)", False),                 # plain bound: not an elementwise contract
    ("bound(exp)", "normalization", "ulp(16)", False),             # the backward's cap, like a forward's
    ("bound(exp)", "normalization", "ulp(4)", True),
    ("bound(exp)", "normalization", "bound(2)", False),
]


def _variant(tmp_path, i, cls, cat, bcls):
    return load_package(copy_package(NN / "softmax", tmp_path / f"op{i}", {"op.toml": [
        ('class = "bound(exp)"\ncategory = "normalization"', f'class = "{cls}"\ncategory = "{cat}"'),
        ('tolerance = "bound(exp)"', f'tolerance = "{bcls}"')]}))


def _class_errors(errors) -> list[str]:
    return [e.format() for e in errors if e.field in ("tolerance.class", "backward.tolerance")]


def test_check_applies_the_one_class_rule(ctx, tmp_path):
    """`scellis check` reports exactly tolerance.class_rule, the rule conformance refuses on; the
    table's verdicts (the whole table through check and conformance: the slow test below)."""
    pkg = load_package(NN / "softmax")
    for cls, cat, bcls, ok in RULE_TABLE:
        bk = replace(pkg.contract.backward_kernel, tolerance=parse_tolerance(bcls, "reduction"))
        c = replace(pkg.contract, tolerance=parse_tolerance(cls, cat), backward_kernel=bk)
        assert (class_rule(c, pkg.reference_source) == []) is ok, (cls, cat, bcls)
    pkg = _variant(tmp_path, 0, "ulp(4, exp)", "stencil", "ulp(16)")
    at_check = _class_errors(check_package(ctx, pkg, compile_kernel=False).errors)
    assert len(at_check) == 2 and at_check == _class_errors(class_rule(pkg.contract, pkg.reference_source,
                                                                       file=pkg.manifest_path))


@pytest.mark.slow
def test_conformance_refuses_what_check_refuses_and_nothing_else(ctx, tmp_path):
    """Rows of the table through conformance (one case each; the corpus is made once): what check
    accepts is never refused for its class, and what check refuses never earns a pass."""
    for i, (cls, cat, bcls, ok) in enumerate(RULE_TABLE[:2] + RULE_TABLE[4:6] + RULE_TABLE[-3:-1]):
        pkg = _variant(tmp_path, i, cls, cat, bcls)
        at_check = _class_errors(check_package(ctx, pkg, compile_kernel=False).errors)
        rep = conform(ctx, pkg, only_case=0, seeds=1)
        assert at_check == _class_errors(rep.category_errors), (cls, cat, bcls)
        assert ok or not rep.ok


def test_a_builtin_bound_without_terms_is_refused_at_check_and_conformance(ctx, tmp_path):
    root = copy_package(NN / "softmax", tmp_path / "op", {"reference.py": [("def terms(x):", "def _terms(x):")]})
    pkg = load_package(root)
    errs = check_package(ctx, pkg, compile_kernel=False).errors
    assert [e.field for e in errs] == ["tolerance.class"] and "defines none" in errs[0].message
    fails = _forward_failures(ctx, pkg, _cases("softmax", 0)[:1])     # and each case is refused, not judged
    assert fails and fails[0].kind == "reference_error" and "terms()" in fails[0].detail


def test_backward_classes_are_capped_like_forward_ones():
    def bw(cls):          # how the contract parses it
        return parse_tolerance(cls, "reduction")
    assert check_class_fits_category(parse_tolerance("ulp(64)", "elementwise"))
    assert check_backward_class(bw("ulp(16)"))[0].field == "backward.tolerance"
    assert check_backward_class(bw("ulp(4)")) == [] and check_backward_class(bw("exact")) == []
    assert check_backward_class(bw("bound(2)")) and check_backward_class(bw("bound")) == []
    assert check_backward_class(bw("bound(exp)"), has_terms=False)
    assert check_backward_class(bw("bound(exp)"), has_terms=True) == []
    assert check_backward_class(bw("ulp(2, exp)"))               # no input element of its own


def test_the_bound_prints_the_k_it_computes():
    t = parse_tolerance("bound", "reduction")
    mm = compare(t, np.float32([1.0]), np.float32([2.0]), magnitude=np.array([1.0]), terms=np.array([1.0]))
    assert "k = 1 terms" in mm.allowed and "gamma_(k+2)" in mm.allowed


def test_a_bound_allows_an_overflow_only_where_its_interval_reaches_it_and_a_flush_only_of_a_subnormal():
    t = parse_tolerance("bound", "reduction")
    top = np.float32(np.finfo(np.float32).max)
    near, far = np.float32([top]), np.float32([1e30])
    inf = np.float32([np.inf])
    assert compare(t, near, inf, magnitude=np.array([1e38]), terms=np.array([8.0])) is None
    assert compare(t, far, inf, magnitude=np.array([1e30]), terms=np.array([8.0])) is not None
    assert compare(t, near, -inf, magnitude=np.array([1e38]), terms=np.array([8.0])) is not None
    sub, normal, zero = np.float32([2.0 ** -130]), np.float32([2.0 ** -120]), np.float32([0.0])
    assert compare(t, sub, zero, magnitude=np.abs(sub.astype(float)), terms=np.array([1.0])) is None
    assert compare(t, normal, zero, magnitude=np.abs(normal.astype(float)), terms=np.array([1.0])) is not None


def test_bound_classes_name_wgsl_builtins():
    t = parse_tolerance("bound(0.5, exp, log)", "normalization")
    assert (t.factor, t.builtins, str(t)) == (0.5, ("exp", "log"), "bound(0.5, exp, log)")
    assert str(parse_tolerance("bound(exp)", "reduction")) == "bound(exp)"
    for bad in ("bound()", "bound(atan7)", "bound(1..2)"):
        with pytest.raises(StudioError):
            parse_tolerance(bad, "reduction")


# ------------------------------------------------------------------ the terms() bound, seed by seed
def test_softmax_terms_bound_holds_at_every_seed_and_a_tighter_one_does_not(ctx):
    """The honest per-output bound passes the correct kernel at each of five seeds; a tenth of it
    fails at some seed (one seed alone can hide a class that is too tight)."""
    pkg = load_package(NN / "softmax")
    tight = parse_tolerance("bound(0.1, exp)", "normalization")
    tight_fails = set()
    for seed in SEEDS:
        cases = _cases("softmax", seed)
        assert _forward_failures(ctx, pkg, cases) == [], seed
        for case in cases:
            got = run_cases(pkg, [Case(case.inputs, {})], device=ctx.device)[0].outputs
            want = ctx.references.forward(pkg, case.inputs, {})
            b = forward_bounds(ctx.references, pkg, case.inputs, {}, want)[0]["y"]
            if compare(tight, want["y"], got["y"], magnitude=b.magnitude, terms=b.terms,
                       allowance=b.allowance) is not None:
                tight_fails.add(seed)
    assert tight_fails, "a tenth of the honest bound should fail somewhere"


def test_the_all_ones_rule_is_never_used_where_terms_cancel(ctx, tmp_path):
    """Without vjp_terms(), a `bound` softmax VJP is refused with the reason (its VJP on all-ones
    inputs and cotangents is 0: the terms cancel), never judged with k = 1."""
    root = copy_package(NN / "softmax", tmp_path / "op", {
        "reference.py": [("def vjp_terms(x, dy):", "def _vjp_terms(x, dy):")],
        "op.toml": [('tolerance = "bound(exp)"', 'tolerance = "bound"')]})
    rep = _backward(ctx, load_package(root), _cases("softmax", 0)[:2])
    assert not rep.ok and "cancel" in rep.failures[0].detail and "vjp_terms" in rep.failures[0].detail


# ------------------------------------------------------------------ the shipped ops and their twins
@pytest.mark.slow
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "layernorm"])
def test_the_shipped_op_and_its_device_vjp_pass_at_five_seeds(ctx, name):
    pkg = load_package(NN / name)
    assert check_package(ctx, pkg, compile_kernel=False).ok
    for seed in SEEDS:
        cases = _cases(name, seed)
        fails = _forward_failures(ctx, pkg, cases)
        assert fails == [], fails[0].describe()
        rep = _backward(ctx, pkg, cases)
        assert rep.ok, rep.failures[0].describe() + str(rep.failures[0].mismatch)


FORWARD_TWINS = {
    "softmax without the max subtraction": ("softmax", "forward.wgsl", [
        ("    var m = x[base];\n    for (var j = 1u; j < p.cols; j = j + 1u) {\n        m = max(m, x[base + j]);\n    }",
         "    let m = 0.0;")]),
    "logsumexp that drops the max shift": ("logsumexp", "forward.wgsl", [
        ("    var m = x[base];\n    for (var j = 1u; j < p.cols; j = j + 1u) {\n        m = max(m, x[base + j]);\n    }",
         "    let m = 0.0;")]),
    "layernorm with the unbiased variance": ("layernorm", "forward.wgsl", [
        ("inverseSqrt(acc / n + EPS)", "inverseSqrt(acc / max(n - 1.0, 1.0) + EPS)")]),
}
BACKWARD_TWINS = {
    "softmax VJP without the -s (g . s) term": ("softmax", "backward.wgsl", [
        ("sj * ldexp(dy[base + j], -e) - sj * c", "sj * ldexp(dy[base + j], -e)")]),
    "logsumexp VJP with exp(x - m) for the softmax": ("logsumexp", "backward.wgsl", [
        ("dy[r] * (exp(x[base + j] - m) / s)", "dy[r] * exp(x[base + j] - m)")]),
    "layernorm VJP without the mean of dy": ("layernorm", "backward.wgsl", [
        ("(ldexp(dy[base + j], -e) - gbar)", "ldexp(dy[base + j], -e)")]),
}


@pytest.mark.parametrize("twin", sorted(FORWARD_TWINS))
def test_a_broken_forward_twin_fails(ctx, tmp_path, twin):
    name, file, edits = FORWARD_TWINS[twin]
    pkg = load_package(copy_package(NN / name, tmp_path / "twin", {file: edits}))
    assert any(_forward_failures(ctx, pkg, _cases(name, seed)) for seed in SEEDS[:2]), twin


@pytest.mark.parametrize("twin", sorted(BACKWARD_TWINS))
def test_a_broken_backward_twin_fails(ctx, tmp_path, twin):
    name, file, edits = BACKWARD_TWINS[twin]
    pkg = load_package(copy_package(NN / name, tmp_path / "twin", {file: edits}))
    assert not _backward(ctx, pkg, _cases(name, 0)).ok, twin
