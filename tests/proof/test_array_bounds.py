"""A parameter or dimension range wider than the fixed-size array the kernel indexes with it is
refused at the kernel's line:col, naming the array's size and the range (proof/array_bounds.py);
a range the array holds passes."""
from conftest import BUILTINS, MEDIAN, copy_package
from studio.engine.contract.package import load_package
from studio.engine.contract.signature import parse_signature
from studio.engine.proof.array_bounds import check_array_bounds
from studio.engine.proof.checker import check_package

STEP = "fixed-size arrays hold every index the contract's ranges allow"


def errors(pkg, signature: str | None = None):
    c = pkg.contract
    sig = parse_signature(signature) if signature else c.signature
    return check_array_bounds(pkg.kernel_source, sig, c.bindings, kernel_file="forward.wgsl")


def test_w_up_to_63_against_an_array_of_31_is_refused_at_line_and_col(ctx, tmp_path):
    wide = load_package(copy_package(MEDIAN, tmp_path / "wide", {"op.toml": [("in [1, 31]", "in [1, 63]")]}))
    rep = check_package(ctx, wide, compile_kernel=False)
    assert not rep.ok and STEP not in rep.passed
    first = rep.errors[0]
    assert (first.file, first.line, first.col) == (wide.kernel_path, 19, 9)
    assert "win[j] can index past the end of 'win' (array<f32, 31>, 31 elements)" in first.message
    assert "the index reaches 62" in first.message and "(w: u32 odd in [1, 63])" in first.message
    assert "at most 30" in first.hint
    forward = [(e.line, e.col) for e in rep.errors if e.file == wide.kernel_path]
    assert forward == [(19, 9), (23, 17), (31, 12)]          # win[j], win[a], win[p.w / 2u]
    assert any(e.file == wide.backward_path for e in rep.errors)     # the device VJP's window too


def test_the_range_the_array_holds_passes(ctx):
    pkg = load_package(MEDIAN)
    assert errors(pkg) == []
    assert STEP in check_package(ctx, pkg, compile_kernel=False).passed
    sig = pkg.contract.signature.text
    assert [(e.line, e.col) for e in errors(pkg, sig.replace("in [1, 31]", "in [1, 32]"))] == [(19, 9), (23, 17)]


def test_a_dimension_bounded_by_a_relation_counts_too():
    """median_rows reads a row of k <= 31 into array<f32, 31>: k <= 63, or no bound at all, is refused."""
    pkg = load_package(BUILTINS / "median_rows")
    sig = pkg.contract.signature.text
    assert errors(pkg) == []
    wide = errors(pkg, sig.replace("k <= 31", "k <= 63"))
    assert wide and "the index reaches 62" in wide[0].message and "(k <= 63)" in wide[0].message
    unbounded = errors(pkg, sig.replace(", k <= 31", ""))
    assert unbounded and "has no upper bound" in unbounded[0].message and "k (no upper bound)" in unbounded[0].message


def test_an_index_from_the_invocation_or_the_data_is_left_to_conformance():
    pkg = load_package(MEDIAN)
    src = pkg.kernel_source.replace("win[j] = x[i + j];", "win[i] = x[i + j];")
    assert check_array_bounds(src, pkg.contract.signature, pkg.contract.bindings, kernel_file="k.wgsl") == []
