"""A uniform struct the descriptor does not cover, in the product's words (device/layout_words.py).
wgpu on lavapipe says only "Buffer structure size 32, ... `min_binding_size`, which is 8"; the
checker and the run path name what the descriptor lacks, each member at its byte offset, and the
hint is the descriptor text to add — which, added, makes the package check clean."""
import numpy as np
import pytest
from test_inplace import AXPY_WGSL, OP_TOML, axpy_package

from studio.engine.contract.package import load_package
from studio.engine.device.layout_words import uniform_struct
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.proof.checker import check_package

PADDED = AXPY_WGSL.replace("    a: f32,\n", "    a: f32,\n    _pad0: u32,\n    _pad1: u32,\n")
UNIFORM = "@group(0) @binding(2) p : uniform { n: u32 = n, a: f32 = a }"


def layout_errors(ctx, pkg):
    return [e for e in check_package(ctx, pkg).errors if "binding 'p'" in e.message]


def test_a_missing_pad_is_named_with_its_offset_and_the_fix_checks_clean(ctx, tmp_path):
    pkg = load_package(axpy_package(tmp_path / "bad", PADDED))
    errs = layout_errors(ctx, pkg)
    assert len(errs) == 1, [e.format() for e in errs]
    e = errs[0]
    assert ("the kernel's struct Params has size 16 bytes but the descriptor's 2 field(s) cover 8: it lacks "
            "_pad0 (u32 at byte 8), _pad1 (u32 at byte 12)") in e.message
    assert "min_binding_size" not in e.format() and "access mode" not in e.hint
    assert e.hint.startswith("add after 'a': _pad0: u32 = 0, _pad1: u32 = 0")
    assert e.file.endswith("op.toml") and e.line == 17                      # the uniform's line in op.toml
    # the hint, taken as written, is the fix
    fixed = OP_TOML.replace(UNIFORM, UNIFORM.replace("a: f32 = a }", "a: f32 = a, _pad0: u32 = 0, _pad1: u32 = 0 }"))
    good = load_package(axpy_package(tmp_path / "good", PADDED, fixed))
    assert layout_errors(ctx, good) == []


def test_a_missing_data_field_and_a_vector_pad(ctx, tmp_path):
    kernel = AXPY_WGSL.replace("    a: f32,\n", "    a: f32,\n    b: f32,\n    _pad: vec4<u32>,\n")
    e = layout_errors(ctx, load_package(axpy_package(tmp_path / "v", kernel)))[0]
    assert "struct Params has size 32 bytes" in e.message and "cover 8" in e.message
    assert "it lacks b (f32 at byte 8), implicit padding at byte 12, _pad (vec4<u32> at byte 16)" in e.message
    assert "b: f32 = ..., _pad12: u32 = 0, _pad_0: u32 = 0" in e.hint and "set b to its value" in e.hint
    assert "declare _pad: vec4<u32> in the struct as the scalar members" in e.hint


def test_the_run_path_says_the_same_instead_of_wgpus_text(ctx, tmp_path):
    pkg = load_package(axpy_package(tmp_path / "bad", PADDED))
    x = np.ones(4, np.float32)
    with pytest.raises(StudioError) as e:
        run_op(ctx, pkg, {"x": x, "y": x}, {"a": 2.0})
    assert "binding 'p'" in e.value.message and "_pad0 (u32 at byte 8)" in e.value.message
    assert e.value.file.endswith("op.toml") and "_pad1: u32 = 0" in e.value.hint


def test_wgsl_uniform_layout_rules():
    src = """
    struct Params {
        n: u32,          // a comment, with a comma
        a: f32,
        m: array<vec2f, 2>,
        @align(16) q: vec3<f32>,
    }
    @group(0) @binding(2) var<uniform> p: Params;
    """
    name, members, size = uniform_struct(src, "p")
    assert name == "Params" and size == 64
    assert [(m.name, m.offset, m.size) for m in members] == [("n", 0, 4), ("a", 4, 4), ("m", 16, 32), ("q", 48, 12)]
    assert uniform_struct(src.replace("vec3<f32>", "mat2x2<f32>"), "p") is None     # not covered: the plain words


def test_a_struct_these_rules_do_not_read_still_gets_the_bytes_and_a_fix(ctx, tmp_path):
    kernel = AXPY_WGSL.replace("    a: f32,\n", "    a: f32,\n    m: mat2x2<f32>,\n")
    e = layout_errors(ctx, load_package(axpy_package(tmp_path / "m", kernel)))[0]
    assert "uniform struct has size 24 bytes but the descriptor's 2 field(s) cover 8: bytes 8..23" in e.message
    assert "_pad8: u32 = 0" in e.hint and "_pad20: u32 = 0" in e.hint
