"""The shape-signature language and the shared expressions: parsing, positions, resolve, budgets."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.engine.contract.expr import BinOp, Num, Sym, parse_expr
from studio.engine.contract.signature import DataDim, Domain, parse_signature
from studio.engine.errors import StudioError

WM = "windowed_median(x: f32[n] finite; w: u32 odd in [1, 31], w <= n) -> y: f32[n - w + 1]"


def err(fn, *args, **kw) -> StudioError:
    with pytest.raises(StudioError) as e:
        fn(*args, **kw)
    return e.value


# ---- expressions ----

@pytest.mark.parametrize("text, canonical, value", [
    ("n - w + 1", "n - w + 1", 4),
    ("a - (b - c)", "a - (b - c)", 2),
    ("(a - b) - c", "a - b - c", -4),
    ("-(a + b) * 2", "-(a + b) * 2", -10),
    ("n / 2", "n / 2", 5),
    ("w / 2", "w / 2", 3.5),
    ("-w // 2 % 3", "-w // 2 % 3", 2),
    ("cdiv(n, 3) + min(a, b) * max(1, 2.5)", "cdiv(n, 3) + min(a, b) * max(1, 2.5)", 9.0),
    ("a - -b", "a - -b", 5),
])
def test_expression_eval_and_canonical_text(text, canonical, value):
    env = {"n": 10, "w": 7, "a": 2, "b": 3, "c": 3}
    e = parse_expr(text)
    assert (str(e), e.eval(env)) == (canonical, value)
    assert parse_expr(str(e)) == e


def test_expression_nodes_and_symbols():
    e = parse_expr("n - w + 1")
    assert e == BinOp("+", BinOp("-", Sym("n"), Sym("w")), Num(1))
    assert e.symbols() == {"n", "w"}


def test_expression_errors():
    assert err(parse_expr("k + 1").eval, {}).message == "unknown symbol 'k'"
    assert "division by zero" in err(parse_expr("n // (w - w)").eval, {"n": 1, "w": 2}).message
    e = err(parse_expr, "max(n)", line=4, col=10)
    assert (e.line, e.col, e.message) == (4, 10, "max() takes 2 arguments, not 1")
    e = err(parse_expr, "sqrt(n)")
    assert (e.line, e.col) == (1, 1) and "min, max, cdiv" in e.hint


# ---- parsing signatures ----

def test_windowed_median():
    s = parse_signature(WM)
    (x,), (w,), (r,), (y,) = s.inputs, s.params, s.relations, s.outputs
    assert (s.name, x.name, x.dtype, x.dims, x.domain) == ("windowed_median", "x", "f32", (Sym("n"),), Domain("finite"))
    assert (x.line, x.col) == (1, 17)
    assert (w.name, w.dtype, w.parity, str(w.lo), str(w.hi)) == ("w", "u32", "odd", "1", "31")
    assert (str(r), r.line, r.col) == ("w <= n", 1, 58)
    assert (y.name, [str(d) for d in y.dims], s.shape_class) == ("y", ["n - w + 1"], "static")
    assert s.text == WM and str(s) == WM and s.symbols == {"n", "w"}


@pytest.mark.parametrize("text", [
    "affine(x: f32[n]; scale: f32, offset: f32) -> y: f32[n]",
    "add(a: f32[n], b: f32[n]) -> y: f32[n]",
    "sum(x: f32[n]) -> y: f32[1]",
    "fir(x: f32[n], taps: f32[k]; k <= n) -> y: f32[n - k + 1]",
    "spiky_signal(; n: u32 in [1, 16777216], seed: u32) -> y: f32[n]",
    "matmul(a: f32[m, k], b: f32[k, p]) -> c: f32[m, p]",
    "scale(x: bf16[] in [-1, 1.5]) -> y: bf16[]",
    "wm(x: f32[n] nonneg; w: u32 odd in [1, 31], w <= n) -> (y: f32[n - w + 1], idx: u32[n - w + 1])",
])
def test_valid_signatures_round_trip(text):
    s = parse_signature(text)
    assert str(s) == text and s.shape_class == "static"


def test_shapes_params_domains():
    s = parse_signature("spiky_signal(; n: u32 in [1, 16777216], seed: u32) -> y: f32[n]")
    assert s.inputs == () and [p.name for p in s.params] == ["n", "seed"]
    s = parse_signature("matmul(a: f32[m, k], b: f32[k, p]) -> c: f32[m, p]")
    assert s.output("c").dims == (Sym("m"), Sym("p"))
    d = parse_signature("scale(x: bf16[] in [-1, 1.5]) -> y: bf16[]").input("x").domain
    assert (d.kind, d.lo, d.hi, d.admits_nan, d.admits_inf) == ("in", -1, 1.5, False, False)
    assert parse_signature("f(x: f32[n]) -> y: f32[n]").input("x").domain.admits_nan


def test_dynamic_output():
    s = parse_signature("unique(x: i32[n]) -> y: i32[?m]")
    assert s.output("y").dims == (DataDim("m"),) and s.shape_class == "dynamic"
    env = s.resolve({"x": (5,)}, {})
    assert "data-dependent" in err(s.output_shapes, env).message
    assert "not static" in err(s.memory_bytes, env).message


def test_lookups():
    s = parse_signature(WM)
    assert s.param("w").parity == "odd" and s.tensor("y") is s.output("y") and s.input("x").dtype == "f32"
    e = err(s.param, "q")
    assert e.field == "q" and "no param named 'q'" in e.message


@pytest.mark.parametrize("text, line, col, words", [
    ("windowed_median(x: f64[n]; w: u32) -> y: f32[n]", 1, 20, ["'f64'", "f32, i32, u32, bf16"]),
    ("f(x: f32[n; w: u32) -> y: f32[n]", 1, 11, ["';'", "']'"]),
    ("f(x: f32[n]) -> y: f32[n", 1, 25, ["end of text", "']'"]),
    ("f(x: f32[n]) -> y: f32[n - k + 1]", 1, 28, ["unknown symbol 'k'"]),
    ("f(x: f32[n]; w: u32, w <= k) -> y: f32[n]", 1, 27, ["unknown symbol 'k'"]),
    ("f(x: f32[2 * n]) -> y: f32[n]", 1, 14, ["unknown symbol 'n'"]),    # n + 1 binds n (tests/contract/test_index_domains.py)
    ("f(x: f32[n]; w: u32 in [1, m]) -> y: f32[n]", 1, 28, ["unknown symbol 'm'"]),
    ("f(x: f32[n]; w: u32 odd even) -> y: f32[n]", 1, 25, ["both odd and even"]),
    ("f(x: f32[n]; w: f32 odd) -> y: f32[n]", 1, 21, ["'odd' needs an integer param"]),
    ("f(x: f32[n], x: f32[n]) -> y: f32[n]", 1, 14, ["'x' is already declared as an input"]),
    ("f(x: f32[n]) -> (y: f32[n], x: f32[n])", 1, 29, ["'x' is already declared as an input"]),
    ("f(x: f32[n]; n: u32) -> y: f32[n]", 1, 14, ["'n' is already declared as a dim symbol"]),
    ("f(x: f32[?m]) -> y: f32[n]", 1, 11, ["data-dependent"]),
    ("f(x: f32[n] positive) -> y: f32[n]", 1, 13, ["'positive'", "'finite'", "'nonneg'"]),
    ("f(x: f32[n] in [a, 1]) -> y: f32[n]", 1, 17, ["must be a constant"]),
    ("f(in: f32[n]) -> y: f32[n]", 1, 3, ["'in'"]),
    ("f(x: f32[n]) y: f32[n]", 1, 14, ["'->'"]),
    ("f(x: f32[n]) -> y: f32[n] @", 1, 27, ["character '@'"]),
])
def test_errors_point_at_the_token(text, line, col, words):
    e = err(parse_signature, text)
    assert (e.line, e.col) == (line, col) and e.hint
    assert all(w in e.message + e.hint for w in words), e.format()


def test_reserved_word_hint():
    assert "reserved word" in err(parse_signature, "f(in: f32[n]) -> y: f32[n]").hint


def test_positions_are_shifted_into_the_enclosing_file():
    e = err(parse_signature, "f(x: f32[n]) -> y: f32[k]", file="op.toml", line=5, col=14)
    assert (e.file, e.line, e.col) == ("op.toml", 5, 14 + 23)
    e = err(parse_signature, "f(x: f32[n])\n  -> y: f32[k]", file="op.toml", line=10, col=14)
    assert (e.line, e.col) == (11, 13)
    assert parse_signature(WM, line=3, col=13).input("x").col == 13 + 16


# ---- resolve, shapes, budgets ----

def test_resolve_binds_dims_and_params():
    s = parse_signature(WM)
    env = s.resolve({"x": (1_000_000,)}, {"w": 7})
    assert env == {"n": 1_000_000, "w": 7}
    assert s.output_shapes(env) == {"y": (999_994,)}
    assert s.memory_bytes(env) == 4 * (1_000_000 + 999_994)


@pytest.mark.parametrize("shape, params, field, message", [
    ((100,), {"w": 8}, "w", "w = 8 violates 'odd'"),
    ((7,), {"w": 9}, "w", "w = 9 violates 'w <= n' (n = 7)"),
    ((100,), {"w": 33}, "w", "w = 33 violates 'in [1, 31]'"),
    ((100,), {"w": -1}, "w", "w = -1 is not a u32 (an integer in [0, 4294967295])"),
    ((100,), {"w": 7.0}, "w", "w = 7.0 is not a u32 (an integer in [0, 4294967295])"),
    ((100,), {}, "w", "missing param 'w' (w: u32 odd in [1, 31])"),
    ((100,), {"w": 7, "k": 1}, "k", "windowed_median has no param named 'k'"),
    ((7, 3), {"w": 3}, "x", "x has shape (7, 3) but the signature declares x: f32[n] finite (rank 1)"),
])
def test_resolve_rejects(shape, params, field, message):
    e = err(parse_signature(WM).resolve, {"x": shape}, params)
    assert (e.field, e.message) == (field, message)


def test_resolve_dims_across_inputs():
    s = parse_signature("matmul(a: f32[m, k], b: f32[k, p]) -> c: f32[m, p]")
    env = s.resolve({"a": (2, 3), "b": (3, 4)}, {})
    assert s.output_shapes(env) == {"c": (2, 4)} and s.memory_bytes(env) == 4 * (6 + 12 + 8)
    e = err(s.resolve, {"a": (2, 3), "b": (4, 4)}, {})
    assert (e.field, e.message) == ("b", "b has k = 4 but a has k = 3")
    e = err(parse_signature("fir(x: f32[n], taps: f32[k]; k <= n) -> y: f32[n - k + 1]").resolve,
            {"x": (5,), "taps": (9,)}, {})
    assert (e.field, e.message) == ("taps", "k = 9 violates 'k <= n' (n = 5)")
    s = parse_signature("pair(x: f32[n], z: f32[2 * n]) -> y: f32[n]")
    assert s.resolve({"x": (3,), "z": (6,)}, {}) == {"n": 3}
    assert err(s.resolve, {"x": (3,), "z": (5,)}, {}).message == "z dim 0 is 5 but the signature says '2 * n' = 6 (n = 3)"
    assert err(s.resolve, {"x": (3,)}, {}).message == "missing input 'z'"


def test_param_dtypes():
    s = parse_signature("affine(x: f32[n]; scale: f32, offset: i32 in [-5, 5]) -> y: f32[n]")
    assert s.resolve({"x": (2,)}, {"scale": float("nan"), "offset": -5})["offset"] == -5
    assert err(s.resolve, {"x": (2,)}, {"scale": 1, "offset": 2**31}).field == "offset"
    assert err(s.resolve, {"x": (2,)}, {"scale": "1", "offset": 0}).message == "scale = '1' is not a number"


def test_output_shape_must_be_a_size():
    s = parse_signature("half(x: f32[n]) -> y: f32[n / 2]")
    assert s.output_shapes({"n": 4}) == {"y": (2,)}
    e = err(s.output_shapes, {"n": 5})
    assert e.field == "y" and "'n / 2' = 2.5 is not a size" in e.message
    assert "is not a size" in err(parse_signature("g(x: f32[n]) -> y: f32[n - 3]").output_shapes, {"n": 1}).message


# ---- never anything but a positioned StudioError ----

SOUP = ["f", "x", "n", "w", "(", ")", "[", "]", ":", ";", ",", "->", "?", "f32", "u32", "f64", "odd", "even",
        "in", "finite", "any", "nonneg", "<=", "==", "+", "-", "*", "/", "//", "%", "1", "2.5", "min", "\n", "@"]


def parses_or_points(text: str) -> None:
    try:
        parse_signature(text)
    except StudioError as e:
        assert e.line is not None and e.col is not None and e.hint


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.lists(st.sampled_from(SOUP), max_size=30).map(" ".join))
def test_fuzz_only_positioned_studio_errors(text):
    parses_or_points(text)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(WM)), st.sampled_from(SOUP + [""]))
def test_fuzz_mutated_signature(i, tok):
    parses_or_points(WM[:i] + tok + WM[i + 1:])
