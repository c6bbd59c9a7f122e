"""The sharding kinds as contract (op.toml [sharding], checked against the signature), the exact
difference (1/R)·(Σ rnd S_r − rnd Σ S_r), and the divisor step rnd(s·x) = s·rnd(x): a property
for s = 2^k over the normal range, and its failures where overflow or subnormals intervene."""
import math

import numpy as np
import pytest
from conftest import BUILTINS, copy_package
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.engine import bfloat16 as bf
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.sharding.divisor import (
    divisor_warning,
    power_of_two,
    scaling_commutes,
)
from studio.engine.sharding.kinds import EXACT, ROUNDED, UNDECLARED, classify
from studio.engine.sharding.measure import difference, identity, rnd_bf16, shards

SIX = {"conv1d_bf16": EXACT, "conv1d_bf16_strided": EXACT, "conv1d_bf16_input_vjp": EXACT,
       "conv1d_bf16_input_vjp_strided": EXACT, "conv1d_bf16_weight_grad": ROUNDED,
       "conv1d_bf16_weight_grad_strided": ROUNDED}


@pytest.mark.parametrize("name", sorted(SIX))
def test_the_six_kinds_are_classified_by_their_declared_sharding(name):
    kind = classify(load_package(BUILTINS / name))
    assert kind.label == SIX[name] and kind.bf16
    assert kind.kind == ("per_example" if SIX[name] == EXACT else "batch_contracting")


def test_an_op_without_a_declared_kind_is_not_guessed():
    kind = classify(load_package(BUILTINS / "fir"))
    assert kind.label == UNDECLARED and "declares no [sharding]" in kind.why


@pytest.mark.parametrize("old, new, message", [
    ('kind = "per_example"', 'kind = "per_replica"', "is not one of per_example, batch_contracting"),
    ('batch = ["x"]', 'batch = ["z"]', "names 'z', which is no input"),
    ('batch = ["x"]', 'batch = ["w"]', "does not start with the batch dim o"),
    ('batch = ["x"]', 'batch = ["x", "w"]', "start with different dims"),
    ('kind = "per_example"', 'kind = "batch_contracting"', "still carries the batch dim b"),
    ('batch = ["x"]', 'batch = []', "must list the names"),
])
def test_a_wrong_sharding_declaration_is_refused_at_its_field(tmp_path, old, new, message):
    root = copy_package(BUILTINS / "conv1d_bf16", tmp_path / "p", {"op.toml": [(old, new)]})
    with pytest.raises(StudioError) as e:
        load_package(root)
    assert message in e.value.message and (e.value.field or "").startswith("sharding.")


def test_a_weight_gradient_cannot_claim_per_example(tmp_path):
    root = copy_package(BUILTINS / "conv1d_bf16_weight_grad", tmp_path / "p",
                        {"op.toml": [('kind = "batch_contracting"', 'kind = "per_example"')]})
    with pytest.raises(StudioError, match="does not start with the batch dim b"):
        load_package(root)


def test_shards_split_the_batch_inputs_and_replicate_the_rest():
    x, w = np.arange(24).reshape(6, 4), np.ones(3)
    parts = shards({"x": x, "w": w}, ("x",), 3, "op")
    assert [p["x"].tolist() for p in parts] == [x[0:2].tolist(), x[2:4].tolist(), x[4:6].tolist()]
    assert all(p["w"] is w for p in parts)
    with pytest.raises(StudioError, match="does not split into 4 equal shards"):
        shards({"x": x}, ("x",), 4, "op")


def test_the_difference_is_zero_at_rnd_id_and_not_at_bf16():
    """Two partial sums each a hair above a bf16 tie: each rounds up, their sum rounds once."""
    one = 1 + 2.0 ** -8 + 2.0 ** -20                      # rounds to 1 + 2^-7
    partials = [np.array([one]), np.array([one])]
    d_id, _ = difference(partials, identity)
    d_bf, _ = difference(partials, rnd_bf16)
    assert d_id.tolist() == [0.0]
    # Σ rnd S_r = 2 + 2^-6; rnd Σ S_r = rnd(2 + 2^-7 + 2^-19) = 2 + 2^-6 as well: equal here ...
    assert d_bf.tolist() == [0.0]
    three = [np.array([1 + 2.0 ** -8 + 2.0 ** -20])] * 3   # ... but not on 3 replicas
    d3, w3 = difference(three, rnd_bf16)
    s = 3 * (1 + 2.0 ** -8 + 2.0 ** -20)
    want = (3 * (1 + 2.0 ** -7) - float(bf.to_f32(bf.from_f64(np.array([s])))[0])) / 3
    print(f"three replicas: Σ rnd S_r = {3 * (1 + 2.0 ** -7)!r}, rnd Σ S_r = {float(w3[0]) * 3!r}, "
          f"difference {float(d3[0])!r}")
    assert d3.tolist() == [want] and want != 0


def test_power_of_two():
    assert [r for r in range(1, 20) if power_of_two(r)] == [1, 2, 4, 8, 16]
    assert not power_of_two(0)


def test_the_divisor_warning_names_the_count_and_the_nodes():
    w = divisor_warning(3, ["dx", "dw"])
    assert "3 replicas is not a power of two" in w and "dx, dw" in w and "rnd(3·x) = 3·rnd(x)" in w
    assert divisor_warning(4, ["dx"]) is None and divisor_warning(3, []) is None


@settings(max_examples=400, deadline=None)
@given(x=st.floats(min_value=2.0 ** -100, max_value=2.0 ** 100), k=st.integers(-20, 20), negative=st.booleans())
def test_rnd_commutes_with_a_power_of_two_over_the_normal_range(x, k, negative):
    x = -x if negative else x
    assert scaling_commutes(np.array([x]), 2.0 ** k).all(), (x, k)


@settings(max_examples=200, deadline=None)
@given(m=st.integers(64, 127).map(lambda v: 2 * v + 1), e=st.integers(-60, 60), r=st.sampled_from([3, 5, 6, 7, 12]))
def test_rnd_does_not_commute_with_other_scales(m, e, r):
    """x = m·2^e with m odd in [129, 255] is a bf16 with its last significand bit set; r·m (r = 3,
    5, 6, 7, 12) is odd times a power of two and at least 387, so it needs more than 8 bits."""
    x = m * 2.0 ** e
    assert int(bf.from_f64(np.array([x]))[0]) == int(bf.from_f32(np.array([x], np.float32))[0])  # x is a bf16
    assert not scaling_commutes(np.array([x]), float(r)).all()


FAILURES = [
    ("overflow", bf.MAX, 2.0),                          # rnd(2·MAX) = inf, 2·rnd(MAX) = 2·MAX
    ("overflow, scale 4", 2.0 ** 126 * 1.5, 4.0),       # 1.5·2^128 overflows
    ("subnormal: to zero", 2.0 ** -133, 0.5),           # rnd(2^-134) = 0 (a tie, to even), 0.5·2^-133 ≠ 0
    ("subnormal: bits lost", (1 + 2.0 ** -7) * 2.0 ** -126, 0.25),   # (1 + 2^-7)·2^-128 has no subnormal bf16
]


@pytest.mark.parametrize("why, x, s", FAILURES, ids=[f[0] for f in FAILURES])
def test_the_identity_fails_where_overflow_or_subnormals_intervene(why, x, s):
    lhs = float(bf.to_f32(bf.from_f64(np.array([s * x])))[0])
    rhs = s * float(bf.to_f32(bf.from_f64(np.array([x])))[0])
    print(f"{why}: x = {x!r} ({x.hex()}), s = {s!r}: rnd(s·x) = {lhs!r}, s·rnd(x) = {rhs!r}")
    assert lhs != rhs and not scaling_commutes(np.array([x]), s).all()
    assert math.isinf(lhs) or abs(s * x) < 2.0 ** -126     # only past the format's boundaries
