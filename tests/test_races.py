"""The race sanitizer (proof/races.py): conformance runs an instrumented copy of the kernel once and
fails an element of an output or of scratch that two invocations wrote, naming both; outputs
declared `atomic` are judged by value only. Each check has the kernel that trips it and a clean one."""
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
from studio.engine.proof.conformance import conform, report_lines
from studio.engine.proof.corpus import CorpusCase

HISTOGRAM = Path(__file__).parent / "fixtures" / "races" / "histogram"
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
