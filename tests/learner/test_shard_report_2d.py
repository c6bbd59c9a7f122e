"""The sharding statements of the six 2-D bf16 kinds (resources/ops/core/conv2d_bf16*; docs/bf16.md),
on a ResNet-shaped workflow (a 3×3 conv with padding 1, the 7×7 stride-2 stem with padding 3, batch 12, their
input VJPs and weight gradients) through ``shard-report``, and exactly on the device:

- per example (forward, strided forward, input VJP, strided input VJP): replica r's output is shard r
  of the whole-batch output, bit for bit;
- batch contracting (weight gradient, strided weight gradient): the all-reduced replicas differ from
  1/R of the whole-batch node by exactly (1/R)·(Σ_r rnd S_r − rnd Σ_r S_r), element for element (the
  data are small integers, so every f32 sum is exact and the device's rnd S_r is the rounding of the
  exact partial sum); zero at rnd = id, not zero at bf16.

Failing controls: a weight-gradient kernel that rounds per element (every partial sum) where it
should round once, and a forward kernel that rounds once over the batch (a running sum across
examples) where it should round per element of each example, each fail the statement. The ops are
proven once per run by the public bar (tests/trust/test_publish.py); here the report runs on them with
``allow_unverified``."""
import math

import numpy as np
import pytest
from conftest import BUILTINS, copy_package

from studio.engine.contract.package import load_package
from studio.engine.grad.run import run_op
from studio.engine.sharding.kinds import EXACT, ROUNDED
from studio.engine.sharding.measure import difference, identity, rnd_bf16, shards
from studio.engine.sharding.report import report_lines, shard_report

B, C, OC, N = 12, 3, 4, 12

WORKFLOW = """
[workflow]
name = "bf16_conv2d"
summary = "bf16 2-D convolutions: forward, input VJP and weight gradient, 3x3/1 and the 7x7/2 stem (batch 12)"

[sources.x]
file = "x.npy"
dtype = "bf16"

[sources.f]
file = "f.npy"
dtype = "bf16"

[sources.f7]
file = "f7.npy"
dtype = "bf16"

[steps.conv]
op = "{conv2d_bf16}"
inputs = {{ x = "x", f = "f" }}
params = {{ p = 1 }}

[steps.conv_s2]
op = "{conv2d_bf16_strided}"
inputs = {{ x = "x", f = "f7" }}
params = {{ s = 2, p = 3 }}

[steps.dx]
op = "{conv2d_bf16_input_vjp}"
inputs = {{ dy = "conv.y", f = "f" }}
params = {{ p = 1, n = 12 }}

[steps.dx_s2]
op = "{conv2d_bf16_input_vjp_strided}"
inputs = {{ dy = "conv_s2.y", f = "f7" }}
params = {{ s = 2, p = 3, n = 12 }}

[steps.dw]
op = "{conv2d_bf16_weight_grad}"
inputs = {{ x = "x", dy = "conv.y" }}
params = {{ k = 3, p = 1 }}

[steps.dw_s2]
op = "{conv2d_bf16_weight_grad_strided}"
inputs = {{ x = "x", dy = "conv_s2.y" }}
params = {{ k = 7, s = 2, p = 3 }}
"""
NAMES = ["conv2d_bf16", "conv2d_bf16_strided", "conv2d_bf16_input_vjp", "conv2d_bf16_input_vjp_strided",
         "conv2d_bf16_weight_grad", "conv2d_bf16_weight_grad_strided"]


def data():
    """Small integers: every product and every f32 sum below is exact (|terms| ≤ 4·432, at most
    12·12·12 of them), while the outputs need more than bf16's 8 bits, so the roundings are real."""
    rng = np.random.default_rng(2027)          # a seed where no whole-batch df is exactly 0 (its ulp would be 2^-133)
    return {"x": rng.integers(-4, 5, (B, C, N, N)).astype(np.float32),
            "f": rng.integers(-4, 5, (OC, C, 3, 3)).astype(np.float32),
            "f7": rng.integers(-2, 3, (OC, C, 7, 7)).astype(np.float32)}


def write_workflow(root, ops: dict | None = None):
    """The workflow in ``root``, its ops the builtins except those ``ops`` names (name -> folder)."""
    root.mkdir(parents=True, exist_ok=True)
    for k, v in data().items():
        np.save(root / f"{k}.npy", v)
    refs = {n: (f"./{ops[n].relative_to(root)}" if ops and n in ops else f"core/nn/{n}@1") for n in NAMES}
    (root / "bf16_conv2d.toml").write_text(WORKFLOW.format(**refs))
    return root / "bf16_conv2d.toml"


def nodes(rep):
    return {n.name: n for n in rep.nodes}


@pytest.mark.parametrize("replicas", [2, 3, 4])
def test_the_six_2d_kinds_through_the_shard_report(ctx, tmp_path, replicas):
    rep = shard_report(ctx, write_workflow(tmp_path / "wf"), replicas, allow_unverified=True)
    print("\n".join(report_lines(rep)))
    by = nodes(rep)
    for name in ("conv", "conv_s2", "dx", "dx_s2"):
        n = by[name]
        assert n.kind.label == EXACT and n.verified and n.batch == B
        (out,) = n.outputs.values()
        assert out["replica_equals_shard"] == [True] * replicas and out["difference"]["nonzero"] == 0
    for name in ("dw", "dw_s2"):
        n = by[name]
        assert n.kind.label == ROUNDED and n.verified
        out = n.outputs["df"]
        assert out["den_f32"]["max"] == 0.0 and out["den_f32"]["nonzero"] == 0     # rnd = id: zero, exactly
        assert out["den"]["nonzero"] > 0 and out["device"]["nonzero"] > 0          # bf16: not zero
        assert out["device"] == out["den"]         # exact sums here: the device's difference is the stated one
    assert rep.ok
    if replicas == 3:          # not a power of two: the warning names the nodes a cotangent reaches
        (w,) = rep.warnings
        assert "3 replicas is not a power of two" in w and "node(s) dx, dx_s2, dw, dw_s2 that the scaled" in w
        assert by["dx"].divisor["dx"]["fails"] > 0 and by["conv"].divisor == {}
    else:
        assert rep.warnings == []


def test_on_one_replica_nothing_differs_and_a_batch_that_does_not_split_is_refused(ctx, tmp_path):
    from studio.engine.errors import StudioError
    rep = shard_report(ctx, write_workflow(tmp_path / "wf"), 1, allow_unverified=True)
    for n in rep.nodes:
        for out in n.outputs.values():
            for key in ("difference", "device", "den", "den_f32"):
                if key in out:
                    assert out[key]["max"] == 0.0
    with pytest.raises(StudioError, match="does not split into 5 equal shards"):
        shard_report(ctx, write_workflow(tmp_path / "wf"), 5, allow_unverified=True)


def statement(ctx, pkg, inputs: dict, params: dict, replicas: int) -> dict:
    """Per output of a node: the statement of its declared kind, checked element for element on the
    device. Per example: replica r's output is shard r of the whole, bit for bit. Batch contracting:
    the measured (1/R)·(Σ_r device_r − device_whole) equals the stated (1/R)·(Σ_r rnd S_r − rnd Σ_r S_r)
    with S_r the exact (f64 reference) partial sums, element for element."""
    sh = pkg.contract.sharding
    whole = run_op(ctx, pkg, inputs, params)
    pieces = shards(inputs, sh.batch, replicas, pkg.id)
    parts = [run_op(ctx, pkg, s, params) for s in pieces]
    out = {}
    for t in pkg.contract.signature.outputs:
        w = np.asarray(whole[t.name], np.float64)
        if sh.kind == "per_example":
            n = w.shape[0] // replicas
            out[t.name] = all(np.array_equal(np.asarray(p[t.name], np.float64), w[r * n:(r + 1) * n])
                              for r, p in enumerate(parts))
            continue
        flat = [np.asarray(p[t.name], np.float64).reshape(-1) for p in parts]
        measured = np.array([math.fsum([*col, -g]) for col, g in zip(np.stack(flat).T, w.reshape(-1))]) / replicas
        exact = [np.asarray(ctx.references.call(pkg, pkg.contract.reference_forward, s, params), np.float64).reshape(-1)
                 for s in pieces]
        stated, _ = difference(exact, rnd_bf16)
        at_id, _ = difference(exact, identity)
        out[t.name] = bool(np.array_equal(measured, stated) and np.count_nonzero(stated) > 0 and not at_id.any())
    return out


@pytest.fixture
def forward_output(ctx):
    """conv's y (a bf16 cotangent of integers) for the weight gradient's statement."""
    d = data()
    return np.asarray(run_op(ctx, load_package(BUILTINS / "conv2d_bf16"), {"x": d["x"], "f": d["f"]}, {"p": 1})["y"])


@pytest.mark.parametrize("replicas", [2, 4])
def test_each_statement_holds_element_for_element(ctx, forward_output, replicas):
    d = data()
    for name, inputs, params in [
            ("conv2d_bf16", {"x": d["x"], "f": d["f"]}, {"p": 1}),
            ("conv2d_bf16_strided", {"x": d["x"], "f": d["f7"]}, {"s": 2, "p": 3}),
            ("conv2d_bf16_input_vjp", {"dy": forward_output, "f": d["f"]}, {"p": 1, "n": N}),
            ("conv2d_bf16_weight_grad", {"x": d["x"], "dy": forward_output}, {"k": 3, "p": 1})]:
        assert statement(ctx, load_package(BUILTINS / name), inputs, params, replicas) == \
            {t.name: True for t in load_package(BUILTINS / name).contract.signature.outputs}, name


def test_a_weight_gradient_that_rounds_per_element_fails_its_statement(ctx, tmp_path, forward_output):
    """Every partial sum rounded to bf16 (the rounding per element of the sum, where the kind rounds
    once): the measured difference is no longer the stated one."""
    root = copy_package(BUILTINS / "conv2d_bf16_weight_grad", tmp_path / "wf" / "ops" / "wg", {"forward.wgsl": [
        ("acc = acc + term(t, oi, ci, j1, j2);", "acc = bf16_round(acc + term(t, oi, ci, j1, j2));"),
        ("total = total + part[l];", "total = bf16_round(total + part[l]);")]})
    pkg = load_package(root)
    ctx.trust.trust(pkg)
    d = data()
    assert statement(ctx, pkg, {"x": d["x"], "dy": forward_output}, {"k": 3, "p": 1}, 2) == {"df": False}
    good = load_package(BUILTINS / "conv2d_bf16_weight_grad")
    assert statement(ctx, good, {"x": d["x"], "dy": forward_output}, {"k": 3, "p": 1}, 2) == {"df": True}
    # through the report: the device's difference is no longer the one at the den (exact sums here)
    rep = shard_report(ctx, write_workflow(tmp_path / "wf", {"conv2d_bf16_weight_grad": root}), 2, allow_unverified=True)
    out = nodes(rep)["dw"].outputs["df"]
    assert out["device"] != out["den"] and nodes(rep)["dw_s2"].outputs["df"]["device"] == nodes(rep)["dw_s2"].outputs["df"]["den"]


ROUNDS_ONCE_OVER_THE_BATCH = [
    ("    for (var ci = 0u; ci < p.c; ci = ci + 1u) {",
     "    for (var bb = 0u; bb <= bi; bb = bb + 1u) {\n    for (var ci = 0u; ci < p.c; ci = ci + 1u) {"),
    ("x[((bi * p.c + ci)", "x[((bb * p.c + ci)"),
    ("    y[i] = bf16_round(acc);", "    }\n    y[i] = bf16_round(acc);")]


def test_a_forward_kernel_that_rounds_once_over_the_batch_fails_its_statement(ctx, tmp_path):
    """Its sum runs over the examples up to its own (one f32 sum, rounded once), where the kind rounds
    per element of each example: replica 0 still matches its shard, the others do not — both in the
    element-for-element statement and in the shard report."""
    root = copy_package(BUILTINS / "conv2d_bf16", tmp_path / "wf" / "ops" / "conv2d_bf16",
                        {"forward.wgsl": ROUNDS_ONCE_OVER_THE_BATCH})
    pkg = load_package(root)
    ctx.trust.trust(pkg)
    d = data()
    assert statement(ctx, pkg, {"x": d["x"], "f": d["f"]}, {"p": 1}, 2) == {"y": False}
    rep = shard_report(ctx, write_workflow(tmp_path / "wf", {"conv2d_bf16": root}), 2, allow_unverified=True)
    conv = nodes(rep)["conv"]
    assert conv.verified is False and conv.outputs["y"]["replica_equals_shard"] == [True, False]
    assert not rep.ok and any("DIFFERS" in line for line in report_lines(rep))
    assert nodes(rep)["conv_s2"].verified          # the builtin beside it still holds
