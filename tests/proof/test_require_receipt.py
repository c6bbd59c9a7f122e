"""`--require-receipt` means it (studio/engine/services/actions.py ``require_proof``,
studio/engine/proof/reliance.py): a failing full conformance run records a `failed` receipt naming
its first failing case, and that receipt refuses every run, with no proof run past it; a run at an
integer parameter value the receipt never ran proves at its own values first; a run that goes ahead
names the receipt it relied on; the run's default budget scales with its size. And the failing-case
label names the values the failing cases share (``hints.fails_when``): w > 31 for a window wider
than the kernel's private array, n = w for the story's first draft."""
import hashlib
from pathlib import Path

import numpy as np
import pytest

from conftest import EXAMPLES, MEDIAN, copy_package
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof import coverage, hints, receipts, reliance
from studio.engine.services import actions
from studio.engine.services.proof_budget import RUN_BASE_S, run_budget_s

SMALL = [("w <= n)", "w <= n, n <= 600)")]          # no large sizes: a corpus of small cases, cheap

SHIFT_TOML = '''id = "user/test/shift@1"
summary = "y = x + k, an integer offset"
license = "Apache-2.0"
visibility = "private"
authors = ["Scellis Studio tests"]
signature = "shift(x: f32[n] in [-1000, 1000]; k: u32 in [0, 100000], n <= 600) -> y: f32[n]"

[tolerance]
class = "ulp(1)"
category = "elementwise"
justification = "one addition, correctly rounded (k is exact in f32)"

[reference]
file = "reference.py"
forward = "forward"
precision = "f64"

[kernel]
file = "forward.wgsl"
entry = "main"
workgroup_size = 64
invocations = "n"

[bindings]
text = """
@group(0) @binding(0) x : storage read       f32[n]
@group(0) @binding(1) y : storage read_write f32[n]
@group(0) @binding(2) p : uniform { n: u32 = n, k: u32 = k }
"""

[backward]
text = "nondifferentiable"
'''
SHIFT_WGSL = '''struct Params {
    n: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) { return; }
    y[i] = x[i] + f32(p.k);
}
'''
SHIFT_REF = '''import numpy as np


def forward(x, *, k):
    return np.asarray(x, np.float64) + float(k)
'''
ODD_K = 12345             # a value no corpus of k in [0, 100000] holds


def shift_package(root: Path, wrong_at: int | None = None) -> Path:
    root.mkdir(parents=True)
    kernel = SHIFT_WGSL if wrong_at is None else SHIFT_WGSL.replace(
        "    y[i] = x[i] + f32(p.k);", f"    y[i] = x[i] + f32(p.k);\n    if (p.k == {wrong_at}u) {{ y[i] = 0.0; }}")
    for name, text in (("op.toml", SHIFT_TOML), ("forward.wgsl", kernel), ("reference.py", SHIFT_REF)):
        (root / name).write_text(text)
    tmp = root.parent / (root.name + ".src")
    root.rename(tmp)
    return copy_package(tmp, root)           # authored here (trusted), as a test's own package is


def signal(n: int) -> np.ndarray:
    return np.random.default_rng(3).normal(size=n).astype(np.float32)


# ------------------------------------------------------------------ a failed receipt refuses
@pytest.mark.slow
def test_a_failed_receipt_refuses_every_run_and_names_its_case(ctx, tmp_path):
    """The story's first draft: every case fails, so nothing separates the failing cases and the
    first failure keeps its own label, n = w; the failed receipt then refuses even a small run."""
    draft = load_package(copy_package(EXAMPLES / "windowed_median_first_draft", tmp_path / "d",
                                      {"op.toml": SMALL}))
    out = actions.conform(ctx, draft, mutants=0)
    assert out.verdict == "fail" and out.receipt is None and out.fails_when is None
    assert "receipt" not in out.to_json() and "fails_when" not in out.to_json()
    first = next(ln for ln in out.lines if "first failure" in ln)
    assert "minimum (n = w)" in first and "failures only where" not in first, first
    assert any("receipt   : failed, recorded in" in ln for ln in out.lines), out.lines
    (path, v), = receipts.judge_receipts(draft, ctx.device.profile.id, ctx.seal)
    assert v.status == "failed"
    f = v.receipt["failure"]                       # the receipt records the failing case
    assert f["case"] == 0 and f["kind"] == "unwritten" and f["reproduce"].endswith("--case 0")
    before = path.read_bytes()
    seen = []
    with pytest.raises(StudioError) as e:          # the run is small and in the corpus: refused all the same
        actions.run(ctx, draft, inputs={"x": signal(9)}, params={"w": 3}, require_receipt=True, on_proof=seen.append)
    assert e.value.field == actions.PROOF_FAILED and "refused" in e.value.message
    assert "records a failing conformance run" in e.value.message and "case 0 (minimum; n = 1, w = 1)" in e.value.message
    assert "--case 0" in e.value.hint and "\n" not in e.value.message
    assert path.read_bytes() == before and not seen          # nothing ran past it, nothing was re-proved


def test_a_weaker_pass_never_erases_a_recorded_failure():
    strong, weak = {"largest": 16_777_300, "fold": {"forward": True}, "large": True}, {"largest": 1_000_003,
                                                                                       "fold": {"forward": False}}
    failed = {"coverage": {**strong, "version": 1}}
    assert coverage.decide(failed, False, True, weak, old_failed=True) == "keep"
    assert coverage.decide(failed, False, True, strong, old_failed=True) == "write"    # the same corpus again
    assert coverage.decide(failed, False, True, weak) == "write"                       # a stale one: replaced
    assert coverage.decide(None, False, False, weak) == "invalidate"                   # a first failure is recorded


# ------------------------------------------------------------------ outside the coverage: prove first
@pytest.mark.slow
def test_a_run_at_a_parameter_value_never_run_proves_there_first(ctx, tmp_path):
    """A kernel wrong only at k = 12345 earns a receipt (its corpus never holds that value); a run
    there proves at its own size and k first, fails, is refused, and records the failure."""
    bad = load_package(shift_package(tmp_path / "bad", wrong_at=ODD_K))
    out = actions.conform(ctx, bad, mutants=0)
    assert out.verdict == "pass", out.lines
    cov = receipts.read_receipt(Path(out.receipt))["coverage"]
    assert ODD_K not in cov["params"]["k"] and 0 in cov["params"]["k"]
    x = signal(100)
    seen = []
    assert np.array_equal(actions.run(ctx, bad, inputs={"x": x}, params={"k": 0}, require_receipt=True,
                                      on_proof=seen.append)["y"], x)           # covered: the receipt holds
    assert seen[-1].status == "valid"
    with pytest.raises(StudioError) as e:
        actions.run(ctx, bad, inputs={"x": x}, params={"k": ODD_K}, require_receipt=True)
    assert "fails conformance" in e.value.message and f"k = {ODD_K} is a value conformance never ran" in e.value.message
    assert receipts.local_status(bad, ctx.device.profile.id, ctx.seal) == "failed"


@pytest.mark.slow
def test_a_correct_kernel_proves_at_the_runs_value_and_covers_it_after(ctx, tmp_path):
    """The control, and the line a run prints: the receipt it relied on (file, sha256, verdict, GPU
    profile, coverage), or the conformance that ran first at the run's own value."""
    good = load_package(shift_package(tmp_path / "good"))
    out = actions.conform(ctx, good, mutants=0)
    assert out.verdict == "pass", out.lines
    x, seen = signal(100), []
    assert np.array_equal(actions.run(ctx, good, inputs={"x": x}, params={"k": 1}, require_receipt=True,
                                      on_proof=seen.append)["y"], x + np.float32(1))
    line, path = seen[-1].line(), Path(out.receipt)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert seen[-1].status == "valid" and f"relies on receipt {path.name} (sha256 {sha})" in line, line
    assert "verdict pass" in line and f"GPU profile {ctx.device.profile.id}" in line and "covers: n up to 600" in line
    y = actions.run(ctx, good, inputs={"x": x}, params={"k": ODD_K}, require_receipt=True, on_proof=seen.append)
    assert np.array_equal(y["y"], x + np.float32(ODD_K))
    assert seen[-1].status == "earned" and "so conformance ran first" in seen[-1].line()
    assert f"k = {ODD_K} is a value conformance never ran" in seen[-1].line()
    actions.run(ctx, good, inputs={"x": x}, params={"k": ODD_K}, require_receipt=True, on_proof=seen.append)
    assert seen[-1].status == "valid"                 # the earned receipt covers it now


def test_unreached_parameters_are_judged_for_integer_parameters_only():
    cov = {"params": {"k": [0, 1, 100000], "w": {"values": [1, 3]}}}
    assert reliance.unreached_params(cov, {"k": 5, "w": 3, "a": 2}, {"k", "w"}) == {"k": 5}
    assert reliance.unreached_params(cov, {"k": 1, "w": 5}, {"k", "w"}) == {"w": 5}
    assert reliance.unreached_params({"largest": 10}, {"k": 5}, {"k"}) == {}       # no record: sizes alone


# ------------------------------------------------------------------ the run's budget
def test_the_default_budget_scales_with_the_runs_size():
    c = load_package(MEDIAN).contract.signature
    small = run_budget_s(c, {"x": np.zeros(1000, np.float32)}, {"w": 3})
    big = run_budget_s(c, {"x": np.zeros(4_000_000, np.float32)}, {"w": 3})      # 4 M in, 4 M out
    assert RUN_BASE_S <= small < RUN_BASE_S + 0.1
    assert 40 <= big <= 60                      # a correct 4-megapixel run needs 10 to 40 s on lavapipe
    from studio.cli import build_parser
    p = build_parser()
    assert p.parse_args(["run", "x"]).timeout is None                     # the default: scaled
    assert p.parse_args(["run", "x", "--timeout", "2"]).timeout == 2.0   # a given budget is the budget


# ------------------------------------------------------------------ the failing-case label
@pytest.mark.slow
def test_the_label_names_the_window_values_that_fail(ctx, tmp_path):
    """w up to 63 against the kernel's array<f32, 31>: every failing case has w > 31, and the first
    failure is not labelled n = w (its n = w is no cause: n = w cases with w <= 31 pass)."""
    toml = (MEDIAN / "op.toml").read_text()
    wide = load_package(copy_package(MEDIAN, tmp_path / "wide", {"op.toml": [
        ("w: u32 odd in [1, 31], w <= n)", "w: u32 odd in [1, 63], w <= n, n <= 600)"),
        (toml[toml.index("[backward]"):], '[backward]\ntext = "nondifferentiable"\n')]}))
    out = actions.conform(ctx, wide, mutants=0)
    assert out.verdict == "fail"
    assert out.fails_when == "w > 31", out.lines
    assert all(f["params"]["w"] > 31 for f in out.failures)
    first = next(ln for ln in out.lines if "first failure" in ln)
    assert "(failures only where w > 31)" in first and "(n = w)" not in first, first


def test_the_label_rule_on_its_own():
    from studio.engine.proof.corpus import CorpusCase
    def case(i, n, w, tight=()):
        return CorpusCase(i, "minimum", "normal", {"n": n}, {"w": w}, {}, tight)
    cases = [case(i, n, w, ("n = w",) if n == w else ()) for i, (n, w) in enumerate(
        [(1, 1), (33, 33), (40, 33), (35, 35), (31, 31), (64, 1), (64, 31), (100, 63)])]
    wide = [c for c in cases if c.params["w"] > 31]
    assert hints.fails_when(wide, cases) == "w > 31"
    tight = [c for c in cases if c.tight]
    assert hints.fails_when(tight, cases) == "n = w"
    assert hints.fails_when(cases, cases) is None                          # all fail: no label
    one = [cases[5]]                                 # a lone failure at a value others pass at: nothing shared
    assert hints.fails_when(one, cases) is None or "w" not in hints.fails_when(one, cases)


# ------------------------------------------------------------------ a workflow's step outside its receipt
@pytest.mark.slow
def test_a_workflow_step_past_its_receipts_size_is_refused_or_proved_first(ctx, tmp_path):
    """A receipt that covers n up to 100 (its coverage says so; sealed here) and a workflow step at
    n = 500: the plan marks the step uncovered and the run refuses it, naming the size; `--prove`
    proves at the step's own size first, and the run goes ahead on the receipt that covers it."""
    from studio.engine.services.workflows import run_workflow
    pkg = load_package(shift_package(tmp_path / "shift"))
    from studio.engine.proof.conformance import conform
    rep = conform(ctx, pkg)
    assert rep.ok, rep.failures[:1]
    made = receipts.make_receipt(pkg, rep)
    made["coverage"] = {**made["coverage"], "largest": 100}
    receipts.write_receipt(pkg, made, ctx.seal)
    np.save(tmp_path / "x.npy", signal(500))
    (tmp_path / "w.toml").write_text(f'''[workflow]
name = "past"
record = "past.record.json"
[sources.x]
file = "x.npy"
[steps.s]
op = "{pkg.root}"
inputs = {{ x = "x" }}
params = {{ k = 1 }}
[sinks.out]
file = "y.npy"
series = "s.y"
''')
    with pytest.raises(StudioError) as e:
        run_workflow(ctx, tmp_path / "w.toml", out_dir=tmp_path)
    assert "receipt uncovered: n = 500 is past the largest size conformance ran (100)" in e.value.message
    out = run_workflow(ctx, tmp_path / "w.toml", out_dir=tmp_path, prove=True)
    assert any("so conformance ran first" in ln and "relies on receipt" in ln for ln in out["proofs"]), out["proofs"]
    assert np.array_equal(np.load(tmp_path / "y.npy"), signal(500) + np.float32(1))
    # a failed receipt is never run past, not even when unverified ops are allowed
    bad = load_package(shift_package(tmp_path / "bad", wrong_at=1))
    assert actions.conform(ctx, bad, mutants=0).verdict == "fail"
    (tmp_path / "w.toml").write_text((tmp_path / "w.toml").read_text().replace(str(pkg.root), str(bad.root)))
    with pytest.raises(StudioError) as e:
        run_workflow(ctx, tmp_path / "w.toml", out_dir=tmp_path, allow_unverified=True)
    assert "records a failing conformance run" in e.value.message and e.value.line is not None
