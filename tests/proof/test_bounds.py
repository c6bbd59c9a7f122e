"""Per-output bounds: `bound` is γ_k·Σ|terms| with k the terms that reach *each* output
(proof/bounds.py), never the largest input's size — which at millions of elements admitted a
third of the result as error. Each finding is shown failing with its own mutant and the
equivalent kernel passing; docs/tolerance.md has the table."""
from pathlib import Path

import numpy as np
import pytest

from conftest import copy_package
from studio.engine.contract.package import load_package
from studio.engine.contract.tolerance import compare, parse_tolerance
from studio.engine.proof.conformance import conform, report_lines

OPS = Path(__file__).parents[1] / "data" / "ops23"
BOUND = parse_tolerance("bound", "contraction")
SCAN = parse_tolerance("bound", "scan")


def window_sum(x, w):
    m = x.size - w.size + 1
    y = np.zeros(m)
    mag = np.zeros(m)
    for j in range(w.size):
        y += np.float64(w[j]) * x[j:j + m]
        mag += abs(np.float64(w[j])) * np.abs(x[j:j + m].astype(np.float64))
    return y, mag


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 1_000, 100_000, 10_000_000])
def test_a_1_2x_error_on_one_output_fails_at_every_size(n):
    rng = np.random.default_rng(n)
    x, w = rng.normal(size=n).astype(np.float32), rng.normal(size=5).astype(np.float32)
    y, mag = window_sum(x, w)
    want = y.astype(np.float32)
    k = np.full(want.size, 5)
    assert compare(BOUND, want, want.copy(), magnitude=mag, terms=k) is None
    got = want.copy()
    i = want.size - 1 if n < 100 else int(rng.integers(want.size // 2, want.size))
    got[i] *= np.float32(1.2)
    mm = compare(BOUND, want, got, magnitude=mag, terms=k)
    assert mm is not None and mm.index == i and "k = 5 terms" in mm.allowed   # the k counted, not k + 2
    if n == 10_000_000:   # the old rule (k = the largest input's size) let it through: the finding
        assert compare(BOUND, want, got, magnitude=mag, terms=n) is None


@pytest.mark.slow
@pytest.mark.parametrize("n", [20_000, 100_000, 1_000_000, 5_000_000])
@pytest.mark.parametrize("values", ["normal", "constant"])
def test_a_scan_that_drops_its_tail_fails_at_every_size(n, values):
    rng = np.random.default_rng(n)
    x = (rng.normal(size=n) if values == "normal" else np.full(n, 0.75)).astype(np.float32)
    y = np.cumsum(x.astype(np.float64))
    mag = np.cumsum(np.abs(x.astype(np.float64)))
    want = y.astype(np.float32)
    k = np.arange(1, n + 1)              # a scan's k grows with the prefix
    dropped = want.copy()
    dropped[16_385:] = want[16_384]      # stops adding after index 16,384
    mm = compare(SCAN, want, dropped, magnitude=mag, terms=k)
    assert mm is not None and mm.index > 16_384


def _op(tmp_path, name):
    return copy_package(OPS / name, tmp_path / name)


TIMES_1_2 = [("    y[i] = acc;", "    if (i > 1000000u) { acc = acc * 1.2; }\n    y[i] = acc;")]
DROP_TAIL = [("        acc = acc + x[i];", "        if (i <= 16384u) { acc = acc + x[i]; }")]
STOP_WRITING = [("        y[i] = acc;", "        if (i < 16384u) { y[i] = acc; }")]


@pytest.mark.slow
def test_window_sum_times_1_2_past_a_million_fails_and_the_kernel_passes(ctx, tmp_path):
    rep = conform(ctx, load_package(_op(tmp_path, "wsum")))
    assert rep.ok, "\n".join(report_lines(rep))
    rep = conform(ctx, load_package(copy_package(OPS / "wsum", tmp_path / "bad", {"forward.wgsl": TIMES_1_2})))
    text = "\n".join(report_lines(rep))
    # only the cases past 10^6: the fold, and the window length's own large case (n = 1,000,003, k = 2)
    assert not rep.ok and {f.case.shape_kind for f in rep.failures} == {"fold", "large"}, text
    assert all(f.case.dims["n"] > 1_000_000 for f in rep.failures), text
    assert "terms reach this output" in text


@pytest.mark.slow
def test_a_scan_with_a_fixed_launch_gets_a_large_case_and_its_dropped_tail_fails(ctx, tmp_path):
    good = conform(ctx, load_package(_op(tmp_path, "scan")))
    text = "\n".join(report_lines(good))
    assert good.ok, text
    assert good.plan.sizes.get("big") == 1_000_003 and "does not grow" in text      # reached, and why no fold
    bad = conform(ctx, load_package(copy_package(OPS / "scan", tmp_path / "bad", {"forward.wgsl": DROP_TAIL})))
    assert not bad.ok and "large" in {f.case.shape_kind for f in bad.failures}, "\n".join(report_lines(bad))
    # the twin that survived an earlier round: it stops *writing* after 16,384 outputs
    quiet = conform(ctx, load_package(copy_package(OPS / "scan", tmp_path / "quiet", {"forward.wgsl": STOP_WRITING})))
    assert not quiet.ok and {f.case.shape_kind for f in quiet.failures} & {"large", "fold"}, \
        "\n".join(report_lines(quiet))
    assert all(f.case.dims["n"] > 16_384 for f in quiet.failures), "\n".join(report_lines(quiet))


def test_per_output_terms_come_from_the_forward_on_ones(ctx, tmp_path):
    from studio.engine.proof.bounds import forward_terms
    pkg = load_package(_op(tmp_path, "scan"))
    x = np.arange(10, dtype=np.float32)
    k, source = forward_terms(ctx.references, pkg, {"x": x}, {}, {"y": np.zeros(10, np.float32)})
    assert k["y"].tolist() == list(range(1, 11)) and "all-ones" in source


@pytest.mark.slow
def test_an_equivalent_window_sum_in_another_order_passes(ctx, tmp_path):
    """Summing the taps backwards rounds differently: within each output's own gamma_k bound."""
    root = copy_package(OPS / "wsum", tmp_path / "rev", {"forward.wgsl": [(
        "for (var j = 0u; j < p.k; j = j + 1u) {\n        acc = acc + w[j] * x[i + j];",
        "for (var t = 0u; t < p.k; t = t + 1u) {\n        let j = p.k - 1u - t;\n        acc = acc + w[j] * x[i + j];")]})
    rep = conform(ctx, load_package(root))
    assert rep.ok, "\n".join(report_lines(rep))


def test_an_accumulation_with_an_f32_reference_is_refused_by_the_checker(ctx, tmp_path):
    from conftest import BUILTINS
    from studio.engine.proof.checker import check_package
    root = copy_package(BUILTINS / "sum", tmp_path / "s", {"op.toml": [('precision = "f64"', 'precision = "f32"')]})
    rep = check_package(ctx, load_package(root), compile_kernel=False)
    assert any(e.field == "reference.precision" for e in rep.errors)
    assert check_package(ctx, load_package(copy_package(BUILTINS / "sum", tmp_path / "ok")), compile_kernel=False).ok
