"""docs/porting.md, worked through: five kinds of existing WGSL kernel, each a
package under tests/fixtures/porting/ with the kernel as found in originals/. Each earns a
receipt (a full conformance pass on this device, judged valid), with the original's arithmetic
unchanged; the doc's cautionary tales are refused with their real cause."""
import re
import shutil
from pathlib import Path

import pytest

from conftest import copy_package
from studio.engine.contract.package import load_package
from studio.engine.proof.checker import check_package
from studio.engine.proof.conformance import conform, report_lines
from studio.engine.proof.receipts import local_status
from studio.engine.services.actions import earn_conformance_receipt

PORTING = Path(__file__).parents[1] / "fixtures" / "porting"
ORIGINALS = PORTING / "originals"
EXAMPLES = ["axpy", "partial_sums", "matmul", "u32_sum", "spmv"]
VERBATIM = ["axpy", "matmul", "spmv"]        # wrapped with no change to the kernel at all


def prove(ctx, root: Path, **kw):
    pkg = load_package(root)
    rep = conform(ctx, pkg, **kw)
    return pkg, rep, "\n".join(report_lines(rep))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n != "u32_sum" else n
                                  for n in EXAMPLES])
def test_each_worked_example_earns_a_receipt(ctx, tmp_path, device, name):
    root = copy_package(PORTING / name, tmp_path / name)
    check = check_package(ctx, load_package(root))
    assert check.ok and check.warnings == [], [e.format() for e in check.errors + check.warnings]
    pkg, rep, text = prove(ctx, root)
    assert rep.ok, text
    assert earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal) is not None
    assert local_status(pkg, device.profile.id, ctx.seal) == "valid"


def test_every_example_records_its_origin_and_license():
    for name in EXAMPLES:
        for f in (PORTING / name / "forward.wgsl", PORTING / name / "reference.py", ORIGINALS / f"{name}.wgsl"):
            head = f.read_text()[:600]
            assert "Origin: written for Scellis Studio's porting guide" in head and "License: MIT" in head, f
        assert 'license = "MIT"' in (PORTING / name / "op.toml").read_text()


def _code(line: str) -> str:
    return line.split("//")[0].strip()


def _arithmetic(text: str) -> list[str]:
    """The lines that compute values: an assignment whose right side adds or multiplies."""
    return [_code(ln) for ln in text.splitlines()
            if re.search(r"[^=!<>]=[^=]", _code(ln)) and re.search(r"[+*]", _code(ln).split("=", 1)[-1])]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_port_keeps_the_originals_arithmetic(name):
    original, ported = (ORIGINALS / f"{name}.wgsl").read_text(), (PORTING / name / "forward.wgsl").read_text()
    lines = _arithmetic(original)
    assert lines
    assert [ln for ln in lines if ln not in {_code(p) for p in ported.splitlines()}] == []
    if name in VERBATIM:
        assert ported == original


@pytest.mark.slow
def test_the_reduction_as_found_fails_conformance_where_n_is_not_a_multiple_of_256(ctx, tmp_path, device):
    """The cautionary tale: run as found, the tail workgroup's barrier is not reached by all."""
    root = copy_package(PORTING / "u32_sum", tmp_path / "u32_sum")
    shutil.copy(ORIGINALS / "u32_sum.wgsl", root / "forward.wgsl")
    _, rep, text = prove(ctx, root)
    assert not rep.ok and "never written" in text, text
    assert all(f.case.dims["n"] % 256 for f in rep.failures)        # only where n is not a multiple


@pytest.mark.slow
def test_the_matmul_past_its_fold_is_refused_with_the_indexing_fix(ctx, tmp_path, device):
    """The 8 x 8 matmul as found reads only gid.y: without the signature's bound, the corpus folds the
    y axis into z and the failure names the fix (or the bound the worked example declares)."""
    root = copy_package(PORTING / "matmul", tmp_path / "matmul", {"op.toml": [("; m <= 524280, n <= 524280", "")]})
    _, rep, text = prove(ctx, root)
    assert not rep.ok and "fold" in {f.case.shape_kind for f in rep.failures}, text
    assert "folds that axis into z" in text and "gid.z" in text


@pytest.mark.slow
def test_partial_sums_whose_f32_intermediates_overflow_are_refused(ctx, tmp_path, device):
    """`precision`: the f64 reference stays finite where the kernel's f32 running sum reaches inf; the
    worked example's domain `in [-1e30, 1e30]` is what keeps intermediates finite."""
    root = copy_package(PORTING / "partial_sums", tmp_path / "ps", {"op.toml": [("in [-1e30, 1e30]", "finite")]})
    _, rep, text = prove(ctx, root)
    assert not rep.ok and "f32 arithmetic overflowed" in text, text


FOLD_PAST_THE_END = 65536 * 256 + 1     # 65,537 workgroups: a 32,769 x 2 grid, one workgroup past the end


@pytest.mark.slow
def test_the_fold_launches_a_workgroup_past_the_end_and_the_port_guards_it(ctx, tmp_path, device):
    """The u32 sum writes one value per workgroup: the fold's extra workgroup must not write. The
    ported kernel compares its folded workgroup index with arrayLength(&partial) (the output's length
    as run gives it); without that guard the write lands past the end."""
    root = copy_package(PORTING / "u32_sum", tmp_path / "u32_sum")
    _, rep, text = prove(ctx, root, extra_sizes={"fold": FOLD_PAST_THE_END})
    assert rep.ok and "1 workgroup(s) past the end" in text, text
    bad = copy_package(PORTING / "u32_sum", tmp_path / "unguarded", {"forward.wgsl": [
        ("if (lid == 0u && group < arrayLength(&partial)) {", "if (lid == 0u) {")]})
    _, rep, text = prove(ctx, bad, extra_sizes={"fold": FOLD_PAST_THE_END})
    assert not rep.ok and "wrote past the end" in text and "workgroup(s) run past the end" in text, text


def test_a_vector_pad_in_a_uniform_is_refused_at_the_binding_and_the_kernel(ctx, tmp_path, device):
    """What cannot be taken yet is refused with its cause: descriptor fields are 4-byte scalars."""
    root = copy_package(PORTING / "axpy", tmp_path / "axpy", {
        "forward.wgsl": [("    _pad0: u32,\n    _pad1: u32,\n", "    _pad: vec2<u32>,\n")],
        "op.toml": [("_pad0: u32 = 0, _pad1: u32 = 0", "_pad: u32 = 0")]})
    rep = check_package(ctx, load_package(root))
    assert not rep.ok
    e = rep.errors[0]
    assert Path(e.file).name == "op.toml" and "field type is vec2<u32>" in e.message
    assert [(Path(r.file).name, r.line, r.col) for r in e.related] == [("forward.wgsl", 12, 36)]


def test_a_pad_left_out_of_the_descriptor_is_named_with_its_offset(ctx, tmp_path, device):
    root = copy_package(PORTING / "axpy", tmp_path / "axpy", {"op.toml": [(", _pad0: u32 = 0, _pad1: u32 = 0", "")]})
    rep = check_package(ctx, load_package(root))
    assert not rep.ok
    e = rep.errors[0]
    assert "_pad0 (u32 at byte 8)" in e.message and "_pad1 (u32 at byte 12)" in e.message, e.format()
    assert [(Path(r.file).name, r.line, r.col) for r in e.related] == [("forward.wgsl", 13, 36)]
