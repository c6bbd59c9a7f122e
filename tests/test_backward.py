"""The backward notation: the three kinds, VJP rule forms, positions, signature checks."""
import pytest
from hypothesis import given, settings, strategies as st

from studio.engine.backward import VjpRule, check_against_signature, parse_backward
from studio.engine.errors import StudioError
from studio.engine.signature import parse_signature

FIR = parse_signature("fir(x: f32[n], taps: f32[k]; k <= n) -> y: f32[n - k + 1]")
TEXT = """\
# declared VJPs
vjp x: reference(vjp_x) on device("backward.wgsl")
vjp taps: reference(vjp_taps)   # CPU only
"""


def err(fn, *args, **kw) -> StudioError:
    with pytest.raises(StudioError) as e:
        fn(*args, **kw)
    return e.value


def test_kinds():
    assert (parse_backward("nondifferentiable").kind, parse_backward("nondifferentiable").differentiable) == \
        ("nondifferentiable", False)
    c = parse_backward("\n# autodiff through the parts\ncomposite\n")
    assert (c.kind, c.rules, c.differentiable) == ("composite", (), True)


def test_reference_rules():
    bw = parse_backward(TEXT)
    assert (bw.kind, bw.text, bw.differentiable) == ("vjp", TEXT, True)
    assert bw.rules == (VjpRule(("x",), "reference", "vjp_x", "backward.wgsl", None, None, 2, 1),
                        VjpRule(("taps",), "reference", "vjp_taps", None, None, None, 3, 1))
    assert check_against_signature(bw, FIR) == []
    assert str(bw) == 'vjp x: reference(vjp_x) on device("backward.wgsl")\nvjp taps: reference(vjp_taps)'


def test_route_rule_and_several_inputs():
    (r,) = parse_backward("vjp x: route(dy, to = argmedian)").rules
    assert (r.inputs, r.form, r.cotangent, r.index, r.function) == (("x",), "route", "dy", "argmedian", None)
    (r,) = parse_backward("vjp x, taps: reference(fir_vjp)").rules
    assert r.inputs == ("x", "taps")


def test_check_against_signature():
    bw = parse_backward("vjp x, q: reference(f)\nvjp x: reference(g)", file="op.toml", line=30)
    errors = check_against_signature(bw, FIR)
    assert [(e.file, e.line, e.col, e.field, e.message) for e in errors] == [
        ("op.toml", 30, 1, "q", "'q' is not an input of fir"),
        ("op.toml", 31, 1, "x", "'x' already has a VJP")]


@pytest.mark.parametrize("text, line, col, words", [
    ("vjp x: reference(f)\ncomposite", 2, 1, ["'composite' after 'vjp'"]),
    ("nondifferentiable\n\nvjp x: reference(f)", 3, 1, ["'vjp' after 'nondifferentiable'"]),
    ("composite\ncomposite", 2, 1, ["'composite' after 'composite'"]),
    ("vjpx: reference(f)", 1, 1, ["'vjpx'", "'vjp'"]),
    ("vjp x reference(f)", 1, 7, ["'reference'", "':'"]),
    ("vjp x: route(dy)", 1, 16, ["')'", "','"]),
    ("vjp x: reference(f) on device(\"b.glsl\")", 1, 31, ["not a .wgsl file"]),
    ("vjp x: reference(f) on device(b.wgsl)", 1, 31, ["'b'", "a quoted string"]),
    ("vjp x: reference(f", 1, 19, ["end of text", "')'"]),
    ("vjp to: reference(f)", 1, 5, ["reserved word"]),
    ("", 1, 1, ["no backward declared"]),
    ("# nothing", 1, 1, ["no backward declared"]),
])
def test_errors_point_at_the_token(text, line, col, words):
    e = err(parse_backward, text)
    assert (e.line, e.col) == (line, col)
    assert all(w in e.message + e.hint for w in words), e.format()


def test_positions_with_an_offset():
    e = err(parse_backward, "vjp x: reference(f) extra", file="op.toml", line=10, col=8)
    assert (e.file, e.line, e.col) == ("op.toml", 10, 8 + 20)
    e = err(parse_backward, "composite\n  vjp x: reference(f)", line=10, col=8)
    assert (e.line, e.col) == (11, 3)


SOUP = ["vjp", "x", "taps", ":", ",", "reference", "route", "(", ")", "on", "device", '"b.wgsl"', '"', "to", "=",
        "dy", "composite", "nondifferentiable", "\n", "# c", "@"]


def parses_or_points(text: str) -> None:
    try:
        parse_backward(text)
    except StudioError as e:
        assert e.line is not None and e.col is not None and e.hint


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.lists(st.sampled_from(SOUP), max_size=30).map(" ".join))
def test_fuzz_only_positioned_studio_errors(text):
    parses_or_points(text)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(TEXT)), st.sampled_from(SOUP + [""]))
def test_fuzz_mutated_declaration(i, tok):
    parses_or_points(TEXT[:i] + tok + TEXT[i + 1:])
