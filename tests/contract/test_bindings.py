"""The buffer binding descriptor: parsing, positions, uniform layout and packing, signature checks."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.engine.contract.bindings import check_against_signature, parse_bindings
from studio.engine.contract.signature import parse_signature
from studio.engine.errors import StudioError

WM = parse_signature("windowed_median(x: f32[n] finite; w: u32 odd in [1, 31], w <= n) -> y: f32[n - w + 1]")
TEXT = """\
@group(0) @binding(0) x : storage read       f32[n]
@group(0) @binding(1) y : storage read_write f32[n - w + 1]
@group(0) @binding(2) p : uniform { n: u32 = n, w: u32 = w }
"""


def err(fn, *args, **kw) -> StudioError:
    with pytest.raises(StudioError) as e:
        fn(*args, **kw)
    return e.value


def test_windowed_median_descriptor():
    d = parse_bindings(TEXT)
    x, y, p = d
    assert (x.group, x.binding, x.name, x.kind, x.access, x.dtype, [str(e) for e in x.dims]) == \
        (0, 0, "x", "storage", "read", "f32", ["n"])
    assert (y.access, str(y.dims[0]), y.line, y.col) == ("read_write", "n - w + 1", 2, 1)
    assert (p.kind, p.access, p.dtype, [(f.name, f.dtype, str(f.value)) for f in p.fields]) == \
        ("uniform", None, None, [("n", "u32", "n"), ("w", "u32", "w")])
    assert d.by_name("p") is p and len(d) == 3 and d.text == TEXT
    assert check_against_signature(d, WM) == []


def test_comments_blank_lines_and_multiline_uniform():
    d = parse_bindings("""
# the windowed median
@group(0) @binding(0) x : storage read f32[n]   # the signal

@group(1) @binding(0) p : uniform {
    n: u32 = n,   # length
    half: i32 = (w - 1) / 2,
}
""")
    assert [b.name for b in d] == ["x", "p"] and (d.by_name("p").line, d.by_name("p").fields[1].line) == (5, 7)
    assert parse_bindings("").bindings == () and parse_bindings("# nothing\n\n").bindings == ()


def test_uniform_layout_and_packing():
    p = parse_bindings("@group(0) @binding(2) p : uniform { n: u32 = n, off: i32 = 1 - w, s: f32 = w / 2 }").bindings[0]
    assert p.struct_size == 12
    assert p.uniform_bytes({"n": 10, "w": 7}) == struct.pack("<Iif", 10, -6, 3.5)
    assert parse_bindings(TEXT).by_name("p").uniform_bytes({"n": 1_000_000, "w": 7}) == bytes.fromhex("40420f0007000000")
    e = err(p.uniform_bytes, {"n": -1, "w": 7})
    assert (e.field, e.message) == ("p.n", "uniform field p.n = -1 does not fit u32 (an integer in [0, 4294967295])")
    assert err(p.uniform_bytes, {"n": 1, "w": 2**40}).field == "p.off"
    assert err(p.uniform_bytes, {"n": 1}).message == "unknown symbol 'w'"


def test_storage_element_count():
    d = parse_bindings(TEXT)
    assert d.by_name("y").element_count({"n": 10, "w": 7}) == 4
    assert "is not a size" in err(d.by_name("y").element_count, {"n": 1, "w": 7}).message
    assert "not a uniform" in err(lambda: d.by_name("x").struct_size).message
    assert err(d.by_name, "q").field == "q"


@pytest.mark.parametrize("text, line, col, words", [
    ("@group(0) @binding(0) x : storage write f32[n]", 1, 35, ["unknown access 'write'", "read_write"]),
    ("@group(0) @binding(0) x : storage read f64[n]", 1, 40, ["unknown dtype 'f64'", "f32, i32, u32, bf16"]),
    ("@group(0) @binding(0) x : storage read f32[n", 1, 45, ["end of text", "']'"]),
    ("@group(0) @binding(0) x : uniform { a: bf16 = 1 }", 1, 40, ["'bf16'", "u32, i32, f32"]),
    ("@group(0) @binding(0) x : uniform { a: u32 = 1, a: u32 = 2 }", 1, 49, ["'a' is repeated"]),
    ("@group(0) @binding(0) x : uniform { }", 1, 37, ["'}'", "a name"]),
    ("@group(0) @binding(0) x : texture f32[n]", 1, 27, ["'texture'", "'storage'", "'uniform'"]),
    ("x : storage read f32[n]", 1, 1, ["'x'", "'@'"]),
    ("@group(0) @binding(0) x : storage read f32[n] @group(0) @binding(1) y : storage read f32[n]", 1, 47,
     ["'@'", "a new line"]),
    ("@group(0) @binding(0) storage : storage read f32[n]", 1, 23, ["reserved word"]),
])
def test_errors_point_at_the_token(text, line, col, words):
    e = err(parse_bindings, text)
    assert (e.line, e.col) == (line, col)
    assert all(w in e.message + e.hint for w in words), e.format()


def test_duplicates_are_reported_at_the_second_occurrence_on_its_line():
    text = "# bindings\n@group(0) @binding(0) x : storage read f32[n]\n@group(0) @binding(0) y : storage read f32[n]\n"
    e = err(parse_bindings, text)
    assert (e.line, e.col) == (3, 1) and "already taken by x" in e.message
    e = err(parse_bindings, text.replace("binding(0) y", "binding(1) x"), file="op.toml", line=10, col=8)
    assert (e.file, e.line, e.col, e.message) == ("op.toml", 12, 23, "'x' is already bound")
    e = err(parse_bindings, "@group(0) @binding(0) x : storage rw f32[n]", line=10, col=8)
    assert (e.line, e.col) == (10, 8 + 34)


def test_check_against_signature_finds_each_disagreement():
    d = parse_bindings("""\
@group(0) @binding(0) x : storage read_write f32[n]
@group(0) @binding(1) y : storage read_write u32[n - w]
@group(0) @binding(2) tmp : storage read f32[n]
@group(0) @binding(3) scratch : storage read_write f32[k]
@group(0) @binding(4) p : uniform { n: u32 = n, w: u32 = z }
""", file="op.toml", line=20)
    errors = check_against_signature(d, WM)
    assert [(e.line, e.col, e.field) for e in errors] == [
        (20, 1, "x"), (21, 1, "y"), (22, 1, "tmp"), (23, 56, "scratch"), (24, 58, "p")]
    assert errors[0].message == "x is bound as 'storage read_write f32[n]' but the signature's input needs " \
                                "'storage read f32[n]'"
    assert "'storage read_write f32[n - w + 1]'" in errors[1].message
    assert "'z' is not a symbol of the signature" == errors[4].message and errors[0].file == "op.toml"


def test_check_missing_bindings_and_scratch():
    errors = check_against_signature(parse_bindings("@group(0) @binding(0) s : storage read_write u32[n]"), WM)
    assert [e.message for e in errors] == ["no binding for the input 'x'", "no binding for the output 'y'"]
    assert "x : storage read f32[n]" in errors[0].hint and errors[0].line == 1
    dyn = parse_signature("unique(x: i32[n]) -> y: i32[?m]")  # a data-dependent output binds its capacity
    ok = "@group(0) @binding(0) x : storage read i32[n]\n@group(0) @binding(1) y : storage read_write i32[n]"
    assert check_against_signature(parse_bindings(ok), dyn) == []


SOUP = ["@", "group", "binding", "(", ")", "0", "1", "x", "y", ":", "storage", "uniform", "read", "read_write",
        "write", "f32", "u32", "[", "]", "n", "-", "w", "+", "{", "}", ",", "=", "\n", "# c", "@@"]


def parses_or_points(text: str) -> None:
    try:
        parse_bindings(text)
    except StudioError as e:
        assert e.line is not None and e.col is not None and e.hint


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.lists(st.sampled_from(SOUP), max_size=30).map(" ".join))
def test_fuzz_only_positioned_studio_errors(text):
    parses_or_points(text)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(TEXT)), st.sampled_from(SOUP + [""]))
def test_fuzz_mutated_descriptor(i, tok):
    parses_or_points(TEXT[:i] + tok + TEXT[i + 1:])
