"""Assignment programs on the device (docs/assignment-programs.md): the WGSL compilation run
through the product's executor on the real adapter, judged against the numpy reference by the
product's tolerance comparison — and the controls that make that judgement fail."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.learner.accuracy import error_bounds
from studio.engine.learner.agreement import agree, device_evaluate
from studio.engine.learner.evaluate import evaluate
from studio.engine.learner.program import check_program, parse_program, slot_width
from studio.engine.learner.wgsl import LOOP_BUDGET, compile_wgsl

LEARNERS = Path(__file__).resolve().parents[2] / "resources" / "learners"
EXAMPLES = {"least_squares_momentum": (6, 7, 6), "logistic_adam": (6, 7, 14), "online_mean": (6, 6, 0),
            "kmeans_pull": (8, 2, 0), "perceptron": (6, 7, 0)}


def example(name, role, k, s, m):
    path = LEARNERS / name / f"{role}.assign"
    return check_program(parse_program(path.read_text(), origin=str(path)), role=role, k=k, s=s, m=m)


def data(name, role, k, s, m, rows, seed=0):
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((rows, slot_width(role, k, s, m))).astype(np.float32)
    if name == "logistic_adam" and role == "update":      # second moments >= 0, beta powers in (0, 1)
        f[:, 2 * k:3 * k] = np.abs(f[:, 2 * k:3 * k])
        f[:, 3 * k:3 * k + 2] = [0.9 ** 3, 0.999 ** 3]
    if name == "logistic_adam" and role == "contribution":
        f[:, 2 * k] = rng.integers(0, 2, rows)             # labels 0 / 1
    if name == "perceptron" and role == "contribution":
        f[:, 2 * k] = rng.choice([-1.0, 1.0], rows)
    return f


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("role", ["contribution", "update"])
def test_the_examples_agree_on_the_device(device, name, role):
    k, s, m = EXAMPLES[name]
    b = example(name, role, k, s, m)
    f = data(name, role, k, s, m, rows=300 if role == "contribution" else 1)
    rep = agree(b, f, device=device)
    assert rep.ok, rep.describe()
    written = 300 * k if role == "contribution" else k + m
    assert rep.exact_slots + rep.bounded_slots == written
    if name != "logistic_adam":        # no exp, log, sqrt or division: every slot bit for bit
        assert rep.exact_slots == written and "ulp(0)" in rep.tolerance
    else:
        assert rep.bounded_slots > 0 and "exp" in rep.tolerance and "sqrt" not in rep.tolerance or role == "update"
    assert device_evaluate(b, f, device=device).shape == f.shape


def test_a_corrupted_emission_is_caught(device):
    """The agreement check can fail: one product off by one ulp in the WGSL, the slot named."""
    b = example("least_squares_momentum", "contribution", 6, 7, 6)
    f = data("least_squares_momentum", "contribution", 6, 7, 6, rows=50)
    k = compile_wgsl(b)
    assert "= fx(l_residual * " in k.source
    bad = dataclasses.replace(k, source=k.source.replace("= fx(l_residual * ", "= fx(1.0000001f * l_residual * "))
    rep = agree(b, f, device=device, kernel=bad)
    assert not rep.ok and rep.kind == "mismatch" and rep.mismatch is not None
    assert 13 <= rep.slot < 19 and "DISAGREE at row" in rep.describe()       # a contribution slot [k+s, 2k+s)
    assert "bitwise" not in rep.mismatch.allowed and "0 ulp" in rep.mismatch.allowed


def test_a_corruption_beyond_the_propagated_bound_is_caught(device):
    b = example("logistic_adam", "contribution", 6, 7, 0)
    f = data("logistic_adam", "contribution", 6, 7, 0, rows=50)
    k = compile_wgsl(b)
    assert "exp((-l_z))" in k.source
    bad = dataclasses.replace(k, source=k.source.replace("exp((-l_z))", "1.0001f * exp((-l_z))"))
    rep = agree(b, f, device=device, kernel=bad)
    assert not rep.ok and rep.kind == "mismatch" and "gamma" in rep.mismatch.allowed
    assert rep.largest_bound > 0


def test_an_unwritten_slot_is_caught_by_the_poison(device):
    b = check_program(parse_program("for i in 0..k: contrib[i] := sample[i]\ncontrib[0] := 2.0"),
                      role="contribution", k=4, s=4, m=0)
    k = compile_wgsl(b)
    text = k.source.split("\n")
    drop = next(i for i, line in enumerate(text) if "out[obase + u32((0 + 1 * v_i))]" in line)
    bad = dataclasses.replace(k, source="\n".join(text[:drop] + text[drop + 1:]))
    rep = agree(b, np.ones((3, 12), np.float32), device=device, kernel=bad)
    assert not rep.ok and rep.kind == "unwritten" and rep.slot == 9       # contrib[1]; contrib[0] is written


def test_a_write_past_the_output_is_caught_by_the_canaries(device):
    b = check_program(parse_program("for i in 0..k: contrib[i] := sample[i]"), role="contribution", k=4, s=4, m=0)
    k = compile_wgsl(b)
    bad = dataclasses.replace(k, source=k.source.replace("out[obase + u32(", "out[obase + 4u + u32(", 1))
    rep = agree(b, np.ones((3, 12), np.float32), device=device, kernel=bad)
    assert not rep.ok and rep.kind == "out_of_range_write"


@pytest.mark.slow
def test_long_reductions_fit_lavapipes_loop_count_at_k_70000(device):
    """lavapipe stops an invocation after 65,535 loop iterations, all loops together: the
    least-squares contribution at k = 70,000 (a 70,000-term sum, then 70,000 writes) agrees only
    because its loops are unrolled; one plain loop each is cut short (on lavapipe)."""
    k = 70_000
    b = example("least_squares_momentum", "contribution", k, k + 1, k)
    f = data("least_squares_momentum", "contribution", k, k + 1, k, rows=3)
    kern = compile_wgsl(b)
    assert kern.unroll > 1 and kern.iterations <= LOOP_BUDGET
    rep = agree(b, f, device=device, kernel=kern)
    assert rep.ok and rep.exact_slots == 3 * k, rep.describe()
    plain = compile_wgsl(b, unroll=1, loop_budget=None)
    assert plain.iterations == 2 * k
    cut = agree(b, f, device=device, kernel=plain)
    if "llvmpipe" in str(device.profile.adapter.get("device")):
        assert not cut.ok and cut.kind in ("unwritten", "mismatch"), cut.describe()
    else:                                       # a driver without the cut runs the plain loops correctly
        assert cut.ok, cut.describe()


def test_a_program_too_long_for_one_invocation_is_refused_before_anything_runs():
    b = check_program(parse_program("for i in 0..k: contrib[i] := sum(j in 0..k: param[j] * sample[i])"),
                      role="contribution", k=20_000, s=20_000, m=0)
    with pytest.raises(StudioError, match="loop iterations per row even unrolled 256x"):
        compile_wgsl(b)


def test_a_statement_that_reads_what_it_writes_goes_through_scratch(device):
    b = check_program(parse_program("for i in 1..k: param[i] := param[i - 1] + state[0]\n"
                                    "for i in 0..k: param[i] := param[i] * 2.0"),
                      role="update", k=200, s=0, m=1)
    kern = compile_wgsl(b)
    assert kern.scratch == 199                     # the shift needs it; the in-place doubling does not
    f = data("x", "update", 200, 0, 1, rows=1)
    rep = agree(b, f, device=device, kernel=kern)
    assert rep.ok, rep.describe()
    # the same loop writing in place: iteration i reads the slot iteration i - 1 just wrote (a cascade)
    naive = kern.source.replace("scratch[sbase + u32((v_i - 1) * 1)] = fx(", "out[obase + u32((0 + 1 * v_i))] = fx(", 1)
    naive = naive.replace("out[obase + u32((0 + 1 * v_i))] = scratch[sbase + u32((v_i - 1) * 1)];", "", 1)
    assert naive != kern.source
    cascade = agree(b, f, device=device, kernel=dataclasses.replace(kern, source=naive))
    assert not cascade.ok and cascade.kind == "mismatch" and cascade.slot == 2, cascade.describe()


def test_every_rounded_result_is_hidden_from_the_compilers_float_rewrites(device):
    """NIR factors shared operands: sum(j: c * x_j) ran as c * sum(j: x_j), 45 of 64 rows off
    (measured). Each result goes through fx (its bits XOR a uniform zero), so no rewrite applies;
    the control strips fx from the sum's loop and the kernel disagrees on lavapipe."""
    b = check_program(parse_program("for i in 0..k: contrib[i] := sum(j in 0..s: abs(sample[6]) * sample[j]) "
                                    "+ sample[i] * sample[i] - param[i] * param[i]"),
                      role="contribution", k=7, s=9, m=0)
    kern = compile_wgsl(b)
    assert kern.source.count("fx(") == 1 + 6          # the definition; 1 product, 1 sum step, 2 products, + and -
    f = data("x", "contribution", 7, 9, 0, rows=64, seed=14)
    assert agree(b, f, device=device, kernel=kern).ok
    lines = kern.source.split("\n")
    bare = [ln.replace("= fx(", "= (") if "let term" in ln or "acc1 = fx(" in ln else ln for ln in lines]
    control = agree(b, f, device=device, kernel=dataclasses.replace(kern, source="\n".join(bare)))
    if "llvmpipe" in str(device.profile.adapter.get("device")):
        assert not control.ok and control.kind == "mismatch", control.describe()


def test_the_bound_is_zero_exactly_where_no_inexact_operation_reaches(device):
    b = check_program(parse_program("contrib[0] := sample[0] * param[0]\ncontrib[1] := sample[1] / param[1]\n"
                                    "contrib[2] := exp(sample[2])\ncontrib[3] := sqrt(abs(sample[3])) + sample[0]"),
                      role="contribution", k=4, s=4, m=0)
    f = data("x", "contribution", 4, 4, 0, rows=20)
    e = error_bounds(b, f)[:, 8:]
    assert (e[:, 0] == 0).all() and (e[:, 1:] > 0).all()
    assert agree(b, f, device=device).ok
    assert np.array_equal(device_evaluate(b, f, device=device)[:, 8], evaluate(b, f)[:, 8])


def test_literals_come_from_a_buffer_so_the_compiler_cannot_reassociate_them(device):
    """Mesa's NIR rewrites inexact float chains with constants: 0.001 * (m * m) ran as
    (0.001 * m) * m, a third of the results an ulp off. Read from a buffer, the literal is no
    constant to it (and fx hides each product besides); with both protections removed (the
    control) the kernel disagrees on lavapipe."""
    k = 4000
    b = check_program(parse_program("for i in 0..k: state[i] := 0.001 * (mean[i] * mean[i])"),
                      role="update", k=k, s=0, m=k)
    f = data("x", "update", k, 0, k, rows=1, seed=4)
    kern = compile_wgsl(b)
    assert kern.literals == (float(np.float32(0.001)),) and "lits[0]" in kern.source
    rep = agree(b, f, device=device, kernel=kern)
    assert rep.ok and rep.exact_slots == 2 * k, rep.describe()        # parameters kept, state written
    inline = dataclasses.replace(kern, source=kern.source.replace("lits[0]", "0.0010000000474974513f")
                                 .replace("] = fx(0.001", "] = (0.001").replace("f * fx(", "f * ("))
    control = agree(b, f, device=device, kernel=inline)
    if "llvmpipe" in str(device.profile.adapter.get("device")):
        assert not control.ok and control.kind == "mismatch", control.describe()


def test_saturated_logistic_samples_agree_and_overflowed_slots_are_counted_not_hidden(device):
    """|x . w| past 88: exp overflows to inf on both sides and the first-order bound is infinite
    there; the report counts those slots instead of calling them judged."""
    k = 16
    b = example("logistic_adam", "contribution", k, k + 1, 0)
    rng = np.random.default_rng(30)
    f = (rng.standard_normal((2000, 3 * k + 1)) * 30).astype(np.float32)
    f[:, 2 * k] = rng.integers(0, 2, 2000)
    rep = agree(b, f, device=device)
    assert rep.ok, rep.describe()
    assert 0 < rep.unbounded_slots < rep.bounded_slots and "unbounded" in rep.describe()


@pytest.mark.parametrize("name, s, m", [("least_squares_momentum", 10**6 + 1, 10**6),
                                        ("logistic_adam", 10**6 + 1, 2 * 10**6 + 2), ("online_mean", 10**6, 0),
                                        ("kmeans_pull", 1000, 0), ("perceptron", 10**6 + 1, 0)])
def test_every_example_compiles_within_lavapipes_loop_count_at_a_million_parameters(name, s, m):
    for role in ("contribution", "update"):
        kern = compile_wgsl(example(name, role, 10**6, s, m))
        assert kern.iterations <= LOOP_BUDGET and kern.unroll in (16, 64, 128, 256), (role, kern.unroll)
