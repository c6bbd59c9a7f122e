"""Pointwise assignment programs (docs/assignment-programs.md): the grammar and
its line:col errors, the checker of the slot ranges (docs/requirements.md L6), and the numpy reference."""
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.learner import evaluate as evaluate_module
from studio.engine.learner.evaluate import evaluate
from studio.engine.learner.program import check_program, parse_program, slot_width

LEARNERS = Path(__file__).resolve().parents[2] / "resources" / "learners"
EXAMPLES = {  # name: (k, s, m) that fit each example's documented layout
    "least_squares_momentum": (5, 6, 5), "logistic_adam": (5, 6, 12), "online_mean": (5, 5, 0),
    "kmeans_pull": (6, 2, 0), "perceptron": (5, 6, 0)}


def bound(text, role="contribution", k=3, s=4, m=0, origin="p.assign"):
    return check_program(parse_program(text, origin=origin), role=role, k=k, s=s, m=m)


def error(text, role="contribution", k=3, s=4, m=0) -> StudioError:
    with pytest.raises(StudioError) as info:
        bound(text, role, k, s, m)
    return info.value


def frame(role, k, s, m, rows=1, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, slot_width(role, k, s, m))).astype(np.float32)


# ------------------------------------------------------------------ parsing, names, types

@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_shipped_examples_parse_and_check_for_both_roles(name):
    k, s, m = EXAMPLES[name]
    for role in ("contribution", "update"):
        path = LEARNERS / name / f"{role}.assign"
        b = check_program(parse_program(path.read_text(), origin=str(path)), role=role, k=k, s=s, m=m)
        assert b.layout.width == slot_width(role, k, s, m)
        out = evaluate(b, frame(role, k, s, m, rows=3 if role == "contribution" else 1))
        assert out.dtype == np.float32


def test_the_hash_is_over_the_canonical_form():
    a = parse_program("let d = sum(j in 0..k: param[j]*sample[j])\nfor i in 0..k: contrib[i] := (d - sample[k]) * sample[i]")
    b = parse_program("# a comment\nlet d=sum(j in 0..k:(param[j])*sample[j]);  for i in 0 .. k : contrib[i]:=((d-sample[k])*sample[i])\n")
    c = parse_program("let d = sum(j in 0..k: param[j]*sample[j])\nfor i in 0..k: contrib[i] := (d + sample[k]) * sample[i]")
    assert a.hash == b.hash != c.hash
    assert parse_program(a.canonical).hash == a.hash           # the canonical text reads back to itself
    assert len(a.hash) == 64 and int(a.hash, 16) >= 0


def test_a_syntax_error_points_at_its_line_and_column():
    e = error("let x = 1.0\nfor i in 0..k contrib[i] := x")
    assert (e.file, e.line, e.col) == ("p.assign", 2, 15)
    assert "unexpected 'contrib'" in e.message and "':'" in e.message and e.hint


def test_a_number_glued_to_a_range_is_a_range():
    b = bound("for i in 0..k: contrib[i] := 0.5 * sample[i]")      # 0..k is never the number 0.
    assert evaluate(b, np.ones((1, 10), np.float32))[0, 7:].tolist() == [0.5] * 3


@pytest.mark.parametrize("text, line, col, words", [
    ("for i in 0..k: contrib[i] := foo", 1, 30, "unknown name 'foo'"),
    ("for i in 0..k: contrib[i] := param[i] > 0.0", 1, 30, "needs an f32 value; this is a bool"),
    ("for i in 0..k: contrib[i] := select(param[i], 1.0, 0.0)", 1, 37, "expected a bool"),
    ("for i in 0..k: contrib[i] := param[0.5]", 1, 36, "must be an integer expression"),
    ("for i in 0..k: contrib[i] := param[i * i]", 1, 36, "affine"),
    ("for i in 0..k: contrib[i] := param[i] // 2.0", 1, 30, "integer arithmetic"),
    ("for i in 0..k: contrib[i] := tanh(param[i])", 1, 30, "unknown function 'tanh'"),
    ("for i in 0..k: contrib[i] := exp(param[i], 1.0)", 1, 30, "takes 1 argument"),
    ("let sample = 1.0", 1, 5, "reserved name"),
    ("let x = 1.0\nlet x = 2.0", 2, 5, "already defined"),
    ("for i in 0..k: contrib[i] := param", 1, 30, "index it"),
    ("for i in 0..k: contrib[i] := rate[0]", 1, 30, "'rate' is one slot"),
    ("for i in 0..k, j in 0..i: contrib[i] := 0.0", 1, 24, "must not depend on a loop variable"),
    ("x := 1.0", 1, 1, "cannot assign to 'x'"),
    ("for i in 0..k: contrib[i] := 1e39", 1, 30, "too large for f32"),
])
def test_names_and_types_are_checked_at_their_position(text, line, col, words):
    e = error(text)
    assert (e.line, e.col) == (line, col), e
    assert words in e.message or words in (e.hint or ""), e
    assert e.hint


# ------------------------------------------------------------------ the slot ranges of §6

def test_an_out_of_range_write_is_rejected_naming_the_slot_and_the_range():
    e = error("for i in 0..k: contrib[i] := sample[i]\nfor i in 0..k: slot[i + k] := 1.0")   # k=3, s=4
    assert (e.line, e.col) == (2, 16)
    assert "writes slot 3" in e.message and "[7, 10)" in e.message and "contribution [7, 10)" in e.message


def test_an_out_of_range_read_is_rejected_naming_the_slot_and_the_range():
    e = error("for i in 0..k: contrib[i] := slot[k + s + i]")        # reads its own contribution slots
    assert "reads slot 7, outside [0, 7)" in e.message and (e.line, e.col) == (1, 30)
    e = error("param[0] := slot[2 * k + m + 1]", role="update", k=3, m=2)
    assert "reads slot 9, outside [0, 9)" in e.message and "rate [0, 9)" in e.message
    e = error("for i in 0..k: state[i] := mean[i]", role="update", k=3, m=2)   # state has 2 words, not 3
    assert "state[2] (slot 5) is outside state" in e.message and "slots [3, 5)" in e.message


def test_the_first_offending_access_in_iteration_order_is_reported():
    e = error("for i in 0..k: contrib[i] := 0.0\nparam[0] := 0.0")
    assert "writes slot 0, outside [7, 10)" in e.message and e.line == 2
    e = error("for i in 0..6: slot[7 + 2 * i] := 0.0", k=3, s=4)      # 7, 9, then 11: the first outside
    assert "slot 11" in e.message


def test_a_view_of_the_other_role_is_refused():
    e = error("for i in 0..k: param[i] := sample[i]", role="update", k=3, m=0)
    assert "'sample' is not a view of the update program" in e.message and "param, state, mean, rate" in e.hint


def test_a_slot_written_twice_by_one_statement_is_refused():
    e = error("for i in 0..k, j in 0..2: contrib[i] := sample[j]")
    assert "written twice" in e.message and "slot" in e.message
    e = error("for i in 0..k: contrib[0 * i] := 1.0")
    assert "slot 7 is written twice" in e.message
    bound("contrib[0] := 1.0\ncontrib[0] := 2.0\ncontrib[1] := 0.0\ncontrib[2] := 0.0")   # two statements: fine


def test_a_contribution_defines_every_contribution_slot():
    e = error("for i in 0..k - 1: contrib[i] := sample[i]")
    assert "slot 9 (contrib[2]) is never written" in e.message


def test_an_integer_used_as_a_value_stays_exact():
    e = error("for i in 0..k: contrib[i] := k * 100", k=300000, s=1)
    assert "beyond 2^24" in e.message


def test_the_update_reads_the_rate_and_writes_only_parameters_and_state():
    b = bound("for i in 0..k: param[i] := param[i] - rate * mean[i]\nstate[0] := rate", role="update", k=2, m=1)
    f = np.array([[1, 2, 7, 10, 20, 0.5]], np.float32)
    assert evaluate(b, f).tolist() == [[-4, -8, 0.5, 10, 20, 0.5]]
    e = error("rate := 1.0", role="update", k=2, m=1)
    assert "writes slot 5, outside [0, 3)" in e.message


# ------------------------------------------------------------------ the numpy semantics

def test_a_sum_runs_left_to_right_in_f32_not_pairwise():
    k = 4096
    b = bound("let d = sum(j in 0..k: param[j] * sample[j])\nfor i in 0..k: contrib[i] := d + 0.0 * sample[i]",
              k=k, s=k)
    rng = np.random.default_rng(3)
    f = (rng.standard_normal((8, 3 * k)) * np.exp(rng.uniform(-8, 8, (8, 3 * k)))).astype(np.float32)
    got = evaluate(b, f)[:, 2 * k]
    seq = []
    for r in range(8):
        acc = np.float32(-0.0)
        for j in range(k):
            acc = np.float32(acc + np.float32(f[r, j] * f[r, k + j]))
        seq.append(acc)
    assert got.tobytes() == np.array(seq, np.float32).tobytes()
    pairwise = np.sum(f[:, :k] * f[:, k:2 * k], axis=1, dtype=np.float32)
    assert (pairwise != got).any()          # the order matters on this data: the test can tell them apart


def test_each_statement_reads_the_frame_the_statements_before_it_left():
    b = bound("param[0] := 5.0\nparam[1] := param[0] * 2.0", role="update", k=2, m=0)
    assert evaluate(b, np.zeros((1, 5), np.float32))[0, :2].tolist() == [5.0, 10.0]


def test_a_for_statement_is_one_parallel_assignment():
    b = bound("for i in 1..k: param[i] := param[i - 1]", role="update", k=5, m=0)
    f = np.array([[1, 2, 3, 4, 5] + [0] * 6], np.float32)
    assert evaluate(b, f)[0, :5].tolist() == [1, 1, 2, 3, 4]         # a shift, not a cascade of 1s


def test_min_max_argmin_select_and_ieee_division():
    b = bound("let a = argmin(j in 0..s: sample[j])\nlet b = argmax(j in 0..s: sample[j])\n"
              "contrib[0] := a\ncontrib[1] := b\ncontrib[2] := min(sample[0], sample[1]) / 0.0", k=3, s=4)
    f = np.array([[0, 0, 0, 3, 1, 1, 3, 9, 9, 9]], np.float32)
    assert evaluate(b, f)[0, 7:].tolist() == [1.0, 0.0, np.inf]       # the first minimum, the first maximum
    b = bound("for i in 0..k: contrib[i] := select(sample[i] > 0.0, exp(sample[i]), log(-sample[i]))", k=3, s=3)
    f = np.array([[0, 0, 0, 0.5, -2.0, 1e-3, 0, 0, 0]], np.float32)
    want = [np.float32(np.exp(np.float64(np.float32(0.5)))), np.float32(np.log(2.0)),
            np.float32(np.exp(np.float64(np.float32(1e-3))))]
    assert evaluate(b, f)[0, 6:].tolist() == [float(w) for w in want]


def test_kmeans_pulls_only_the_nearest_centroid():
    path = LEARNERS / "kmeans_pull" / "contribution.assign"
    b = check_program(parse_program(path.read_text()), role="contribution", k=6, s=2, m=0)
    centroids = [0, 0, 10, 10, -10, 5]
    f = np.array([centroids + [9, 8] + [7] * 6, centroids + [1, -1] + [7] * 6], np.float32)
    out = evaluate(b, f)[:, 8:]
    assert out.tolist() == [[0, 0, -1, -2, 0, 0], [1, -1, 0, 0, 0, 0]]


def test_the_least_squares_and_adam_examples_against_numpy_written_from_their_description():
    k = 7
    rng = np.random.default_rng(5)
    c = check_program(parse_program((LEARNERS / "least_squares_momentum" / "contribution.assign").read_text()),
                      role="contribution", k=k, s=k + 1, m=k)
    f = rng.standard_normal((6, 3 * k + 1)).astype(np.float32)
    w, x, y = f[:, :k], f[:, k:2 * k], f[:, 2 * k]
    r = np.add.accumulate(w * x, axis=1, dtype=np.float32)[:, -1] - y
    assert evaluate(c, f)[:, 2 * k + 1:].tobytes() == (r[:, None] * x).tobytes()
    u = check_program(parse_program((LEARNERS / "logistic_adam" / "update.assign").read_text()),
                      role="update", k=k, s=k + 1, m=2 * k + 2)
    p, mom, vel = (rng.standard_normal(k).astype(np.float32) for _ in range(3))
    vel = np.abs(vel)
    mean, rate, f32 = rng.standard_normal(k).astype(np.float32), np.float32(0.01), np.float32
    row = np.concatenate([p, mom, vel, [0.9, 0.999], mean, [rate]]).astype(np.float32)[None]
    b1t, b2t = f32(f32(0.9) * f32(0.9)), f32(f32(0.999) * f32(0.999))
    m1 = f32(0.9) * mom + f32(0.1) * mean
    v1 = f32(0.999) * vel + f32(0.001) * (mean * mean)
    step = (m1 / (f32(1) - b1t)) / (np.sqrt(v1 / (f32(1) - b2t)) + f32(1e-8))
    want = np.concatenate([p - rate * step, m1, v1, [b1t, b2t]]).astype(np.float32)
    assert evaluate(u, row)[0, :3 * k + 2].tobytes() == want.tobytes()


def test_rows_and_long_loops_are_evaluated_in_pieces_to_the_same_bits(monkeypatch):
    path = LEARNERS / "logistic_adam" / "contribution.assign"
    b = check_program(parse_program(path.read_text()), role="contribution", k=300, s=301, m=0)
    f = frame("contribution", 300, 301, 0, rows=40, seed=9)
    whole = evaluate(b, f)
    monkeypatch.setattr(evaluate_module, "BUDGET", 700)       # 2 rows a chunk; the for in pieces of 3
    assert evaluate(b, f).tobytes() == whole.tobytes()


def test_evaluate_refuses_a_frame_of_the_wrong_shape_or_type():
    b = bound("for i in 0..k: contrib[i] := sample[i]")
    with pytest.raises(StudioError, match=r"float32 of shape \(rows, 10\)"):
        evaluate(b, np.zeros((2, 9), np.float32))
    with pytest.raises(StudioError, match="float32"):
        evaluate(b, np.zeros((2, 10)))
    with pytest.raises(StudioError, match="needs a checked program"):
        evaluate(parse_program("contrib[0] := 1.0"), np.zeros((1, 10), np.float32))
    assert evaluate(parse_program("for i in 0..k: contrib[i] := 1.0"), np.zeros((1, 10), np.float32),
                    role="contribution", k=3, s=4, m=0)[0, 7:].tolist() == [1, 1, 1]


def test_the_same_bits_in_another_process():
    path = LEARNERS / "logistic_adam" / "contribution.assign"
    code = (
        "import hashlib, numpy as np\n"
        "from studio.engine.learner.program import parse_program, check_program\n"
        "from studio.engine.learner.evaluate import evaluate\n"
        f"b = check_program(parse_program(open({str(path)!r}).read()), role='contribution', k=50, s=51, m=0)\n"
        "f = np.random.default_rng(2).standard_normal((30, 151)).astype(np.float32)\n"
        "print(hashlib.sha256(evaluate(b, f).tobytes()).hexdigest())\n")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    b = check_program(parse_program(path.read_text()), role="contribution", k=50, s=51, m=0)
    f = np.random.default_rng(2).standard_normal((30, 151)).astype(np.float32)
    assert other == hashlib.sha256(evaluate(b, f).tobytes()).hexdigest()


def test_a_reduction_nest_too_large_to_hold_is_refused_not_a_memory_error():
    b = bound("let t = sum(i in 0..k: sum(j in 0..k: param[i] * param[j]))\nfor i in 0..k: contrib[i] := t",
              k=100_000, s=1)
    with pytest.raises(StudioError, match="needs 10,000,000,000 values at once"):
        evaluate(b, np.zeros((1, 200_001), np.float32))


def test_a_parallel_assignment_in_pieces_reads_only_the_frame_before_it(monkeypatch):
    """The outermost loop in pieces must not see the writes of an earlier piece (a shift whose
    values are views of the frame itself)."""
    b = bound("for i in 1..k: param[i] := param[i - 1]\nfor i in 0..k - 1: state[i] := param[i + 1]",
              role="update", k=50, m=49)
    f = np.arange(slot_width("update", 50, 0, 49), dtype=np.float32)[None]
    whole = evaluate(b, f)
    assert whole[0, :50].tolist() == [0.0] + list(range(49))
    monkeypatch.setattr(evaluate_module, "BUDGET", 7)
    assert evaluate(b, f).tobytes() == whole.tobytes()


def test_the_frame_is_evaluated_in_place_and_rules_build_it_in_chunks_to_the_same_bits(monkeypatch):
    """The rules (system.py) hand the evaluator a frame of their own: evaluated in place (no copy),
    built a chunk of rows at a time; a write over one loop variable with a positive stride is a
    slice of the frame, any other a scatter. Every one of these gives the interpreter's bits: the
    same as the copying evaluate of the whole frame, and as each row evaluated alone."""
    from studio.engine.learner.system import ProgramContribution
    k, s = 40, 41
    texts = [(LEARNERS / n / "contribution.assign").read_text() for n in ("least_squares_momentum", "logistic_adam")]
    texts += ["for i in 0..k: contrib[k - 1 - i] := sample[i] * param[i] + sample[k]",        # a scatter
              "for i in 0..k // 2: contrib[2 * i] := sample[2 * i + 1]\n"                       # stride 2
              "for i in 0..k // 2: contrib[2 * i + 1] := sum(j in 0..k: sample[j]) * param[i]"]
    for text in texts:
        b = check_program(parse_program(text), role="contribution", k=k, s=s, m=0)
        f = frame("contribution", k, s, 0, rows=23, seed=4)
        f[:, :k] = f[0, :k]                                   # one parameter vector, as a rule's frame has
        whole = evaluate(b, f)
        alone = np.concatenate([evaluate(b, f[r:r + 1]) for r in range(23)])
        assert whole.tobytes() == alone.tobytes(), text
        g = f.copy()
        assert evaluate(b, g, in_place=True) is g and g.tobytes() == whole.tobytes(), text
        rule = ProgramContribution(b.program, b, k, s)
        want = whole[:, k + s:]
        assert rule.contributions(f[0, :k], f[:, k:k + s]).tobytes() == want.tobytes()
        monkeypatch.setattr(evaluate_module, "BUDGET", 3 * b.volume)                  # 3 rows a chunk
        monkeypatch.setattr(evaluate_module, "FRAME_WORDS", 3 * (2 * k + s))
        assert evaluate_module.frame_rows(b) == 3
        assert rule.contributions(f[0, :k], f[:, k:k + s]).tobytes() == want.tobytes()
        monkeypatch.undo()
