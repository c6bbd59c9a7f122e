"""The static checker: bindings judged against the real WGSL by wgpu's validator, both
places named; tolerance vs category; SPDX."""
import subprocess
import sys

import pytest
from conftest import MEDIAN

from studio.engine.contract.package import load_package
from studio.engine.proof.checker import check_package

KERNEL = "forward.wgsl"


def errors_for(ctx, pkg_copy, device, **edits):
    rep = check_package(ctx, load_package(pkg_copy(**edits)))
    return rep.errors


def test_story_op_passes(ctx, device):
    rep = check_package(ctx, load_package(MEDIAN))
    assert rep.ok, [e.format() for e in rep.errors]
    assert any("judged by wgpu" in p for p in rep.passed)


def _both_places(err, root, wgsl_text_at_site):
    assert err.file.endswith("op.toml") and err.line is not None
    site = err.related[0]
    assert site.file.endswith(KERNEL) and site.line is not None
    line = (root / KERNEL).read_text().splitlines()[site.line - 1]
    assert line[site.col - 1:].startswith(wgsl_text_at_site)


@pytest.mark.parametrize("old,new,needle,site", [
    ("var<storage, read> x: array<f32>", "var<storage, read_write> x: array<f32>",
     "the descriptor says storage read, the kernel declares storage read_write", "x"),
    ("@group(0) @binding(1) var<storage, read_write> y", "@group(0) @binding(3) var<storage, read_write> y",
     "the kernel declares it at @group(0) @binding(3)", "y"),
    ("var<uniform> p: Params", "var<storage, read> p: Params", "the descriptor says uniform", "p"),
])
def test_layout_mismatch_names_both_places(ctx, pkg_copy, device, old, new, needle, site):
    root = pkg_copy(forward__wgsl=[(old, new)])
    errs = check_package(ctx, load_package(root)).errors
    assert len(errs) == 1 and needle in errs[0].message, [e.format() for e in errs]
    _both_places(errs[0], root, site)


def test_element_type_mismatch(ctx, pkg_copy, device):
    root = pkg_copy(forward__wgsl=[("var<storage, read> x: array<f32>", "var<storage, read> x: array<u32>"),
                                   ("win[j] = x[i + j];", "win[j] = f32(x[i + j]);")])
    errs = check_package(ctx, load_package(root)).errors
    assert len(errs) == 1 and "f32 elements; the kernel's element type is u32" in errs[0].message
    _both_places(errs[0], root, "x")


def test_struct_field_order_is_checked_by_running_a_probe(ctx, pkg_copy, device):
    root = pkg_copy(forward__wgsl=[("    n: u32,\n    w: u32,", "    w: u32,\n    n: u32,")])
    errs = check_package(ctx, load_package(root)).errors
    assert {e.message.split(": ", 1)[1].split(" is at")[0] for e in errs} == {"field 'n'", "field 'w'"}


def test_struct_field_name_and_extra_field(ctx, pkg_copy, device):
    root = pkg_copy(forward__wgsl=[("    w: u32,", "    width: u32,"), ("p.w", "p.width")])
    errs = check_package(ctx, load_package(root)).errors
    assert len(errs) == 1 and "binding 'p'" in errs[0].message
    root2 = pkg_copy(name="p2", forward__wgsl=[("    w: u32,", "    w: u32,\n    extra: u32,")])
    errs2 = check_package(ctx, load_package(root2)).errors
    assert len(errs2) == 1 and "size" in errs2[0].message


def test_kernel_global_missing_from_descriptor(ctx, pkg_copy, device):
    root = pkg_copy(op__toml=[("@group(0) @binding(2) p : uniform { n: u32 = n, w: u32 = w }", "")])
    errs = check_package(ctx, load_package(root)).errors
    assert any("@group(0) @binding(2)" in e.message and e.file.endswith(KERNEL) and e.line == 10 for e in errs), \
        [e.format() for e in errs]


def test_kernel_compile_error_is_reported_at_its_line(ctx, pkg_copy, device):
    root = pkg_copy(forward__wgsl=[("let i = gid.x + gid.y * nwg.x * 64u;", "let i = gid.x + ;")])
    errs = check_package(ctx, load_package(root)).errors
    assert len(errs) == 1 and errs[0].file.endswith(KERNEL) and errs[0].line == 15 and errs[0].col == 21


@pytest.mark.parametrize("old,new,field", [
    ('class = "exact"\ncategory = "selection"', 'class = "exact"\ncategory = "elementwise"', "tolerance.class"),
    ('license = "Apache-2.0"', 'license = "Apache-2.0 AND NotALicense-9"', "license"),
    ('license = "Apache-2.0"', 'license = "MIT OR"', "license"),
    ('license = "Apache-2.0"\nvisibility = "private"', 'visibility = "public"', "license"),
])
def test_static_rules(ctx, pkg_copy, device, old, new, field):
    errs = errors_for(ctx, pkg_copy, device, op__toml=[(old, new)])
    assert [e.field for e in errs] == [field]


@pytest.mark.slow
def test_cli_check_prints_both_locations_and_exits_1(pkg_copy):
    root = pkg_copy(forward__wgsl=[("var<storage, read> x: array<f32>", "var<storage, read_write> x: array<f32>")])
    res = subprocess.run([sys.executable, "-m", "studio.cli", "check", str(root)], capture_output=True, text=True)
    assert res.returncode == 1
    assert f"{root}/op.toml:26:1: binding 'x'" in res.stdout
    assert f"{root}/forward.wgsl:8:" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr
