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
