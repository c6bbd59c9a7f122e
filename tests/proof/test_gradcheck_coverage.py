"""Gradcheck over the parameter space, and where finite differences are blind.
One receipt covers what it records: every value of a small integer domain, a float across
its domain, several sizes; training outside that coverage checks its own params first. Elements
are planted at several distances from every kink, and at exact ties a selection's VJP must route
to the element the forward selected. Each check has a mutant in tests/data/mutants/ that it must
reject, and an equivalent rewrite that it must pass."""
import json
import math
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import BUILTINS, MEDIAN, REPO, copy_package

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof import gradpoints as gp
from studio.engine.proof.gradcheck import gradcheck
from studio.engine.proof.gradcoverage import outside, recorded
from studio.engine.proof.receipts import gradcheck_receipt_path, write_gradcheck_receipt
from studio.engine.train.autodiff import Tape

MUTANTS = REPO / "tests" / "data" / "mutants"
ODD_W = list(range(1, 32, 2))


@pytest.fixture
def op(tmp_path):
    """A package of tests/data/mutants, copied and authored here (its reference may run)."""
    def make(name: str):
        return load_package(copy_package(MUTANTS / name, tmp_path / name))
    return make


@pytest.fixture(scope="module")
def story(module_ctx):
    """The story op's full gradcheck, no param given, timed."""
    pkg = load_package(MEDIAN)
    gradcheck(module_ctx, pkg, {"w": 3})                      # the reference host is warm
    t = time.perf_counter()
    rep = gradcheck(module_ctx, pkg)
    return rep, time.perf_counter() - t


def _site(rep, probe):
    return rep.sites[probe.site]


# ------------------------------------------------------------------ point 2: the parameter space

@pytest.mark.slow
def test_the_story_gradcheck_covers_every_odd_w_at_several_sizes(story):
    rep, seconds = story
    assert rep.verdict == "pass", "\n".join(rep.lines())
    cov = rep.coverage
    assert cov["params"]["w"] == {"values": ODD_W, "rule": "every admissible value (16)"}
    assert cov["not_covered"] == []
    # every w was measured at a site of its own, and the main w at the tight size n = w, n = w + 1, n = w + 24
    assert {s["params"]["w"] for s in rep.sites if s["kind"] == "sweep"} == set(ODD_W)
    assert {tuple(s["shapes"]["x"]) for s in rep.sites if s["params"]["w"] == 7} >= {(7,), (8,), (31,)}
    assert [1] in cov["sizes"]["x"] and [31] in cov["sizes"]["x"]
    lines = "\n".join(rep.lines())
    assert "  covers   : w = 1, 3, 5, 7, ..., 25, 27, 29, 31  (every admissible value (16))" in lines
    assert "  sweep    : " in lines and "  sizes    : x: 1, " in lines
    assert seconds < 20, f"the story op's full gradcheck took {seconds:.1f} s"


def test_the_receipt_records_what_was_covered(story, tmp_path):
    rep, _ = story
    pkg = load_package(MEDIAN)
    path = write_gradcheck_receipt(pkg, rep, tmp_path)
    assert json.loads(path.read_text())["coverage"] == json.loads(json.dumps(rep.coverage))
    cov = recorded(pkg, tmp_path)
    assert cov["params"]["w"]["values"] == ODD_W
    assert outside(cov, pkg.contract.signature, {"w": 29}) == []


@pytest.mark.slow
def test_a_vjp_wrong_only_at_w29_fails_the_default_gradcheck(ctx, op):
    """Before: earned at w = 7 only, so this mutant passed and trained at w = 29 with the gradient negated."""
    pkg = op("median_sign_w29")
    rep = gradcheck(ctx, pkg)
    assert (rep.verdict, rep.exit_code) == ("fail", 1)
    assert "w = 29" in rep.why
    worst = max(rep.counted, key=lambda p: p.error)
    assert _site(rep, worst)["params"]["w"] == 29 and worst.error > 1
    assert rep.max_error == pytest.approx(2.0)
    res = subprocess.run([sys.executable, "-m", "studio.cli", "gradcheck", str(pkg.root), "--no-receipt"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 1 and "verdict  : FAIL" in res.stdout and "w = 29" in res.stdout, res.stderr


def test_the_w29_mutant_is_the_story_op_but_for_the_planted_line():
    story = (MEDIAN / "reference.py").read_text().splitlines()
    mutant = (MUTANTS / "median_sign_w29" / "reference.py").read_text().splitlines()
    changed = [(a, b) for a, b in zip(story, mutant) if a != b]
    assert len(story) == len(mutant) and len(changed) == 1 and "MUTANT" in changed[0][1]
    assert (MEDIAN / "forward.wgsl").read_text() == (MUTANTS / "median_sign_w29" / "forward.wgsl").read_text()


@pytest.mark.slow
def test_training_outside_the_coverage_checks_its_own_params_first(ctx, device, op, tmp_path):
    """A receipt earned at w = 7 (given) covers w = 7 only: training at w = 29 runs gradcheck at
    w = 29 first, which this mutant fails, so training refuses it before any VJP runs, naming the
    command that shows the report."""
    pkg = op("median_sign_w29")
    rep = gradcheck(ctx, pkg, {"w": 7})
    assert rep.verdict == "pass" and rep.coverage["params"]["w"]["values"] == [7]
    write_gradcheck_receipt(pkg, rep, tmp_path)
    x = np.random.default_rng(3).standard_normal(200).astype(np.float32)
    tape = Tape(ctx, receipts=tmp_path, place="reference")
    y = tape.call(pkg, {"x": tape.leaf(x, trainable=True)}, {"w": 29})["y"]
    with pytest.raises(StudioError) as e:
        tape.backward(y)
    msg = e.value.message
    assert "its gradcheck receipt does not cover this call (w = 29 was not checked (the receipt covers w = 7))" in msg
    assert "gives FAIL" in msg and "training will not use its declared VJP" in msg
    assert e.value.hint == f"see the report: `scellis gradcheck {pkg.root} --param w=29`"
    assert all(n.vjp_place is None for n in tape.nodes)
    # inside the coverage it trains, and the ladder says nothing was checked here
    tape = Tape(ctx, receipts=tmp_path, place="reference")
    xv = tape.leaf(x, trainable=True)
    y = tape.call(pkg, {"x": xv}, {"w": 7})["y"]
    assert tape.backward(y)[xv].shape == x.shape
    assert "checked here" not in tape.ladder(y)[0]


@pytest.mark.slow
def test_a_correct_op_outside_the_coverage_is_checked_here_then_trained(ctx, device, pkg_copy, tmp_path):
    pkg = load_package(pkg_copy())
    write_gradcheck_receipt(pkg, gradcheck(ctx, pkg, {"w": 7}), tmp_path)
    checks: dict = {}
    x = np.random.default_rng(4).standard_normal(120).astype(np.float32)
    for _ in range(2):                     # the second tape reuses the first one's check
        tape = Tape(ctx, receipts=tmp_path, checks=checks)
        xv = tape.leaf(x, trainable=True)
        y = tape.call(pkg, {"x": xv}, {"w": 5})["y"]
        g = tape.backward(y)[xv]
        assert len(checks) == 1 and next(iter(checks.values())) == ("pass", "")
    assert g.shape == x.shape and np.all(g >= 0)
    line = tape.ladder(y)[0]
    assert line.startswith("user/demo/windowed_median@1: declared vjp, gradcheck passed, runs on the device")
    assert "; checked here at its own params (w = 5 was not checked (the receipt covers w = 7))" in line


@pytest.mark.slow
def test_a_receipt_without_coverage_covers_its_one_point(ctx, pkg_copy, tmp_path):
    """A receipt written before coverage was recorded names one parameter set; nothing more."""
    pkg = load_package(pkg_copy())
    rep = gradcheck(ctx, pkg, {"w": 3})
    rep.coverage = {}
    path = write_gradcheck_receipt(pkg, rep, tmp_path)
    assert "coverage" not in json.loads(path.read_text()) or not json.loads(path.read_text())["coverage"]
    cov = recorded(pkg, tmp_path)
    sig = pkg.contract.signature
    assert outside(cov, sig, {"w": 3}) == []
    assert outside(cov, sig, {"w": 5}) == ["w = 5 was not checked (the receipt covers w = 3)"]


@pytest.mark.parametrize("coverage,why", [
    (None, "no coverage that can be read"),
    ({"params": "all"}, "no values of w"),
    ({"params": {"w": {"values": "all"}}}, "no values of w"),
    ({"params": {"w": {"values": [True, "29", None, float("nan")]}}}, "w = 29 was not checked"),
    ({"params": {"w": {"values": [27, 31]}}}, "w = 29 was not checked (the receipt covers w = 27, 31)"),
])
def test_coverage_that_cannot_be_read_covers_nothing(coverage, why):
    sig = load_package(MEDIAN).contract.signature
    reasons = outside(coverage, sig, {"w": 29})
    assert len(reasons) == 1 and why in reasons[0]


def test_an_unreadable_receipt_records_no_coverage(pkg_copy, tmp_path):
    pkg = load_package(pkg_copy())
    path = gradcheck_receipt_path(pkg, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ("{not json", "[1, 2]", '{"coverage": {"params": 1}}', "[" * 100_000):
        path.write_text(text)
        assert recorded(pkg, tmp_path) is None
    path.unlink()
    (tmp_path / "elsewhere.json").write_text(json.dumps({"coverage": {"params": {"w": {"values": [29]}}}}))
    path.symlink_to(tmp_path / "elsewhere.json")
    assert recorded(pkg, tmp_path) is None


@pytest.mark.slow
def test_float_params_are_checked_across_their_domain(ctx, op):
    """t: f32 in [0, 1e6]: its boundaries, 0, tiny, huge and seeded random values; the mutant whose
    sign flips only for t > 1000 fails (before: only t = 0 was checked, and it passed)."""
    good = gradcheck(ctx, op("soft_threshold"))
    assert good.verdict == "pass", "\n".join(good.lines())
    vals = good.coverage["params"]["t"]["values"]
    assert {0.0, gp.TINY, gp.HUGE, 1e6, 0.75} <= set(vals) and len(vals) == 7
    assert all(0 <= v <= 1e6 for v in vals) and good.coverage["params"]["t"]["rule"].startswith("its boundaries")
    bad = gradcheck(ctx, op("soft_threshold_sign_huge"))
    assert bad.verdict == "fail" and any(f"t = {v:g}" in bad.why for v in (1e4, 1e6))
    assert gradcheck(ctx, op("soft_threshold_rewrite")).verdict == "pass"


def test_float_values_of_an_unbounded_param_span_the_f32_range():
    sig = load_package(BUILTINS / "affine").contract.signature
    vals, rule = gp.param_values(sig, {"scale": -0.5, "offset": 0.75}, {}, np.random.default_rng(0))["offset"]
    assert {0.75, gp.FLT_MAX, -gp.FLT_MAX, 0.0, gp.TINY, -gp.TINY, gp.HUGE, -gp.HUGE} <= set(vals)
    assert len(vals) == 10 and "the f32 range" in rule
    # lo <= hi holds in every parameter set clip's sweep makes
    clip = load_package(BUILTINS / "clip").contract.signature
    values = gp.param_values(clip, {"lo": -0.5, "hi": 0.75}, {}, np.random.default_rng(0))
    combos = gp.sweep(clip, {"lo": -0.5, "hi": 0.75}, values)
    assert all(c["lo"] <= c["hi"] for c in combos)
    for name in ("lo", "hi"):
        assert {c[name] for c in combos} == set(values[name][0])


def test_a_large_integer_domain_gets_its_boundaries_and_a_seeded_sample():
    sig = load_package(BUILTINS / "unfold").contract.signature        # w: u32 in [1, 4096]
    vals, rule = gp.param_values(sig, {"w": 7}, {}, np.random.default_rng(0))["w"]
    assert {1, 2, 4095, 4096, 7} <= set(vals) and 10 <= len(vals) <= 11
    assert rule.startswith("its boundaries and") and "[1, 4096]" in rule
    assert vals == gp.param_values(sig, {"w": 7}, {}, np.random.default_rng(0))["w"][0]     # seeded


@pytest.mark.slow
def test_where_finite_differences_cannot_resolve_a_point_it_is_not_covered(ctx):
    """affine at offset = 3.4e38: outputs that large leave no digits for a step of h, so every probe
    there is skipped (not failed) and the value is listed as not covered."""
    rep = gradcheck(ctx, load_package(BUILTINS / "affine"))
    assert rep.verdict == "pass", "\n".join(rep.lines())
    missing = [m for m in rep.coverage["not_covered"] if m.startswith("offset = ")]
    assert missing and all("rounding: outputs of" in m for m in missing)
    assert gp.FLT_MAX not in rep.coverage["params"]["offset"]["values"]
    assert gp.FLT_MAX in rep.coverage["params"]["scale"]["values"]       # a huge slope is measurable
    assert "  not covered: offset = 3.40282e+38" in "\n".join(rep.lines())


# ------------------------------------------------------------------ point 7 (a): next to every kink

def test_the_distance_ladder_runs_from_just_beyond_h_to_the_inputs_scale():
    ds = gp.distances(1e-3, 1.0, np.random.default_rng(0))
    assert ds[0] == 1.5e-3 and ds[-1] == 1.0 and ds == sorted(ds)
    decades = [math.floor(math.log10(d / 1.5e-3)) for d in ds[:-1]]
    assert set(decades) == {0, 1, 2}                                    # two per decade
    sig = load_package(MUTANTS / "soft_threshold").contract.signature
    assert [v for _, v in gp.anchors(sig, {"t": 0.75}, 1e-3)] == [0.0, 0.75, -0.75]
    assert [v for _, v in gp.anchors(sig, {"t": 1e30}, 1e-3)] == [0.0]   # no step of h resolves next to 1e30


@pytest.mark.slow
def test_a_vjp_wrong_on_a_band_next_to_the_kink_fails_on_every_seed(ctx, op):
    """The VJP zeroed on (t, t + 0.05): before, at t = 0.75, it passed at seeds 0, 5 and 8 of 10."""
    pkg = op("soft_threshold_band")
    for seed in range(10):
        rep = gradcheck(ctx, pkg, {"t": 0.75}, seed=seed)
        assert rep.verdict == "fail", (seed, "\n".join(rep.lines()))
        bad = [p for p in rep.counted if p.kind == "plant" and p.error > rep.tolerance]
        assert bad and all(p.note.endswith("from t = 0.75") and 0 < float(p.note.split()[0]) < 0.05 for p in bad)
    plants = [p for p in rep.probes if p.kind == "plant" and _site(rep, p)["kind"] == "kinks"]
    assert {p.note.split(" from ")[1] for p in plants} == {"0", "t = 0.75", "-t = -0.75"}
    assert min(abs(float(p.note.split()[0])) for p in plants) == 1.5e-3


@pytest.mark.slow
def test_the_correct_soft_threshold_and_its_rewrite_pass_on_several_seeds(ctx, op):
    for name in ("soft_threshold", "soft_threshold_rewrite"):
        pkg = op(name)
        for seed in range(3):
            rep = gradcheck(ctx, pkg, {"t": 0.75}, seed=seed)
            assert rep.verdict == "pass", (name, seed, "\n".join(rep.lines()))
            assert not any(p.skipped for p in rep.probes if p.kind == "plant" and abs(float(p.note.split()[0])) > 2e-3)


# ------------------------------------------------------------------ point 7 (b): exact ties

@pytest.mark.slow
def test_ties_route_to_the_element_the_forward_selected(ctx, op):
    """A running max takes the last maximum; its VJP must route there even at a +0.0/-0.0 tie,
    where no derivative exists and finite differences are skipped. Routing to the first maximum
    passed everything before."""
    for name in ("running_max", "running_max_route"):
        rep = gradcheck(ctx, op(name), {"w": 5})
        assert rep.verdict == "pass", (name, "\n".join(rep.lines()))
        assert sum(t["reached"] for t in rep.ties) > 0 and not any(t["culprit"] for t in rep.ties)
    rep = gradcheck(ctx, op("running_max_first"), {"w": 5})
    assert (rep.verdict, rep.exit_code) == ("fail", 1)
    assert rep.why.startswith("at a tie (w = 5; below, ")
    assert "not its tie" in rep.why and "-0.0" in rep.why and "0.0" in rep.why
    assert rep.max_error < rep.tolerance                  # finite differences alone saw nothing wrong
    assert "it does NOT: y[" in "\n".join(rep.lines())


def test_the_story_median_routes_its_ties_where_it_selected(story):
    rep, _ = story
    assert rep.tie_rule == "the convention in op.toml: the cotangent goes to the element the forward selected"
    assert len({t["params"]["w"] for t in rep.ties}) >= 15 and sum(t["reached"] for t in rep.ties) > 0
    assert not any(t["culprit"] for t in rep.ties)


@pytest.mark.slow
def test_ties_are_checked_only_where_the_convention_says_selected(ctx, op):
    clip = gradcheck(ctx, load_package(BUILTINS / "clip"), {"lo": -0.25, "hi": 0.5})
    assert clip.ties == [] and clip.tie_rule.startswith("the subgradient convention does not say")
    assert "  ties     : not checked -- the subgradient convention does not say" in "\n".join(clip.lines())
    soft = gradcheck(ctx, op("soft_threshold"), {"t": 0.75})
    assert soft.ties == [] and soft.tie_rule == ""                      # not a selection


@pytest.mark.slow
def test_a_tie_the_forward_never_selects_is_reported_not_reached(ctx, tmp_path):
    """On nonnegative inputs a max never selects a zero among positive values: the tie check cannot
    fail there, and the report says the convention is unverified."""
    root = copy_package(MUTANTS / "running_max_first", tmp_path / "nonneg",
                        {"op.toml": [("running_max(x: f32[n] finite;", "running_max(x: f32[n] nonneg;")]})
    rep = gradcheck(ctx, load_package(root), {"w": 5})
    assert rep.ties and sum(t["reached"] for t in rep.ties) == 0
    assert "NOT REACHED -- the forward selected no tied element here" in "\n".join(rep.lines())
    assert rep.coverage["ties"] == {"cases": len(rep.ties), "reached": 0}


def test_tie_cases_differ_only_in_the_sign_of_the_tied_zeros():
    sig = load_package(MUTANTS / "running_max").contract.signature
    cases = gp.tie_cases(sig, {"x": (40,)}, ["x"], 1e-3, np.random.default_rng(0))
    assert [c[0].split(",")[0] for c in cases] == ["below", "above", "both", "both"]
    for _, x, (name, i, j) in cases:
        a = x[name]
        bits = a.view(np.uint64)
        assert a[i] == a[j] == 0.0 and bits[i] != bits[j]
        others = np.delete(a, [i, j])
        assert np.all(others != 0) and len(np.unique(others)) == others.size
