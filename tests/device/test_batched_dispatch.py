"""Batched dispatch and the program conformance runs: all cases of a
kernel in one submission with one input arena, one output arena and one readback, and still each
case's unwritten element and write past the end are caught, in that case and no other; a kernel
that guards its writes with arrayLength sees the same length under conformance as under run.
Real wgpu on the real device."""
import numpy as np
import pytest
from conftest import EXAMPLES, MEDIAN

from studio.engine.contract.package import load_package
from studio.engine.device.execution import Case, guarded_source, run_cases
from studio.engine.grad.run import run_op
from studio.engine.proof.conformance import conform
from studio.engine.precision import CANARY_WORDS

GUARD = ("if (i >= p.n - p.w + 1u) { return; }", "if (i >= arrayLength(&y)) { return; }")
PAST_END = ("if (i >= p.n - p.w + 1u) { return; }", "if (i > p.n - p.w + 1u) { return; }")
SKIP_LAST = ("if (i >= p.n - p.w + 1u) { return; }", "if (i + 1u >= p.n - p.w + 1u) { return; }")


def _cases(sizes, w=3, seed=0):
    rng = np.random.default_rng(seed)
    return [Case({"x": rng.standard_normal(n).astype(np.float32)}, {"w": w}) for n in sizes]


def _median(x, w):
    return np.median(np.lib.stride_tricks.sliding_window_view(x, w), axis=1).astype(np.float32)


def test_one_batch_gives_every_case_its_own_right_answer(pkg_copy, device):
    pkg = load_package(pkg_copy(MEDIAN, "m"))
    cases = _cases([3, 5, 64, 65, 1000, 7, 4099])
    for guard in (False, True):
        for case, res in zip(cases, run_cases(pkg, cases, device=device, guard=guard)):
            assert np.array_equal(res.outputs["y"], _median(case.inputs["x"], 3))
            if guard:
                assert res.canary_hits["y"].size == 0 and res.unwritten["y"].size == 0


def test_a_write_past_the_end_is_caught_in_each_case_of_a_batch(pkg_copy, device):
    pkg = load_package(pkg_copy(MEDIAN, "past", forward__wgsl=[PAST_END]))
    cases = _cases([3, 9, 70, 1000])
    results = run_cases(pkg, cases, device=device, guard=True)
    for case, res in zip(cases, results):
        assert res.canary_hits["y"].tolist() == [0], "the word right after this case's outputs changed"
        assert np.array_equal(res.outputs["y"], _median(case.inputs["x"], 3))   # its own outputs are intact


def test_an_unwritten_element_is_caught_in_each_case_of_a_batch(pkg_copy, device):
    pkg = load_package(pkg_copy(MEDIAN, "skip", forward__wgsl=[SKIP_LAST]))
    cases = _cases([3, 9, 70, 1000])
    for case, res in zip(cases, run_cases(pkg, cases, device=device, guard=True)):
        n_out = case.inputs["x"].size - 2
        assert res.unwritten["y"].tolist() == [n_out - 1] and res.canary_hits["y"].size == 0


def test_the_guarded_source_subtracts_the_canaries_only_for_outputs():
    src = "let a = arrayLength(&y); let b = arrayLength( & x ); let c = arrayLength(&yy);"
    out = guarded_source(src, {"y"})
    assert f"(arrayLength(&y) - {CANARY_WORDS}u)" in out and "arrayLength( & x )" in out
    assert "arrayLength(&yy);" in out and out.count("\n") == src.count("\n")
    assert guarded_source(src, set()) == src


@pytest.mark.slow
def test_a_kernel_guarding_with_array_length_passes_conformance_and_runs_the_same(ctx, pkg_copy, device):
    """Under conformance arrayLength(&y) is the output's length, as under run."""
    pkg = load_package(pkg_copy(MEDIAN, "len", forward__wgsl=[GUARD]))
    rep = conform(ctx, pkg)
    assert rep.ok, rep.failures[:1] and rep.failures[0].describe()
    x = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
    assert np.array_equal(run_op(ctx, pkg, {"x": x}, {"w": 5})["y"], _median(x, 5))


def test_write_past_end_example_is_still_caught_by_its_canary(ctx, device):
    rep = conform(ctx, load_package(EXAMPLES / "broken_medians" / "write_past_end"), stop_after=1)
    assert not rep.ok and rep.failures[0].kind == "out_of_range_write"
