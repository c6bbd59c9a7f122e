"""A sum that declares the pairwise order (docs/assignment-programs.md, "The order of a sum"):
the numpy evaluator and the device kernels against an independent plain-Python reference, bit for
bit, on inputs where the pairwise and the sequential orders give different bits; a kernel that
sums sequentially where pairwise is declared fails; the declared order is in the hash."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.learner.agreement import agree, device_evaluate
from studio.engine.learner.combine import contract, contract_hash
from studio.engine.learner.evaluate import evaluate
from studio.engine.learner.program import check_program, parse_program, slot_width
from studio.engine.learner.staged import compile_staged, run_staged
from studio.engine.learner.system import System
from studio.engine.learner.wgsl import compile_wgsl

LEARNERS = Path(__file__).resolve().parents[2] / "resources" / "learners"

DOT = "let r = sum(j in 0..k{order}: param[j] * sample[j]) - sample[k]\nfor i in 0..k: contrib[i] := r * sample[i]\n"


# ------------------------------------------------------------------ the independent reference
def ref_pairwise(terms):
    """The pairwise tree in plain Python over numpy float32 scalars: one level, then the next."""
    xs = [np.float32(t) for t in terms]
    if not xs:
        return np.float32(0.0)
    while len(xs) > 1:
        level = [np.float32(xs[i] + xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        if len(xs) % 2:
            level.append(xs[-1])
        xs = level
    return xs[0]


def ref_split(terms):
    """The same tree said another way: the largest power of two below n, then the rest."""
    if len(terms) == 1:
        return np.float32(terms[0])
    p = 1 << ((len(terms) - 1).bit_length() - 1)
    return np.float32(ref_split(terms[:p]) + ref_split(terms[p:]))


def ref_sequential(terms):
    acc = np.float32(-0.0)
    for t in terms:
        acc = np.float32(acc + np.float32(t))
    return acc


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def spread(rng, shape):
    """Values over many binades, so that the order of the additions shows in the bits."""
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, shape))).astype(np.float32)


def dot_program(order, k):
    return check_program(parse_program(DOT.format(order=order), origin="dot"), role="contribution", k=k, s=k + 1, m=0)


def dot_frame(k, rows, seed):
    f = spread(np.random.default_rng(seed), (rows, slot_width("contribution", k, k + 1, 0)))
    f[:, 2 * k + 1:] = 0.0
    return f


def expected_residuals(f, k, ref):
    return np.array([np.float32(ref(list(np.float32(f[r, j] * f[r, k + j]) for j in range(k))) - f[r, 2 * k])
                     for r in range(f.shape[0])], np.float32)


def test_the_two_references_are_one_tree_and_differ_from_the_sequential_order():
    rng = np.random.default_rng(1)
    differ = 0
    for n in list(range(1, 70)) + [127, 128, 129, 1000]:
        t = spread(rng, n)
        assert bits(ref_pairwise(t)) == bits(ref_split(t)), n
        differ += bits(ref_pairwise(t)) != bits(ref_sequential(t))
    assert differ > 30                      # the inputs tell the orders apart


def test_numpy_evaluates_the_declared_tree_level_by_level():
    for k in (1, 2, 3, 5, 8, 13, 64, 100, 257):
        f = dot_frame(k, 6, k)
        got = evaluate(dot_program(", pairwise", k), f)
        want = expected_residuals(f, k, ref_pairwise)
        assert np.array_equal(bits(got[:, 2 * k + 1]), bits(want * f[:, k])), k


def test_the_sequential_order_stays_the_default_and_fails_the_pairwise_reference():
    k, f = 257, dot_frame(257, 8, 0)
    plain, seq, pw = (evaluate(dot_program(o, k), f)[:, 2 * k + 1] for o in ("", ", sequential", ", pairwise"))
    assert np.array_equal(bits(plain), bits(seq))
    assert np.array_equal(bits(plain), bits(expected_residuals(f, k, ref_sequential) * f[:, k]))
    pairwise_want = bits(expected_residuals(f, k, ref_pairwise) * f[:, k])
    assert np.array_equal(bits(pw), pairwise_want)
    assert not np.array_equal(bits(seq), pairwise_want)          # the control: the other order fails


@pytest.mark.parametrize("k,unroll", [(1, 1), (7, 1), (7, 4), (37, 4), (100, 16), (1000, None)])
def test_the_device_kernel_adds_the_same_tree_bit_for_bit(device, k, unroll):
    b, f = dot_program(", pairwise", k), dot_frame(k, 9, k)
    kernel = compile_wgsl(b, unroll=unroll)
    got = device_evaluate(b, f, device=device, kernel=kernel)
    assert np.array_equal(bits(got), bits(evaluate(b, f)))
    assert np.array_equal(bits(got[:, 2 * k + 1]), bits(expected_residuals(f, k, ref_pairwise) * f[:, k]))


def test_a_kernel_that_sums_sequentially_where_pairwise_is_declared_fails(device):
    k = 100
    pw, f = dot_program(", pairwise", k), dot_frame(k, 16, 3)
    assert agree(pw, f, device=device).ok
    sequential = compile_wgsl(dot_program("", k))
    liar = dataclasses.replace(sequential, program_hash=pw.hash)        # the sequential loop, claiming pairwise
    rep = agree(pw, f, device=device, kernel=liar)
    assert not rep.ok and rep.kind == "mismatch" and "0 ulp" in rep.mismatch.allowed
    assert k + k + 1 <= rep.slot < 2 * k + k + 1


def test_the_staged_path_adds_the_same_tree_with_a_pairwise_sum_inside_a_loop(device):
    text = ("let r = sum(j in 0..k, pairwise: param[j] * sample[j]) - sample[k]\n"
            "for i in 0..k: contrib[i] := r * sample[i] + sum(j in 0..21, pairwise: sample[j] * param[i])\n")
    k = 40
    b = check_program(parse_program(text), role="contribution", k=k, s=k + 1, m=0)
    f = dot_frame(k, 5, 7)
    got = run_staged(compile_staged(b), f, device=device)
    want = evaluate(b, f)
    assert np.array_equal(bits(got), bits(want))
    inner = [ref_pairwise([np.float32(f[0, k + j] * f[0, i]) for j in range(21)]) for i in range(k)]
    r = expected_residuals(f[:1], k, ref_pairwise)[0]
    assert np.array_equal(bits(want[0, 2 * k + 1:]),
                          bits([np.float32(np.float32(r * f[0, k + i]) + inner[i]) for i in range(k)]))


def test_a_pairwise_sum_of_inexact_terms_agrees_within_its_propagated_bound(device):
    text = "for i in 0..k: contrib[i] := sum(j in 0..k, pairwise: exp(param[j] * sample[j])) * sample[i]"
    k = 50
    b = check_program(parse_program(text), role="contribution", k=k, s=k, m=0)
    f = np.random.default_rng(5).uniform(-2, 2, (8, slot_width("contribution", k, k, 0))).astype(np.float32)
    rep = agree(b, f, device=device)
    assert rep.ok and rep.bounded_slots == 8 * k, rep.describe()
    bad = compile_wgsl(b)
    bad = dataclasses.replace(bad, source=bad.source.replace("fx(exp(", "fx(1.001f * exp("))
    assert "1.001f" in bad.source and not agree(b, f, device=device, kernel=bad).ok


def test_the_declared_order_is_in_the_program_hash_and_the_contract():
    plain = parse_program(DOT.format(order=""))
    assert parse_program(DOT.format(order=", sequential")).hash == plain.hash
    pw = parse_program(DOT.format(order=", pairwise"))
    assert pw.hash != plain.hash and ", pairwise:" in pw.canonical
    src = LEARNERS / "least_squares_momentum"
    samples = np.load(src / "samples.npy").astype(np.float32)

    def system(order):
        text = (src / "contribution.assign").read_text()
        assert "sum(j in 0..k:" in text
        c = parse_program(text.replace("sum(j in 0..k:", f"sum(j in 0..k{order}:"), origin="c")
        u = parse_program((src / "update.assign").read_text(), origin="u")
        return System.build(k=3, s=4, m=3, contribution=c, update=u, params=np.zeros(3), state=np.zeros(3),
                            rate=0.1, samples=samples, name="ls")
    old, same, new = system(""), system(", sequential"), system(", pairwise")
    assert "sums" not in contract(old) and contract_hash(old) == contract_hash(same)
    assert contract_hash(new) != contract_hash(old) and "pairwise" in contract(new)["sums"]["contribution"][0]


def test_only_a_sum_takes_an_order_and_only_a_known_one():
    with pytest.raises(StudioError, match="only a sum takes an order"):
        parse_program("let x = max(j in 0..k, pairwise: param[j])")
    with pytest.raises(StudioError, match="only a sum takes an order"):
        parse_program("let x = argmin(j in 0..k, sequential: param[j])")
    with pytest.raises(StudioError, match="unknown order 'tree'"):
        parse_program("let x = sum(j in 0..k, tree: param[j])")
