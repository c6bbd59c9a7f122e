"""Index-valued inputs: value domains that name dims or params, CSR row pointers,
valid values from the corpus, and the check of a run's values before anything runs."""
import numpy as np
import pytest

from studio.engine.contract.domains import Domain, check_values
from studio.engine.contract.signature import parse_signature
from studio.engine.errors import StudioError
from studio.engine.proof.corpus import generate

SPMV = ("spmv(row_ptr: u32[rows + 1] csr(nnz), col: u32[nnz] in [0, cols), val: f32[nnz] finite, "
        "x: f32[cols] finite) -> y: f32[rows]")
GATHER = "gather(x: f32[m] finite, idx: i32[n] in [0, m - 1]) -> y: f32[n]"


def err(text, **kw) -> StudioError:
    with pytest.raises(StudioError) as e:
        parse_signature(text, **kw)
    return e.value


# ------------------------------------------------------------------ the language
def test_bounds_that_name_dims_and_params():
    s = parse_signature(SPMV)
    col, rp = s.input("col").domain, s.input("row_ptr").domain
    assert (col.kind, str(col), col.open_hi) == ("index", "in [0, cols)", True)
    assert (rp.kind, str(rp)) == ("csr", "csr(nnz)")
    assert str(s) == SPMV and parse_signature(str(s)) == s          # the canonical text reads back
    g = parse_signature(GATHER)
    assert str(g.input("idx").domain) == "in [0, m - 1]" and g.input("idx").domain.bounds({"m": 5}) == (0, 4)
    assert col.bounds({"cols": 5}) == (0, 4)                         # [0, cols) is [0, cols - 1]
    p = parse_signature("pick(x: f32[n], i: u32[k] in [0, s); s: u32 in [1, n + 1)) -> y: f32[k]")
    assert str(p.param("s")) == "s: u32 in [1, n + 1 - 1]"           # a half-open param range too
    assert p.input("i").domain.bounds({"s": 3, "n": 9, "k": 2}) == (0, 2)
    k = parse_signature("f(x: f32[n]; k: u32 in [0, n)) -> y: f32[n]")
    assert k.resolve({"x": (4,)}, {"k": 3})["k"] == 3
    with pytest.raises(StudioError, match="k = 4 violates"):
        k.resolve({"x": (4,)}, {"k": 4})                              # n itself is excluded
    assert str(parse_signature("f(x: f32[n]; k: u32 in [0, 8)) -> y: f32[n]").param("k")) == "k: u32 in [0, 7]"


def test_constant_half_open_range_on_integers():
    d = parse_signature("f(k: i32[n] in [-2, 3)) -> y: f32[n]").input("k").domain
    assert d == Domain("in", -2, 2)


def test_a_dim_written_s_plus_c_binds_s():
    s = parse_signature(SPMV)
    env = s.resolve({"row_ptr": (5,), "col": (7,), "val": (7,), "x": (3,)}, {})
    assert env == {"rows": 4, "nnz": 7, "cols": 3} and s.output_shapes(env) == {"y": (4,)}
    with pytest.raises(StudioError, match="rows would be -1"):
        s.resolve({"row_ptr": (0,), "col": (0,), "val": (0,), "x": (3,)}, {})
    assert "rows" in s.symbols


@pytest.mark.parametrize("text, col, words", [
    ("f(x: f32[m], i: u32[n] in [0, q)) -> y: f32[n]", 31, "unknown symbol 'q'"),
    ("f(x: f32[m], i: u32[n] csr(q)) -> y: f32[n]", 28, "unknown symbol 'q'"),
    ("f(x: f32[m], i: f32[n] in [0, m)) -> y: f32[n]", 31, "must be a constant, not 'm'"),
    ("f(x: f32[m], i: f32[n] in [0, 1)) -> y: f32[n]", 24, "half-open range needs an integer input"),
    ("f(x: f32[m], i: f32[n] csr(m)) -> y: f32[n]", 24, "1-D integer row pointer, but i is f32"),
    ("f(x: f32[m], i: u32[n, m] csr(m)) -> y: f32[n]", 27, "but i has 2 dims"),
    ("f(x: f32[m], i: u32[n] in [0, 2.5)) -> y: f32[n]", 31, "excluded bound 2.5 is not an integer"),
    ("f(x: f32[m], i: u32[n] in [0, 0)) -> y: f32[n]", 24, "empty range [0, -1]"),
    ("f(x: f32[m]; s: f32 in [0, 1)) -> y: f32[m]", 21, "half-open range needs an integer param"),
    ("f(x: f32[m], csr: u32[m]) -> y: f32[m]", 14, "reserved word"),
])
def test_nonsense_is_refused_at_line_col(text, col, words):
    e = err(text, file="op.toml", line=7, col=14)
    assert (e.file, e.line, e.col) == ("op.toml", 7, 13 + col) and e.hint
    assert words in e.message + e.hint, e.format()


# ------------------------------------------------------------------ the corpus
def _structure(case):
    rp, col, cols = case.inputs["row_ptr"].astype(np.int64), case.inputs["col"], case.dims["cols"]
    assert rp[0] == 0 and rp[-1] == case.dims["nnz"] and np.all(np.diff(rp) >= 0), case.describe()
    assert col.size == 0 or (col.min() >= 0 and col.max() < cols), case.describe()
    return np.diff(rp)


def test_the_corpus_generates_valid_csr_and_its_edge_cases():
    sig = parse_signature(SPMV)
    corpus = generate(sig)
    lengths = [(_structure(c), c) for c in corpus.cases]
    for c in corpus.cases:                                     # what a run would accept
        check_values(sig, c.inputs, c.params)
    assert any((n == 0).any() and n.size > 1 and n.sum() > 0 for n, _ in lengths)           # empty rows
    assert any(n.size >= 3 and (n == n.sum()).any() and n.sum() >= 2 for n, _ in lengths)    # every entry in one row
    assert any(c.dims["nnz"] == 0 for c in corpus.cases)                                      # no entries at all
    assert any(c.dims["rows"] == 1 for c in corpus.cases)                                     # one row
    assert any(c.dims["cols"] == 1 and c.dims["nnz"] > 0 for c in corpus.cases)              # m = 1: every index 0
    assert any(c.inputs["col"].size and (c.inputs["col"] == c.dims["cols"] - 1).all()
               and c.dims["cols"] > 1 for c in corpus.cases)                                   # the last index, m - 1
    assert any(n.size > 50 and n.mean() > 10 for n, _ in lengths)                             # long rows, many of them
    assert generate(sig).hash == corpus.hash                                                  # deterministic


def test_the_corpus_generates_valid_gather_indices_with_m_equal_1():
    sig = parse_signature(GATHER)
    corpus = generate(sig)
    for c in corpus.cases:
        idx, m = c.inputs["idx"], c.inputs["x"].size
        assert idx.dtype == np.int32 and idx.min() >= 0 and idx.max() <= m - 1, c.describe()
    assert min(c.dims["m"] for c in corpus.cases) == 1                  # m = 0 admits no index: never generated
    assert any(c.inputs["idx"].max() == c.dims["m"] - 1 > 0 for c in corpus.cases)


def test_a_constant_integer_range_is_respected():
    corpus = generate(parse_signature("f(x: f32[n], k: i32[n] in [-3, 3)) -> y: f32[n]"))
    ks = np.concatenate([c.inputs["k"] for c in corpus.cases])
    assert ks.min() == -3 and ks.max() == 2


def test_without_index_inputs_the_corpus_is_unchanged():
    """An op without index domains gets the same corpus as before (its receipts stay valid)."""
    sig = parse_signature("f(x: f32[n] finite, k: u32[n]) -> y: f32[n]")
    c = generate(sig)
    assert not any(x.shape_kind.startswith("index") for x in c.cases)
    assert max(int(x.inputs["k"].max()) for x in c.cases if x.inputs["k"].size) > 100    # not clipped to a range


# ------------------------------------------------------------------ the check of a run's values
def _spmv_inputs(**over):
    a = {"row_ptr": np.array([0, 2, 2, 3], np.uint32), "col": np.array([0, 2, 1], np.uint32),
         "val": np.ones(3, np.float32), "x": np.ones(3, np.float32)}
    return {**a, **{k: np.asarray(v, a[k].dtype) for k, v in over.items()}}


def test_valid_values_pass():
    check_values(parse_signature(SPMV), _spmv_inputs(), {})
    check_values(parse_signature(SPMV), _spmv_inputs(row_ptr=[0, 0, 0, 0], col=[], val=[]), {})   # no entries


@pytest.mark.parametrize("over, words", [
    ({"col": [0, 3, 1]}, "col[1] = 3 is outside in [0, cols) = [0, 2] (cols = 3)"),
    ({"row_ptr": [1, 2, 2, 3]}, "row_ptr[0] = 1, but a CSR row pointer starts at 0"),
    ({"row_ptr": [0, 2, 1, 3]}, "row_ptr[2] = 1 is below row_ptr[1] = 2"),
    ({"row_ptr": [0, 2, 2, 2]}, "row_ptr[3] = 2, but a csr(nnz) row pointer ends at nnz = 3"),
])
def test_a_bad_index_is_named_with_its_value(over, words):
    with pytest.raises(StudioError) as e:
        check_values(parse_signature(SPMV), _spmv_inputs(**over), {})
    assert words in e.value.message and e.value.field == next(iter(over)) and e.value.hint


def test_a_negative_index_and_an_empty_range():
    g = parse_signature(GATHER)
    with pytest.raises(StudioError, match=r"idx\[2\] = -1 is outside in \[0, m - 1\] = \[0, 3\] \(m = 4\)"):
        check_values(g, {"x": np.zeros(4, np.float32), "idx": np.array([0, 1, -1], np.int32)}, {})
    with pytest.raises(StudioError, match=r"idx\[0\] = 0 is outside .* = empty \(m = 0\)"):
        check_values(g, {"x": np.zeros(0, np.float32), "idx": np.array([0], np.int32)}, {})
    check_values(g, {"x": np.zeros(0, np.float32), "idx": np.array([], np.int32)}, {})      # nothing to index


def test_a_signature_without_index_domains_resolves_nothing():
    sig = parse_signature("f(x: f32[n]; w: u32) -> y: f32[n]")
    check_values(sig, {"x": np.zeros(3)}, {})              # no resolve: a missing w is the run's own refusal
