"""The backward notation: the three kinds, VJP rule forms, composite steps, positions, signature checks."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.engine.contract.backward import (
    Composition,
    Step,
    VjpRule,
    check_against_signature,
    parse_backward,
)
from studio.engine.contract.expr import BinOp, Num, Sym
from studio.engine.contract.signature import parse_signature
from studio.engine.errors import StudioError

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
    c = parse_backward("\n# autodiff through the parts\ncomposite\nu = core/shape/unfold@1(x; w = w)\n")
    assert (c.kind, c.rules, c.differentiable) == ("composite", (), True)
    assert parse_backward("vjp x: reference(f)").composition is None


STEPS = """\
composite
# the op is its steps
u = core/shape/unfold@1(x; w = w)

  y = core/reduce/median_rows@1(u)   # one row per window
"""


def test_composite_steps():
    bw = parse_backward(STEPS, file="op.toml", line=20, col=8)
    u, y = bw.composition.steps
    assert (bw.kind, type(bw.kind), bw.rules, bw.text) == ("composite", str, (), STEPS)
    assert (u.outputs, u.op, u.args, u.line, u.col) == (("u",), "core/shape/unfold@1", ((None, "x"),), 22, 1)
    assert [(k, str(e)) for k, e in u.params] == [("w", "w")]
    assert (y.outputs, y.op, y.args, y.params, y.line, y.col) == (("y",), "core/reduce/median_rows@1",
                                                                  ((None, "u"),), (), 24, 3)
    assert (bw.composition.file, bw.composition.chain()) == \
        ("op.toml", "core/shape/unfold@1 -> core/reduce/median_rows@1")
    assert str(bw) == "composite\nu = core/shape/unfold@1(x; w = w)\ny = core/reduce/median_rows@1(u)"
    assert parse_backward(str(bw)).composition.steps[0].params == u.params


def test_composite_step_forms():
    text = "composite\na, b = ns-1/au.th-r/op_2@12(x, taps = t; k = n - w + 1, q = 2)"
    (st,) = parse_backward(text).composition.steps
    assert isinstance(st, Step)
    assert (st.outputs, st.op, st.args) == (("a", "b"), "ns-1/au.th-r/op_2@12", ((None, "x"), ("taps", "t")))
    assert [k for k, _ in st.params] == ["k", "q"] and st.params[1][1] == Num(2)
    assert isinstance(st.params[0][1], BinOp) and st.params[0][1].symbols() == {"n", "w"}
    (st,) = parse_backward("composite\ny = core/signal/spiky_signal@1(; n = n, seed = s)").composition.steps
    assert (st.args, [k for k, _ in st.params]) == ((), ["n", "seed"])
    (st,) = parse_backward("composite\ny = a/b/c@1()").composition.steps
    assert (st.args, st.params) == ((), ())
    assert parse_backward("composite\ny = a/b/c@1(x;)").composition == Composition(
        (Step(("y",), "a/b/c@1", ((None, "x"),), (), 2, 1),), None)
    assert parse_backward("composite\ny = a/b/c@1(x; w = w)").composition.steps[0].params == (("w", Sym("w")),)


@pytest.mark.parametrize("text, line, col, words", [
    # composite needs steps, at the keyword, with an example step
    ("composite", 20, 8, ["'composite' without steps", "u = core/shape/unfold@1(x; w = w)"]),
    ("\n# c\ncomposite   # autodiff\n\n", 22, 1, ["'composite' without steps", "u = core/shape/unfold@1("]),
    # steps only after composite
    ("u = core/shape/unfold@1(x; w = w)", 20, 8, ["a composition step with no 'composite' line", "composite"]),
    ("vjp x: reference(f)\nu = core/shape/unfold@1(x; w = w)", 21, 1, ["a composition step after 'vjp'"]),
    ("nondifferentiable\n  # c\n  u = core/shape/unfold@1(x; w = w)", 22, 3,
     ["a composition step after 'nondifferentiable'"]),
    ("composite\nu = a/b/c@1(x)\nvjp x: reference(f)\nv = a/b/c@1(u)", 23, 1, ["a composition step after 'vjp'"]),
    ("composite\nu = a/b/c@1(x)\nvjp x: reference(f)", 22, 1, ["'vjp' after 'composite'"]),
    ("composite\nu = a/b/c@1(x)\nnondifferentiable", 22, 1, ["'nondifferentiable' after 'composite'"]),
    ("composite\nu = a/b/c@1(x)\ncomposite\nv = a/b/c@1(u)", 22, 1, ["'composite' after 'composite'"]),
    ("vjp x: reference(f)\ncomposite\nu = a/b/c@1(x)", 21, 1, ["'composite' after 'vjp'"]),
    # malformed steps: at the token, in op.toml coordinates
    ("composite\nu = core/shape/unfold@1(x; w = )", 21, 32, ["')'", "a name", "composite, then one step"]),
    ("composite\nu = core/shape/unfold(x)", 21, 5, ["'core'", "an op id"]),
    ("composite\nu = core/shape/unfold@0(x)", 21, 5, ["'core'", "an op id"]),
    ("composite\nu core/shape/unfold@1(x)", 21, 3, ["'core/shape/unfold@1'", "'='"]),
    ("composite\nu = a/b/c@1(x; w = w", 21, 21, ["end of text", "')'"]),
    ("composite\nu = a/b/c@1(x; w = w) extra", 21, 23, ["'extra'", "a new line"]),
    ("composite u = a/b/c@1(x)", 20, 18, ["'u'", "a new line"]),
    ("composite\non = a/b/c@1(x)", 21, 1, ["'on'", "reserved word"]),
    ("composite\nu = a/b/c@1(x; w = f(2))", 21, 20, ["unknown function 'f'"]),
    ("composite\nu = a/b/c@1(x; w = 1e999)", 21, 20, ["too large"]),
    ("composite\nu = a/b/c@1(x = )", 21, 17, ["')'", "a name"]),
])
def test_composite_errors_point_into_op_toml(text, line, col, words):
    e = err(parse_backward, text, file="op.toml", line=20, col=8)
    assert (e.file, e.line, e.col) == ("op.toml", line, col), e.format()
    assert all(w in e.message + e.hint for w in words), e.format()


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
    ("composite\nvjp x: reference(f)", 2, 1, ["'vjp' after 'composite'"]),
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
        "dy", "composite", "nondifferentiable", "\n", "# c", "@", "core/shape/unfold@1", "a/b/c@1", ";", "u", "w",
        "w + 1", "/", "1e999"]


def parses_or_points(text: str) -> None:
    try:
        parse_backward(text)
    except StudioError as e:
        assert e.line is not None and e.col is not None and e.hint


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.lists(st.sampled_from(SOUP), max_size=30).map(" ".join))
def test_fuzz_only_positioned_studio_errors(text):
    parses_or_points(text)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.sampled_from([TEXT, STEPS]).flatmap(lambda t: st.tuples(st.just(t), st.integers(0, len(t)))),
       st.sampled_from(SOUP + [""]))
def test_fuzz_mutated_declaration(at, tok):
    text, i = at
    parses_or_points(text[:i] + tok + text[i + 1:])
