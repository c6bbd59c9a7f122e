"""Gradcheck: finite differences on the reference path in f64, kinks skipped and counted,
negative controls that must all be rejected, and a verdict that says so when the check
cannot fail."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from studio.engine.home import studio_home
from conftest import BUILTINS, EXAMPLES, MEDIAN, _authored

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof.gradcheck import gradcheck
from studio.engine.proof.gradreport import MIN_COUNTED, MUTANTS
from studio.engine.proof.receipts import (
    gradcheck_receipt_path,
    gradcheck_status,
    write_gradcheck_receipt,
)

ELEMENTWISE_WGSL = """struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.n) { return; }
    y[i] = EXPR;
}
"""


def make_op(root, name, forward, vjp, *, expr="x[i]", backward='vjp x: reference(vjp)', extra="", kinks=""):
    """A one-input elementwise op package written as a user would: op.toml, reference, kernel."""
    root.mkdir(parents=True)
    (root / "op.toml").write_text(f'''id = "user/test/{name}@1"
summary = "{name}, elementwise"
signature = "{name}(x: f32[n]) -> y: f32[n]"

[tolerance]
class = "ulp(4)"
category = "elementwise"

[kernel]
invocations = "n"

[bindings]
text = """
@group(0) @binding(0) x : storage read       f32[n]
@group(0) @binding(1) y : storage read_write f32[n]
@group(0) @binding(2) p : uniform {{ n: u32 = n }}
"""

[backward]
text = '{backward}'
{extra}''')
    (root / "reference.py").write_text(f"import numpy as np\n\n\ndef forward(x):\n    return {forward}\n\n\n"
                                       f"def vjp(x, dy):\n    return {vjp}\n{kinks}")
    (root / "forward.wgsl").write_text(ELEMENTWISE_WGSL.replace("EXPR", expr))
    _authored(root)
    return load_package(root)


@pytest.fixture(scope="module")
def story(module_ctx):
    return gradcheck(module_ctx, load_package(MEDIAN), {"w": 7})


def test_story_op_passes_with_its_skipped_probes_counted(story):
    assert (story.verdict, story.exit_code) == ("pass", 0)
    assert story.skipped > 0 and len(story.counted) >= MIN_COUNTED
    assert story.skipped + len(story.counted) == len(story.probes)
    assert all(p.reason for p in story.probes if p.skipped)
    # piecewise linear: away from crossings analytic and numeric agree to f64 rounding
    assert story.max_error < 1e-11 and story.tolerance == 1e-9 and story.tolerance_source == "declared"
    # both probe families and both points are present at the main site, and entries hit non-zero gradients
    assert {(p.kind, p.point) for p in story.counted if p.site == 0} == {("entry", "edge"), ("entry", "plain"),
                                                                         ("direction", "plain")}
    # then the kink plants and the other sizes (w is given here: it is not swept)
    assert {(p.kind, p.point) for p in story.counted if p.site > 0} >= {("plant", "kinks"), ("entry", "sweep")}
    # ... the smallest size, one above it, and one past two workgroups (the sizes a VJP can be wrong at)
    assert [s["kind"] for s in story.sites] == ["main", "kinks", "sweep", "sweep", "sweep"]
    assert max(s["shapes"]["x"][0] for s in story.sites) > 2 * 64
    assert story.coverage["params"] == {"w": {"values": [7], "rule": "given"}}
    assert any(p.kind == "entry" and p.analytic == 1.0 for p in story.counted)
    assert story.kink_methods[0].startswith("generic") and "kinks()" in story.kink_methods[1]


def test_skipped_probes_sit_where_no_derivative_exists(story):
    """Averaging across the crease would have failed: the skipped probes are real kinks."""
    skipped = [p for p in story.probes if p.skipped and "generic" in p.reason]
    assert skipped and max(abs(p.analytic - p.numeric) for p in skipped) > 1e-3


def test_the_report_has_the_story_shape(story):
    lines = story.lines()
    assert lines[0] == "gradcheck  user/demo/windowed_median@1   (w = 7, reference path, f64)"
    assert lines[1] == "  forward  : author reference (gather -> sort -> middle)"
    assert lines[2] == "  vjp      : declared backward -- cotangent routed to the argmedian index"
    heads = [ln[:11] for ln in lines]
    for head in ("  subgrad. ", "  probes   ", "  skipped  ", "  bound    ", "  negative ", "  verdict  "):
        assert head in heads, head
    text = "\n".join(lines)
    assert "central differences, h = 1e-3" in text
    assert f"skipped  : {story.skipped} of {len(story.probes)} probes within h of an order crossing" in text
    assert "must stay under the tolerance 1e-9 (declared)" in text
    assert "a corrupted vjp must be REJECTED -- a check that cannot" in text
    assert text.count("REJECTED  (max error") == len(MUTANTS)
    assert lines[-1] == "  verdict  : pass"


def test_every_negative_control_mutant_is_rejected(story):
    assert [m.name for m in story.mutants] == list(MUTANTS)
    assert all(m.fate == "REJECTED" and m.max_error > story.tolerance for m in story.mutants)


def test_json_carries_every_probe_for_plotting(story):
    data = json.loads(json.dumps(story.to_json()))
    assert len(data["probes"]) == len(story.probes) and data["skipped"] == story.skipped
    p = data["probes"][0]
    assert {"analytic", "numeric", "skipped", "reason", "point", "kind", "error"} <= set(p)
    assert data["verdict"] == "pass" and data["exit_code"] == 0 and data["precision"] == "f64"
    assert [m["fate"] for m in data["negative_controls"]] == ["REJECTED"] * len(MUTANTS)


def test_a_vjp_routing_off_by_one_fails(ctx, pkg_copy):
    pkg = load_package(pkg_copy(reference__py=[(
        "np.add.at(dx, np.arange(k.shape[0]) + k, dy)",
        "np.add.at(dx, np.minimum(np.arange(k.shape[0]) + k + 1, dx.shape[0] - 1), dy)")]))
    rep = gradcheck(ctx, pkg, {"w": 7})
    assert (rep.verdict, rep.exit_code) == ("fail", 1)
    assert rep.max_error >= 0.5 and "analytic" in rep.why and "numeric" in rep.why


@pytest.mark.slow
def test_an_infinite_tolerance_is_inconclusive_never_pass(ctx):
    rep = gradcheck(ctx, load_package(MEDIAN), {"w": 7}, tolerance=math.inf)
    assert (rep.verdict, rep.exit_code) == ("inconclusive", 3)
    assert "this check cannot fail" in rep.why
    assert all(m.fate == "passed" for m in rep.mutants)
    assert "sign flip                            passed" in "\n".join(rep.lines())


@pytest.mark.slow
def test_a_declared_infinite_tolerance_is_inconclusive(ctx, pkg_copy):
    pkg = load_package(pkg_copy(op__toml=[("gradient_tolerance = 1e-9", "gradient_tolerance = inf")]))
    rep = gradcheck(ctx, pkg, {"w": 5})
    assert rep.verdict == "inconclusive" and rep.tolerance_source == "declared"


def test_nothing_left_after_skipping_is_inconclusive(ctx):
    """All equal values: every probe sits on a tie, so nothing is measured and nothing passes."""
    rep = gradcheck(ctx, load_package(MEDIAN), {"w": 3}, inputs={"x": np.ones(12)})
    assert len(rep.counted) == 0 and rep.verdict == "inconclusive" and "probes left" in rep.why


@pytest.mark.slow
@pytest.mark.parametrize("name,forward,vjp,expr,at", [
    ("relu", "np.maximum(x, 0.0)", "np.where(x > 0, dy, 0.0)", "max(x[i], 0.0)", 0.0),
    ("absval", "np.abs(x)", "np.sign(x) * dy", "abs(x[i])", 0.0),
    ("clamp", "np.clip(x, -0.5, 0.5)", "np.where(np.abs(x) <= 0.5, dy, 0.0)", "clamp(x[i], -0.5, 0.5)", 0.5),
])
def test_relu_abs_and_clip_kinks_are_skipped_not_failed(ctx, tmp_path, name, forward, vjp, expr, at):
    pkg = make_op(tmp_path / name, name, forward, vjp, expr=expr)
    rep = gradcheck(ctx, pkg)
    assert rep.verdict == "pass", "\n".join(rep.lines())
    assert rep.kink_methods == [rep.kink_methods[0]]                              # generic rule only
    if at == 0.0:       # the engine plants values near zero (a constant like 0.5 it cannot guess)
        assert rep.skipped > 0
    # probes exactly on the kink and within h of it: skipped, the rest measured
    x = np.array([at, at + 3e-4, at - 6e-4, at + 0.3, at - 0.7, 1.5, -1.25, 2.0, -2.0, 0.9, -0.35, at + 0.05])
    rep = gradcheck(ctx, pkg, inputs={"x": x})
    kinked = {p.index for p in rep.probes if p.kind == "entry" and p.skipped}
    assert {0, 1, 2} & {p.index for p in rep.probes if p.kind == "entry"} <= kinked
    assert not any(p.skipped for p in rep.probes if p.kind == "entry" and p.index >= 3)
    assert rep.verdict in ("pass", "inconclusive") and rep.max_error < 1e-9


@pytest.mark.slow
def test_clip_kinks_at_its_parameters_are_found_by_the_engine(ctx):
    rep = gradcheck(ctx, load_package(BUILTINS / "clip"), {"lo": -0.25, "hi": 0.5})
    assert rep.verdict == "pass" and rep.skipped > 0 and rep.crossing == "order crossing"


@pytest.mark.slow
def test_smooth_curvature_is_not_mistaken_for_a_kink(ctx, tmp_path):
    pkg = make_op(tmp_path / "soft", "soft", "np.tanh(x) + 0.3 * x ** 3", "(1 - np.tanh(x) ** 2 + 0.9 * x ** 2) * dy",
                  expr="tanh(x[i]) + 0.3 * x[i] * x[i] * x[i]")
    rep = gradcheck(ctx, pkg)
    assert rep.verdict == "pass" and rep.skipped == 0
    assert 1e-12 < rep.max_error < 1e-6 and rep.tolerance_source == "default"


def test_the_contract_predicate_helps_and_the_report_says_so(ctx, tmp_path):
    pkg = make_op(tmp_path / "relu", "relu", "np.maximum(x, 0.0)", "np.where(x > 0, dy, 0.0)", expr="max(x[i], 0.0)",
                  extra='kinks = "near_zero"\n',
                  kinks="\n\ndef near_zero(x, *, h):\n    return np.abs(x) <= h\n")
    rep = gradcheck(ctx, pkg)
    assert rep.kink_methods[1] == "predicate: the contract's predicate near_zero()"
    assert any("predicate" in p.reason for p in rep.probes if p.skipped)
    assert "the contract's predicate near_zero() (" in "\n".join(rep.lines())


@pytest.mark.slow
def test_a_route_rule_is_checked_like_a_function(ctx, pkg_copy):
    root = pkg_copy()
    toml = (root / "op.toml").read_text()
    (root / "op.toml").write_text(toml[:toml.index("[backward]")] + '[backward]\ntext = "vjp x: route(dy, to = selected)"\n')
    with open(root / "reference.py", "a") as f:
        f.write("\n\ndef selected(x, *, w):\n    return np.arange(np.shape(x)[0] - int(w) + 1) + argmedian(x, w=w)\n")
    _authored(root)
    rep = gradcheck(ctx, load_package(root), {"w": 5})
    assert rep.verdict == "pass" and "routed to the index selected()" in rep.vjp


@pytest.mark.slow
def test_composite_backward_is_derived_and_checked(ctx):
    rep = gradcheck(ctx, load_package(EXAMPLES / "windowed_median_composite"), {"w": 7})
    assert rep.verdict == "pass" and rep.vjp.startswith("derived by reverse mode over the composition")
    assert rep.max_error < 1e-11


@pytest.mark.slow
@pytest.mark.parametrize("name", ["affine", "add", "multiply", "clip", "fir", "diff", "sum", "mean", "mse",
                                  "unfold", "median_rows", "nn/softmax", "nn/logsumexp", "nn/layernorm"])
def test_every_differentiable_builtin_passes(ctx, name):
    rep = gradcheck(ctx, load_package(BUILTINS / name))
    assert rep.verdict == "pass", "\n".join(rep.lines())


def test_constant_gradients_make_some_mutants_not_applicable(ctx):
    """sum's VJP is constant: shifting or permuting it changes nothing, which is not a pass."""
    rep = gradcheck(ctx, load_package(BUILTINS / "sum"))
    fates = {m.name: m.fate for m in rep.mutants}
    assert fates["shift to the neighbouring index"] == fates["permute"] == "n/a"
    assert fates["sign flip"] == "REJECTED" and rep.verdict == "pass"


def test_a_nondifferentiable_op_has_nothing_to_check(ctx):
    with pytest.raises(StudioError, match="declared nondifferentiable"):
        gradcheck(ctx, load_package(BUILTINS / "spiky_signal"))


def test_receipts_are_bound_to_the_content(ctx, pkg_copy, tmp_path):
    root = pkg_copy()
    pkg = load_package(root)
    assert gradcheck_status(pkg)[0] == "none"
    path = write_gradcheck_receipt(pkg, gradcheck(ctx, pkg, {"w": 3}))
    assert path == gradcheck_receipt_path(pkg) and path.parent.parent == studio_home() / "receipts"
    assert path.parent.name == pkg.hash and not (root / "receipts").exists()
    assert gradcheck_status(pkg)[0] == "pass"
    with open(root / "reference.py", "a") as f:
        f.write("\n# edited\n")
    assert gradcheck_status(load_package(root))[0] == "none"
    path.write_text("{not json")
    assert gradcheck_status(pkg)[0] == "malformed"


def scellis(*args):
    return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], capture_output=True, text=True)


@pytest.mark.slow
def test_cli_prints_the_report_and_exits_by_verdict(pkg_copy):
    res = scellis("gradcheck", MEDIAN, "--param", "w=7", "--no-receipt")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("gradcheck  user/demo/windowed_median@1   (w = 7, reference path, f64)")
    assert "verdict  : pass" in res.stdout
    res = scellis("gradcheck", MEDIAN, "--param", "w=7", "--tolerance", "1e300", "--json")   # no mutant exceeds it
    assert res.returncode == 3 and json.loads(res.stdout)["verdict"] == "inconclusive"
    assert "receipt" not in json.loads(res.stdout)          # an override writes no receipt
    bad = pkg_copy(reference__py=[("np.add.at(dx, np.arange(k.shape[0]) + k, dy)", "np.add.at(dx, np.arange(k.shape[0]) + k, -dy)")])
    res = scellis("gradcheck", bad, "--param", "w=5")
    assert res.returncode == 1 and "verdict  : FAIL" in res.stdout
    assert gradcheck_receipt_path(load_package(bad)).is_file() and not (bad / "receipts").exists()
    res = scellis("gradcheck", BUILTINS / "spiky_signal")
    assert res.returncode == 2 and "nondifferentiable" in res.stderr and "Traceback" not in res.stderr
