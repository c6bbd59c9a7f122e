"""A receipt covers what was tested, and says so: the receipt records its
coverage; a run outside it proves at its own size first or is refused; a failing run invalidates
the receipt; a weaker pass never replaces a stronger receipt (studio/engine/proof/coverage.py)."""
from pathlib import Path

import numpy as np
import pytest

from conftest import MEDIAN, copy_package
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof import coverage, receipts
from studio.engine.services import actions

OPS = Path(__file__).parents[1] / "data" / "ops23"


def cov(largest, fwd=True, bwd=None, large=False):
    return {"version": 1, "largest": largest, "max_invocations": largest, "fold": {"forward": fwd, "backward": bwd},
            "large": large, "not_reached": []}


def receipt(c):
    return {"coverage": c, "corpus": {"fold_size": None}}


def test_a_weaker_pass_never_replaces_a_stronger_receipt():
    strong, weak = cov(16_777_300, bwd=True, large=True), cov(4_194_241, bwd=False)
    assert coverage.decide(receipt(strong), True, True, weak) == "keep"
    assert coverage.decide(receipt(weak), True, True, strong) == "write"
    assert coverage.decide(receipt(weak), True, True, weak) == "write"           # the same strength: fresh
    assert coverage.decide(receipt(strong), False, True, weak) == "write"        # a stale one is no stronger


def test_a_failing_run_invalidates_the_receipt_whatever_its_corpus():
    assert coverage.decide(receipt(cov(4_194_241)), True, False, cov(16_777_300, large=True)) == "invalidate"
    assert coverage.decide(receipt(cov(16_777_300)), True, False, cov(4_194_241)) == "invalidate"
    assert coverage.decide(None, False, False, cov(10)) == "invalidate"     # a first failure is recorded too


def test_a_run_outside_the_coverage_is_named():
    c = cov(4_194_241, fwd=False)
    small = {"swept": "n", "n": 1000, "forward": {"invocations": 1000, "workgroups": 4, "folded": False}}
    big = {"swept": "n", "n": 20_000_000, "forward": {"invocations": 20_000_000, "workgroups": 78_125, "folded": True}}
    folded = {**big, "n": 4_000_000}
    assert coverage.uncovered(c, small) is None
    assert "past the largest size" in coverage.uncovered(c, big)
    assert "never reached the fold" in coverage.uncovered(c, folded)
    assert coverage.uncovered(cov(4_194_241, fwd=True), folded) is None
    old = coverage.of_receipt({"corpus": {"fold_size": None}})          # before coverage was recorded
    assert old["largest"] == coverage.DEFAULT_SMALL and coverage.uncovered(old, big)


@pytest.mark.slow
def test_the_receipt_records_coverage_and_the_mutation_score(ctx, tmp_path):
    root = copy_package(MEDIAN, tmp_path / "m")
    out = actions.conform(ctx, load_package(root))
    assert out.verdict == "pass" and out.receipt, out.lines
    r = receipts.read_receipt(Path(out.receipt))
    assert r["coverage"]["largest"] >= 4_194_241 and r["coverage"]["fold"] == {"forward": True, "backward": True}
    assert r["coverage"]["bands"]["x"]["binades"][0] == -149
    assert r["mutation"]["total"] == 8 and r["mutation"]["killed"] == 8
    shown = actions.verify_receipts(ctx, load_package(root)).found[0].coverage
    assert any("up to 4,194,305" in s for s in shown) and any("mutants: 8 of 8" in s for s in shown)
    from studio.engine.services import publishing
    card = publishing.card(ctx, load_package(root), profile_id=ctx.device.profile.id)["text"]
    assert "covers: n up to 4,194,305; 2-D fold: forward reached, backward reached" in card


@pytest.mark.slow
def test_a_run_past_the_receipts_fold_proves_first_and_is_refused(ctx, tmp_path):
    """The third party's axpy (workgroup size 256, gid.x only): the default corpus cannot afford its
    fold (16.7 M elements), says so on the receipt, and a run past it proves at its own size first:
    it fails, the run is refused, and the receipt is invalidated."""
    root = copy_package(OPS / "axpy", tmp_path / "axpy")
    pkg = load_package(root)
    out = actions.conform(ctx, pkg, mutants=0)
    assert out.verdict == "pass", out.lines
    r = receipts.read_receipt(Path(out.receipt))
    assert r["coverage"]["fold"]["forward"] is False
    assert any("forward 2-D launch fold" in m["what"] for m in r["coverage"]["not_reached"])
    n = 65535 * 256 + 300
    x = np.ones(n, np.float32)
    small = actions.run(ctx, pkg, inputs={"x": x[:1000], "y": x[:1000]}, params={"a": 2.0}, require_receipt=True)
    assert np.all(small["z"] == 3.0)                              # inside the coverage: the receipt holds
    with pytest.raises(StudioError) as e:
        actions.run(ctx, pkg, inputs={"x": x, "y": x}, params={"a": 2.0}, require_receipt=True)
    assert "past the largest size" in e.value.message and "fails conformance" in e.value.message
    assert "run" in e.value.message                               # the failing case is the run's own size
    assert receipts.local_status(pkg, ctx.device.profile.id, ctx.seal) == "failed"
    with pytest.raises(StudioError) as e:             # a failed receipt is never run past: not even at n = 1000
        actions.run(ctx, pkg, inputs={"x": x[:1000], "y": x[:1000]}, params={"a": 2.0}, require_receipt=True)
    assert "is refused" in e.value.message and f"n = {n}" in e.value.message and "--case" in e.value.hint


def test_each_kernel_crosses_its_own_fold_or_the_report_says_why():
    """fir's backward is 256 wide: its fold is past 16.7 M elements, not the forward's 4.2 M."""
    from conftest import BUILTINS
    from studio.engine.proof import sizes
    from studio.engine.proof.corpus import swept_env
    c = load_package(BUILTINS / "fir").contract
    env_for, smallest = swept_env(c.signature)
    default = sizes.plan(c, env_for, smallest, 65535, large=False)
    assert default.sizes["fold"] == 4_194_305 and default.invocations["fold"]["folded"]
    miss = [m for m in default.not_reached if m["what"] == "backward 2-D launch fold"]
    assert miss and miss[0]["size"] > 65535 * 256 - 256 * 9 and "--large" in miss[0]["why"]
    large = sizes.plan(c, env_for, smallest, 65535, large=True)
    assert large.invocations["backward_fold"]["folded"] and large.invocations["backward_fold"]["workgroup_size"] == 256
    scan = load_package(OPS / "scan").contract
    env_for, smallest = swept_env(scan.signature)
    p = sizes.plan(scan, env_for, smallest, 65535, large=False)
    assert p.sizes == {"big": 1_000_003} and "does not grow" in p.not_reached[0]["why"]
