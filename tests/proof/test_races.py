"""The race sanitizer (proof/races.py): conformance runs an instrumented copy of the kernel once and
fails an element of an output or of scratch that two invocations wrote, naming both; outputs
declared `atomic` are judged by value only; backward conformance does the same with the device VJP.
Each check has the kernel that trips it and a clean one."""
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import BUILTINS, MEDIAN, copy_package
from test_builtins import NAMES, RANDOM_CASES
from studio.engine.contract.bindings import parse_bindings
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof import races
from studio.engine.proof.backward_conformance import conform_backward
from studio.engine.proof.conformance import conform, report_lines
from studio.engine.proof.corpus import CorpusCase

HISTOGRAM = Path(__file__).parents[1] / "fixtures" / "races" / "histogram"
INSERTED = re.compile(r"sc_race_w\([^;]*\); | sc_race_id = [^;]*;|(, )?@builtin\(global_invocation_id\) sc_race_gid: "
                      r"vec3<u32>")
NEIGHBOUR = ("    y[i] = win[p.w / 2u];", "    y[i] = win[p.w / 2u];\n    if (i > 0u) { y[i - 1u] = y[i - 1u]; }")


def median_case(n=300, w=5, index=3):
    x = np.random.default_rng(index).standard_normal(n).astype(np.float32)
    return CorpusCase(index, "random", "normal", {"n": n}, {"w": w}, {"x": x})


def histogram_case(n=3000, bins=50):
    x = np.random.default_rng(1).integers(0, bins, n).astype(np.uint32)
    return CorpusCase(5, "random", "normal", {"n": n}, {"bins": bins}, {"x": x})


@pytest.mark.parametrize("root", [MEDIAN, HISTOGRAM])
def test_the_instrumented_copy_moves_no_line(root):
    """Every line of the author's kernel keeps its number: what the rewrite adds sits on the line of
    the statement it records (and the counter buffer after the last line), so naga's line:col map."""
    pkg = load_package(root)
    inst = races.instrument(pkg.kernel_source, "main", [(0, 1)], 0, 3)
    original = pkg.kernel_source.splitlines()
    lines = inst.source.splitlines()
    assert [INSERTED.sub("", ln) for ln in lines[:len(original)]] == original
    assert sum(inst.sites.values()) >= 1 and "sc_race_w(" in inst.source


def test_an_invocation_writing_its_neighbours_element_fails_naming_both(device, tmp_path):
    twin = load_package(copy_package(MEDIAN, tmp_path / "twin", {"forward.wgsl": [NEIGHBOUR]}))
    found, summary = races.check(device, twin, median_case())
    assert len(found) == 1
    r = found[0]
    assert (r.buffer, r.scratch, r.index, r.first, r.second) == ("y", False, 0, (0, 0, 0), (1, 0, 0))
    assert "y[0] was written by two invocations, global_invocation_id (0, 0, 0) and (1, 0, 0)" in r.describe()
    assert summary["write_sites"] == {"y": 2}


def test_the_story_op_passes(device):
    found, summary = races.check(device, load_package(MEDIAN), median_case(n=2000, w=7))
    assert found == [] and summary["tracked"] == ["y"] and summary["races"] == []


SCRATCH = {"op.toml": [("@group(0) @binding(2) p", "@group(0) @binding(3) win : storage read_write f32[SIZE]\n"
                                                   "@group(0) @binding(2) p")],
           "forward.wgsl": [("@group(0) @binding(2) var<uniform> p: Params;",
                             "@group(0) @binding(2) var<uniform> p: Params;\n"
                             "@group(0) @binding(3) var<storage, read_write> win: array<f32>;"),
                            ("    var win: array<f32, 31>;\n", "    let r = ROW;\n")]}


def scratch_twin(tmp_path, name, size, row):
    edits = {f: [(a, b.replace("SIZE", size)) for a, b in pairs] for f, pairs in SCRATCH.items()}
    edits["forward.wgsl"][1] = ("    var win: array<f32, 31>;\n", f"    let r = {row};\n")
    src = copy_package(MEDIAN, tmp_path / name, edits)
    text = (src / "forward.wgsl").read_text()
    (src / "forward.wgsl").write_text(re.sub(r"win\[([^\]]*)\]", r"win[r + \1]", text))
    return load_package(src)


def test_scratch_shared_across_rows_fails_and_a_region_per_row_passes(device, tmp_path):
    """Global scratch instead of a private array: every row's invocation writes the same elements."""
    shared = scratch_twin(tmp_path, "shared", "31", "0u")
    found, _ = races.check(device, shared, median_case())
    assert len(found) == 1 and found[0].scratch and found[0].buffer == "win"
    assert "scratch 'win'[0] was written by two invocations" in found[0].describe()
    assert "a region of its own" in found[0].describe()
    own = scratch_twin(tmp_path, "own", "31 * (n - w + 1)", "i * 31u")
    assert races.check(device, own, median_case())[0] == []


def test_an_atomic_histogram_is_judged_by_value_only_when_declared(device, tmp_path):
    pkg = load_package(HISTOGRAM)
    found, summary = races.check(device, pkg, histogram_case())
    assert found == [] and summary["atomic"] == ["h"] and summary["tracked"] == []
    undeclared = load_package(copy_package(HISTOGRAM, tmp_path / "h", {"op.toml": [("u32[bins] atomic", "u32[bins]")]}))
    found, _ = races.check(device, undeclared, histogram_case())
    assert len(found) == 1 and found[0].buffer == "h" and "declare it `atomic`" in found[0].describe()


def test_atomic_is_declared_on_a_read_write_binding_only():
    desc = parse_bindings("@group(0) @binding(0) h : storage read_write u32[n] atomic")
    assert desc.bindings[0].atomic and desc.bindings[0].layout == "storage read_write u32[n] atomic"
    with pytest.raises(StudioError) as e:
        parse_bindings("@group(0) @binding(0) x : storage read u32[n] atomic")
    assert (e.value.line, e.value.col) == (1, 35) and "declared atomic but bound 'read'" in e.value.message


@pytest.mark.parametrize("name", NAMES)
def test_every_builtin_passes_the_sanitizer(device, name):
    pkg = load_package(BUILTINS / name)
    if pkg.contract.kernel is None:
        pytest.skip("a composite op has no kernel of its own")
    inputs, params = RANDOM_CASES[name](np.random.default_rng(42))
    inputs = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    found, summary = races.check(device, pkg, CorpusCase(0, "random", "normal", {}, params, inputs))
    assert found == [] and sum(summary["write_sites"].values()) >= 1, summary


@pytest.mark.slow
def test_conformance_runs_the_sanitizer_once_and_fails_on_a_race(ctx, tmp_path):
    """Through conformance: the declared histogram earns its pass (value only); undeclared, the same
    kernel fails with both invocations named, the report saying which case and buffers it counted."""
    rep = conform(ctx, load_package(copy_package(HISTOGRAM, tmp_path / "declared")))
    assert rep.ok and rep.races["atomic"] == ["h"] and rep.to_json()["races"]["races"] == []
    assert rep.coverage["races"] == rep.races                  # on the receipt, with the rest of its coverage
    assert any("races     : case" in ln and "judged by value only (atomic): h" in ln for ln in report_lines(rep))
    undeclared = copy_package(HISTOGRAM, tmp_path / "h", {"op.toml": [("u32[bins] atomic", "u32[bins]")]})
    rep = conform(ctx, load_package(undeclared))
    assert not rep.ok and [f.kind for f in rep.failures] == ["race"]
    assert "h[0] was written by two invocations, global_invocation_id (0, 0, 0) and" in rep.failures[0].detail


def reader_twin(tmp_path, name, read):
    return load_package(copy_package(MEDIAN, tmp_path / name, {
        "op.toml": [("@group(0) @binding(2) p", "@group(0) @binding(3) m : storage read_write f32[n - w + 1]\n"
                                                "@group(0) @binding(2) p")],
        "forward.wgsl": [("@group(0) @binding(2) var<uniform> p: Params;",
                          "@group(0) @binding(2) var<uniform> p: Params;\n"
                          "@group(0) @binding(3) var<storage, read_write> m: array<f32>;"),
                         ("    y[i] = win[p.w / 2u];", f"    m[i] = win[p.w / 2u];\n    let prev = m[{read}];\n"
                                                      "    y[i] = win[p.w / 2u];")]}))


def test_scratch_another_workgroup_wrote_is_a_race_and_ones_own_workgroup_is_not(device, tmp_path):
    """Workgroups do not wait for each other: reading what another workgroup's invocation wrote in the
    same dispatch works on lavapipe (in order) and nowhere else promised."""
    found, _ = races.check(device, reader_twin(tmp_path, "far", "max(i, 1u) - 1u"), median_case())
    assert len(found) == 1 and found[0].kind == "read" and found[0].index == 63
    assert (found[0].first, found[0].second, found[0].workgroups) == ((63, 0, 0), (64, 0, 0), ((0, 0, 0), (1, 0, 0)))
    assert "scratch 'm'[63] was written by global_invocation_id (63, 0, 0) (workgroup (0, 0, 0)) and read by " \
           "(64, 0, 0) (workgroup (1, 0, 0))" in found[0].describe()
    assert races.check(device, reader_twin(tmp_path, "own", "i - i % 64u"), median_case())[0] == []


# ------------------------------------------------------------------ the device VJP ([backward] kernel)
MEAN = BUILTINS / "mean"
CASE = 35                                         # its corpus's random case of n = 207 (four workgroups)
SAME_GRADIENT = ("    dx[j] = dy[0] / f32(p.n);",            # invocation j also writes dx[j - 1] (the same value)
                 "    dx[j] = dy[0] / f32(p.n);\n    if (j > 0u) { dx[j - 1u] = dy[0] / f32(p.n); }")


def mean_cases():
    rng = np.random.default_rng(7)
    return [CorpusCase(k, "random", "normal", {"n": n}, {}, {"x": rng.standard_normal(n).astype(np.float32)})
            for k, n in enumerate((1, 64, 65, 300))]


def backward_conformance(ctx, pkg, races_too=True):
    with ctx.references.caching():
        passing = [(c, ctx.references.forward(pkg, c.inputs, c.params)) for c in mean_cases()]
        return conform_backward(ctx, pkg, passing, races=races_too)


def test_a_device_vjp_writing_a_neighbours_gradient_fails_backward_conformance_naming_both(ctx, tmp_path):
    """core/reduce/mean's device VJP whose invocation j also writes dx[j - 1]: every value is right
    (the values alone pass it), yet two invocations write dx[0]; backward conformance fails naming both,
    on the largest case, as the forward's sanitizer does. The shipped VJP passes."""
    twin = load_package(copy_package(MEAN, tmp_path / "twin", {"backward.wgsl": [SAME_GRADIENT]}))
    assert backward_conformance(ctx, twin, races_too=False).ok          # what the values see: nothing
    rep = backward_conformance(ctx, twin)
    assert not rep.ok and [(f.kind, f.gradient, f.case.index) for f in rep.failures] == [("race", "dx", 3)]
    assert rep.passed == 3 and rep.races["case"] == 3 and rep.races["write_sites"] == {"dx": 2}
    assert ("dx[0] was written by two invocations, global_invocation_id (0, 0, 0) and (1, 0, 0) (299 element(s) "
            "written by more than one invocation)") in rep.failures[0].detail
    text = "\n".join(rep.lines("scellis conform twin"))
    assert "vjp races : case 3: 1 buffer(s) with a race" in text and "first backward failure" in text
    assert rep.to_json()["failures"][0]["kind"] == "race"
    shipped = backward_conformance(ctx, load_package(MEAN))
    assert shipped.ok and shipped.races["tracked"] == ["dx"] and shipped.races["races"] == []


def test_conformance_runs_the_vjp_sanitizer_and_the_receipt_records_it(ctx, tmp_path):
    """Through `conform` (one case, as `--case` reproduces it): the race fails the backward, the
    verdict and the report, and the coverage the receipt carries names the run."""
    twin = load_package(copy_package(MEAN, tmp_path / "twin", {"backward.wgsl": [SAME_GRADIENT]}))
    rep = conform(ctx, twin, only_case=CASE)
    assert not rep.ok and rep.backward.failures[0].kind == "race" and rep.failures == []
    assert rep.coverage["backward_races"]["case"] == CASE and len(rep.coverage["backward_races"]["races"]) == 1
    assert any(ln.startswith("  vjp races : case") for ln in report_lines(rep))
    shipped = conform(ctx, load_package(MEAN), only_case=CASE)
    assert shipped.ok and shipped.coverage["backward_races"]["races"] == []


def test_the_sanitizer_picks_a_case_wider_than_one_in_every_dim():
    """A race between rows needs two rows, one within a row two columns: of the cases that fit, the
    sanitizer runs one with every dim above 1 before a larger one with a dim of 1."""
    pkg = load_package(BUILTINS / "nn" / "softmax")
    rng = np.random.default_rng(3)
    def case(k, rows, cols, kind="normal"):
        return CorpusCase(k, "random", kind, {"rows": rows, "cols": cols}, {},
                          {"x": rng.standard_normal((rows, cols)).astype(np.float32)})
    tall, wide, square = case(0, 900, 1), case(1, 1, 900), case(2, 3, 4, "uniform")
    assert races.pick_case(pkg, [tall, wide, square]) is square
    assert races.pick_case(pkg, [tall, wide]) in (tall, wide)          # none wider than one: the largest
