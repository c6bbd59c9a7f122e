"""Specialisation constants: a binding descriptor's `override W: u32 = w` line sets the kernel's
WGSL `override W: u32` per call (one pipeline per value). Parse errors, the checker's comparison
with the WGSL (each with a failing control), the pipeline cache, and conformance at every value."""
import pytest
from conftest import EXAMPLES

from studio.engine.contract.bindings import check_against_signature, parse_bindings
from studio.engine.contract.package import load_package
from studio.engine.contract.signature import parse_signature
from studio.engine.device.execution import Case, run_cases
from studio.engine.errors import StudioError
from studio.engine.proof.checker import check_package
from studio.engine.proof.conformance import conform

FAST = EXAMPLES / "windowed_median_fast"
ODD_W = list(range(1, 32, 2))


def test_override_line_parses_and_evaluates():
    d = parse_bindings("@group(0) @binding(0) x : storage read f32[n]\noverride W: u32 = w\n"
                       "override H: i32 = (w - 1) / 2\n", file="op.toml", line=10)
    assert [(o.name, o.dtype, o.line, o.col) for o in d.overrides] == [("W", "u32", 11, 10), ("H", "i32", 12, 10)]
    assert d.override_values({"w": 7}) == {"W": 7, "H": 3}
    assert len(d) == 1           # overrides are not buffer bindings


@pytest.mark.parametrize("text,line,col,needle", [
    ("override W: u64 = w", 5, 13, "unknown override dtype 'u64'"),
    ("override W: u32 = w\noverride W: u32 = 1", 6, 10, "already set"),
    ("override W: u32 = ", 5, 18, "end of text"),
])
def test_override_parse_errors_are_positioned(text, line, col, needle):
    with pytest.raises(StudioError) as e:
        parse_bindings(text, file="op.toml", line=5)
    assert (e.value.file, e.value.line, e.value.col) == ("op.toml", line, col)
    assert needle in e.value.message and e.value.hint


def test_override_value_that_does_not_fit_and_unknown_symbol():
    d = parse_bindings("override W: u32 = w - 10", file="op.toml")
    with pytest.raises(StudioError, match="does not fit u32") as e:
        d.override_values({"w": 3})
    assert e.value.field == "override W"
    sig = parse_signature("f(x: f32[n]; w: u32) -> y: f32[n]")
    errs = check_against_signature(parse_bindings("@group(0) @binding(0) x : storage read f32[n]\n"
                                                  "@group(0) @binding(1) y : storage read_write f32[n]\n"
                                                  "override W: u32 = q", file="op.toml"), sig)
    assert len(errs) == 1 and "'q' is not a symbol" in errs[0].message and (errs[0].line, errs[0].col) == (3, 19)


def test_fast_median_passes_the_checker(ctx):
    rep = check_package(ctx, load_package(FAST))
    assert rep.ok, [e.format() for e in rep.errors]
    assert any("overrides name the kernel's WGSL overrides" in p for p in rep.passed)


def _errors(ctx, pkg_copy, **edits):
    rep = check_package(ctx, load_package(pkg_copy(FAST, **edits)))
    assert not rep.ok
    return rep.errors


def test_override_naming_a_missing_wgsl_override_fails(ctx, pkg_copy):
    errs = _errors(ctx, pkg_copy, op__toml=[('override W: u32 = w\n"""\n\n[backward]',
                                             'override WIDTH: u32 = w\n"""\n\n[backward]')])
    e = next(e for e in errs if "WIDTH" in e.message)
    assert "no `override WIDTH` declaration" in e.message and "(its overrides: RUN, W)" in e.message
    assert e.file.endswith("op.toml") and e.line is not None and e.col is not None
    # the kernel's W now has no default and nothing sets it: reported at the WGSL declaration
    site = next(e for e in errs if "has no default" in e.message)
    assert site.file.endswith("forward.wgsl") and site.line == 11


def test_override_type_mismatch_fails(ctx, pkg_copy):
    errs = _errors(ctx, pkg_copy, forward__wgsl=[("override W: u32;", "override W: i32;")])
    e = next(e for e in errs if "override 'W'" in e.message)
    assert "the descriptor says u32, the kernel declares i32" in e.message
    assert e.file.endswith("op.toml") and e.related and e.related[0].file.endswith("forward.wgsl")
    assert e.related[0].line == 11


def test_wgsl_override_with_an_id_is_refused(ctx, pkg_copy):
    errs = _errors(ctx, pkg_copy, forward__wgsl=[("override W: u32;", "@id(3) override W: u32;")])
    assert any("@id(3)" in e.message for e in errs)


def test_pipelines_are_cached_by_override_values(ctx, pkg_copy, device, rng=None):
    import numpy as np
    # a comment makes the kernel's hash new to this session's device
    pkg = load_package(pkg_copy(FAST, forward__wgsl=[("// user/demo", "// cache test\n// user/demo")]))
    x = np.random.default_rng(1).normal(size=300).astype(np.float32)
    before = device.pipeline_count
    for w in (3, 5, 3, 5, 3):
        run_cases(pkg, [Case({"x": x}, {"w": w})], device=device)
    assert device.pipeline_count - before == 2          # one pipeline per value, reused
    run_cases(pkg, [Case({"x": x}, {"w": w}) for w in (7, 9, 7)], device=device)
    assert device.pipeline_count - before == 4


def test_device_refuses_an_unknown_constant(device):
    src = ("override W: u32 = 1u;\n@group(0) @binding(0) var<storage, read_write> y: array<u32>;\n"
           "@compute @workgroup_size(1) fn main() { y[0] = W; }\n")
    groups = {0: [{"binding": 0, "kind": "storage", "access": "read_write", "min_size": 0}]}
    device.pipeline(src, "main", groups, file="k.wgsl", constants={"W": 3})
    with pytest.raises(StudioError, match="NOPE"):
        device.pipeline(src, "main", groups, file="k.wgsl", constants={"NOPE": 3})


@pytest.mark.slow
def test_conformance_compiles_and_passes_every_window(ctx):
    rep = conform(ctx, load_package(FAST))
    assert rep.ok, rep.first_failure_lines()
    assert sorted(rep.overrides["W"]) == ODD_W           # all 16 odd w, each its own pipeline
    assert rep.backward is not None and rep.backward.ok
    assert rep.to_json()["overrides"] == {"W": ODD_W, "RUN": [512]}    # RUN: the declared default of its tunable


@pytest.mark.slow
def test_kernel_right_at_one_window_only_fails_conformance_at_the_others(ctx, pkg_copy):
    # picks the middle of a 7-window whatever W is: right at w = 7, wrong elsewhere
    pkg = load_package(pkg_copy(FAST, forward__wgsl=[("y[i0] = s[W / 2u];", "y[i0] = s[3u];"),
                                                     ("y[i] = s[W / 2u];", "y[i] = s[3u];")]))
    assert check_package(ctx, pkg).ok          # nothing static can tell
    rep = conform(ctx, pkg)
    assert not rep.ok
    failing_w = {f.case.params["w"] for f in rep.failures}
    passing_w = {c.params["w"] for c in rep.corpus.cases} - failing_w
    assert 7 not in failing_w and 7 in passing_w
    assert failing_w >= {3, 5, 9, 15, 31}
