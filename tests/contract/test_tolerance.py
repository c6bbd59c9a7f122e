import numpy as np
import pytest

from studio.engine.contract.tolerance import (
    check_class_fits_category,
    compare,
    parse_tolerance,
)
from studio.engine.errors import StudioError

JUST = "each output is one of the inputs, bit for bit"


def f32(*v):
    return np.array(v, dtype=np.float32)


def test_exact_is_bitwise_and_signed_zeros_count():
    t = parse_tolerance("exact", "selection", JUST)
    assert compare(t, f32(1, 0.0, np.nan), f32(1, 0.0, np.nan)) is None
    m = compare(t, f32(1, 0.0), f32(1, -0.0))
    assert m.index == 1 and m.expected_bits == 0 and m.got_bits == 0x80000000


def test_exact_any_nan_matches_any_nan():
    t = parse_tolerance("exact", "selection", JUST)
    other_nan = np.array([0x7FC00001], np.uint32).view(np.float32)
    assert compare(t, f32(np.nan), other_nan) is None


def test_ulp_distance():
    t = parse_tolerance("ulp(1)", "elementwise")
    one = f32(1.0)
    next1 = np.nextafter(one, f32(2))
    next2 = np.nextafter(next1, f32(2))
    assert compare(t, one, next1) is None
    assert compare(t, one, next2).index == 0
    assert compare(t, f32(np.inf), f32(3e38)) is not None
    assert compare(t, f32(0.0), f32(-0.0)) is None  # adjacent on the float line


def test_bound_uses_magnitude():
    t = parse_tolerance("bound", "reduction")
    exp = f32(1.0)
    assert compare(t, exp, f32(1.0001), magnitude=np.array([1e6]), terms=1000) is None
    assert compare(t, exp, f32(1.0001), magnitude=np.array([1.0]), terms=1000) is not None


@pytest.mark.parametrize("cls,cat,ok", [
    ("exact", "selection", True), ("exact", "elementwise", False), ("exact", "reduction", False),
    ("ulp(4)", "elementwise", True), ("ulp(5)", "elementwise", False), ("ulp(2)", "contraction", False),
    ("bound", "contraction", True), ("bound(0.5)", "reduction", True), ("bound(2)", "reduction", False),
    ("bound", "elementwise", False)])
def test_class_fits_category(cls, cat, ok):
    assert (check_class_fits_category(parse_tolerance(cls, cat, JUST)) == []) is ok


def test_exact_needs_justification():
    errs = check_class_fits_category(parse_tolerance("exact", "selection", ""))
    assert errs and errs[0].field == "tolerance.justification"


def test_unknown_class_and_category():
    with pytest.raises(StudioError, match="unknown tolerance class"):
        parse_tolerance("close", "selection")
    with pytest.raises(StudioError, match="unknown semantic category"):
        parse_tolerance("exact", "magic")


# ------------------------------------------------------------------ classes that mean what they say
def test_a_scan_is_an_accumulating_category_with_per_output_terms():
    t = parse_tolerance("bound", "scan")
    assert check_class_fits_category(t) == [] and check_class_fits_category(parse_tolerance("ulp(4)", "scan"))
    want = np.cumsum(np.ones(100)).astype(np.float32)
    got = want.copy()
    got[99] += 1                                     # one term too many at the end
    k = np.arange(1, 101)
    assert compare(t, want, got, magnitude=want.astype(np.float64), terms=k).index == 99
    assert compare(t, want, want, magnitude=want.astype(np.float64), terms=k) is None


def _sig(text):
    from studio.engine.contract.signature import parse_signature
    return parse_signature(text)


def test_a_generator_has_no_array_inputs_and_an_accumulation_needs_an_f64_reference():
    from studio.engine.contract.tolerance import check_category_fits_signature
    gen = parse_tolerance("ulp(0)", "generator")
    lie = check_category_fits_signature(gen, _sig("s(x: f32[n]) -> y: f32[1]"), "f32")
    assert lie and lie[0].field == "tolerance.category" and "without array inputs" in lie[0].message
    assert check_category_fits_signature(gen, _sig("g(; n: u32 in [1, 64]) -> y: f32[n]"), "f64") == []
    red = parse_tolerance("bound", "reduction")
    f32ref = check_category_fits_signature(red, _sig("s(x: f32[n]) -> y: f32[1]"), "f32")
    assert f32ref and f32ref[0].field == "reference.precision"
    assert check_category_fits_signature(red, _sig("s(x: f32[n]) -> y: f32[1]"), "f64") == []
    # an elementwise op may keep an f32 reference: it computes the kernel's own single rounding
    assert check_category_fits_signature(parse_tolerance("ulp(1)", "elementwise"),
                                         _sig("a(x: f32[n]) -> y: f32[n]"), "f32") == []


def test_wgsl_builtins_get_wgsl_s_own_accuracy():
    t = parse_tolerance("ulp(1, exp)", "elementwise")
    assert str(t) == "ulp(1, exp)" and check_class_fits_category(t) == []
    x = np.array([-85.0, 1.0], np.float32)
    want = np.exp(x.astype(np.float64)).astype(np.float32)
    got = want.view(np.uint32).copy()
    got[0] += 150                              # 150 ulp at x = -85: WGSL allows 3 + 2 * 85 = 173
    got = got.view(np.float32)
    assert compare(t, want, got, argument=x) is None
    assert compare(parse_tolerance("ulp(4)", "elementwise"), want, got) is not None
    got2 = want.view(np.uint32).copy()
    got2[1] += 10                              # at x = 1 WGSL allows 5 ulp, plus the declared 1
    assert compare(t, want, got2.view(np.float32), argument=x).index == 1
    with pytest.raises(StudioError):
        parse_tolerance("ulp(1, atan7)", "elementwise")
    assert check_class_fits_category(parse_tolerance("ulp(1, exp)", "reduction"))
