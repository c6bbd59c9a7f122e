"""The small ResNet at f32 (resources/workflows/resnet_digits_f32.toml; docs/bf16.md, "At f32: the same
bits for 1, 2 and 4 owners"): the network of resnet_digits.toml with the f32 twins of its bf16 ops
(rnd = id), trained data-parallel.

- the file is resnet_digits.toml's network: the same steps, wires, sources, data and training, each
  bf16 op swapped for its f32 twin (the 2-D kinds' plain and strided ops one op with the stride a
  parameter); --precision must be the ops' own, refused either way naming the field and what to do;
- the three 2-D f32 kinds (resources/ops/core/conv2d_f32*): their sharding kinds, small integers
  bit for bit against the f64 reference (every f32 sum exact), each proven by its own conformance
  (once per run, the proof store), and a broken twin per family that conformance rejects (the
  bf16 twins' controls: a forward and a weight gradient that ignore the padding, an input VJP that
  ignores the stride); the nn twins are tests/device/test_nn_resnet_ops.py's;
- 1, 2 and 4 owners give the same parameters' bits after two steps (in process, and 2 owners
  through Dask with --precision f32); control: a combine that sums per owner, then across owners
  (the partition's own tree) gives other bits;
- the shard report at f32: every weight gradient differs from the whole batch's node only by the
  order of the f32 sums — measured within the order-only bound (1/R)·2γ_N·Σ|terms|, no bf16
  bound applies; control: the same replicas' weight gradients rounded per replica to bf16 are far
  outside it.

Every op is proven once per run (the proof store); the owners judge the receipts in this test's
user folder like any process would."""
from pathlib import Path

import numpy as np
import pytest
from conftest import BUILTINS, copy_package

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.precision import round_to
from studio.engine.proof.conformance import conform
from studio.engine.sharding import training
from studio.engine.sharding.kinds import EXACT, EXACT_AT_ID, classify
from studio.engine.sharding.training import Replica, Trainer, contracting_steps, params_hash
from studio.engine.workflow.spec import load_workflow

REPO = Path(__file__).resolve().parents[2]
RESNET = REPO / "resources" / "workflows" / "resnet_digits.toml"
F32 = REPO / "resources" / "workflows" / "resnet_digits_f32.toml"
CONV = {"conv2d_f32": EXACT, "conv2d_f32_input_vjp": EXACT, "conv2d_f32_weight_grad": EXACT_AT_ID}
TWIN = {"conv2d_bf16": "conv2d_f32", "conv2d_bf16_strided": "conv2d_f32", "conv2d_bf16_input_vjp": "conv2d_f32_input_vjp",
        "conv2d_bf16_input_vjp_strided": "conv2d_f32_input_vjp", "conv2d_bf16_weight_grad": "conv2d_f32_weight_grad",
        "conv2d_bf16_weight_grad_strided": "conv2d_f32_weight_grad", "relu_bf16": "relu_f32", "relu_bf16_vjp": "relu_f32_vjp",
        "add_bf16": "add_f32", "global_avg_pool_bf16": "global_avg_pool_f32",
        "global_avg_pool_bf16_vjp": "global_avg_pool_f32_vjp"}


# ------------------------------------------------------------------ the file, and --precision
def test_the_f32_file_is_the_bf16_network_with_the_f32_twins():
    a, b = load_workflow(RESNET), load_workflow(F32)
    assert list(a.steps) == list(b.steps) and len(b.steps) == 37
    ops = set()
    for name, s in a.steps.items():
        t = b.steps[name]
        op = s.op.split("/")[-1].split("@")[0]
        assert t.op == f"core/nn/{TWIN.get(op, op)}@1", (name, t.op)
        assert {k: w.text for k, w in t.inputs.items()} == {k: w.text for k, w in s.inputs.items()}, name
        assert t.params == ({"s": 1, **s.params} if op in ("conv2d_bf16", "conv2d_bf16_input_vjp", "conv2d_bf16_weight_grad")
                            else s.params), name
        ops.add(t.op)
    assert len(ops) == 12 and not any("bf16" in o for o in ops)
    for n, s in a.sources.items():
        t = b.sources[n]
        assert (t.kind, t.init, t.shape, t.seed, t.trainable, t.dataset) == (s.kind, s.init, s.shape, s.seed, s.trainable,
                                                                             s.dataset), n
        assert t.dtype in (None, "f32"), n
    assert b.data == a.data and b.data.path == a.data.path             # the same file, read where it lies
    assert {k: w.text for k, w in b.train.gradients.items()} == {k: w.text for k, w in a.train.gradients.items()}
    assert (b.train.batch, b.train.replicas, b.train.epochs, b.train.learning_rate, b.train.momentum) == \
        (a.train.batch, a.train.replicas, a.train.epochs, a.train.learning_rate, a.train.momentum)


def test_precision_must_be_the_ops_own(capsys):
    from studio.cli import main
    assert main(["train", str(RESNET), "--precision", "f32"]) == 2
    err = capsys.readouterr().err
    assert "--precision f32: this workflow's convolutions are bf16 ops" in err and "'stem': core/nn/conv2d_bf16@1" in err
    assert "--precision bf16" in err and "resnet_digits_f32.toml" in err
    assert main(["train", str(F32), "--precision", "bf16"]) == 2
    err = capsys.readouterr().err
    assert "--precision bf16: this workflow's ops are all f32" in err and "--precision f32" in err


# ------------------------------------------------------------------ the 2-D f32 kinds
@pytest.mark.parametrize("name", sorted(CONV))
def test_each_conv_twin_declares_its_kind(name):
    pkg = load_package(BUILTINS / name)
    assert pkg.id == f"core/nn/{name}@1" and classify(pkg).label == CONV[name]
    assert [p.name for p in pkg.contract.signature.params][:3] in (["s", "p"], ["s", "p", "n"], ["k", "s", "p"])


def test_the_conv_twins_on_small_integers_are_the_exact_sums(ctx):
    """Small integers: every f32 product and sum is exact, so each kernel gives the f64 reference's
    value exactly — plain and strided, padded and not, the ResNet's shapes."""
    rng = np.random.default_rng(11)
    ref = {n: load_package(BUILTINS / n) for n in CONV}
    for s, p, k in ((1, 1, 3), (2, 1, 3), (2, 0, 1)):
        x = rng.integers(-8, 9, (5, 3, 8, 8)).astype(np.float32)
        f = rng.integers(-8, 9, (4, 3, k, k)).astype(np.float32)
        m = (8 + 2 * p - k) // s + 1
        dy = rng.integers(-8, 9, (5, 4, m, m)).astype(np.float32)
        cases = [("conv2d_f32", {"x": x, "f": f}, {"s": s, "p": p}), ("conv2d_f32_input_vjp", {"dy": dy, "f": f},
                 {"s": s, "p": p, "n": 8}), ("conv2d_f32_weight_grad", {"x": x, "dy": dy}, {"k": k, "s": s, "p": p})]
        for name, inputs, params in cases:
            got = run_op(ctx, ref[name], inputs, params)
            want = ctx.references.forward(ref[name], inputs, params)
            for out, w in want.items():
                assert np.array_equal(np.asarray(got[out], np.float64), np.asarray(w, np.float64)), (name, s, p, k)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONV))
def test_each_conv_twin_passes_its_own_conformance(ctx, name, proof_store):
    from proof_store import proven
    entry = proven(proof_store, ctx, load_package(BUILTINS / name))
    assert entry["verdict"] == "pass", "\n".join(entry["lines"])


BROKEN = [("conv2d_f32", "ignores the padding", [("p.pad", "0u")]),
          ("conv2d_f32_input_vjp", "ignores the stride", [("% p.s", "% 1u"), ("/ p.s", "/ 1u")]),
          ("conv2d_f32_weight_grad", "ignores the padding", [("p.pad", "0u")])]


@pytest.mark.slow
@pytest.mark.parametrize("name, why, edits", BROKEN, ids=[f"{b[0]}: {b[1]}" for b in BROKEN])
def test_a_broken_conv_twin_fails_conformance(ctx, tmp_path, name, why, edits):
    pkg = load_package(copy_package(BUILTINS / name, tmp_path / name, {"forward.wgsl": edits}))
    ctx.trust.trust(pkg)
    rep = conform(ctx, pkg, stop_after=1)
    assert not rep.ok and rep.failures, f"{name} that {why} passed conformance"
    assert rep.failures[0].describe().startswith("case ")


# ------------------------------------------------------------------ training at f32
@pytest.fixture(scope="module")
def rctx(module_ctx, proof_store):
    """This module's context, every op of the f32 network proven there once (the proof store)."""
    from proof_store import proven
    r = Replica(str(F32), allow_unverified=True, ctx=module_ctx)
    for pkg in {sp.pkg.hash: sp.pkg for sp in r.plan.steps.values()}.values():
        assert proven(proof_store, module_ctx, pkg)["verdict"] == "pass", pkg.id
    return module_ctx


@pytest.fixture(scope="module")
def replica(rctx):
    return Replica(str(F32), ctx=rctx)                    # every receipt valid: nothing allowed unverified


class InProcess:
    """Owners as plain objects in this process: the calls the Dask owners get."""

    def __init__(self, replicas):
        self.replicas = replicas

    def call(self, method, args):
        return [method(r, *a) for r, a in zip(self.replicas, args)]


def _train(rctx, replica, owners, steps=2):
    t = Trainer(rctx, replica, owners, InProcess([replica] * owners).call)
    order = replica.data.epoch_order(1)
    recs = [t.step(order[k * 64:(k + 1) * 64], k + 1, 1) for k in range(steps)]
    return t, recs


def _sequential(parts):
    total = np.zeros_like(np.asarray(parts[0], np.float32))
    for p in parts:
        total = total + np.asarray(p, np.float32)
    return total


@pytest.mark.slow
def test_same_bits_on_one_two_and_four_owners_and_a_partition_dependent_combine_breaks_them(rctx, replica, monkeypatch):
    hashes = {}
    for owners in (1, 2, 4):
        t, recs = _train(rctx, replica, owners)
        assert t.precision == "f32" and "power of two" in t.divisor and t.warning is None
        hashes[owners] = params_hash(t.params)
    assert len(set(hashes.values())) == 1, hashes
    print(f"f32 params sha256 after 2 steps, 1/2/4 owners: {hashes[1]}")
    # the control: each owner sums its own replicas, then the owners' sums are added (the partition's tree)
    broken = {}
    for owners in (1, 2, 4):
        cut = training.shares(4, owners)
        monkeypatch.setattr(training, "ordered_sum", lambda parts, cut=cut: _sequential(
            [_sequential(parts[r.start:r.stop]) for r in cut]) if len(parts) == 4 else _sequential(parts))
        t, _ = _train(rctx, replica, owners)
        broken[owners] = params_hash(t.params)
    monkeypatch.undo()
    assert len(set(broken.values())) > 1, broken
    # two owners' (r0+r1)+(r2+r3) is the fixed tree itself; one owner's and four owners' sequential sums are not
    assert broken[2] == hashes[2] and broken[1] == broken[4] != hashes[1], (hashes, broken)
    print(f"per owner, then across: {broken}")


@pytest.mark.slow
def test_the_f32_weight_gradients_differ_only_by_the_order_of_the_sums(rctx, replica):
    t = Trainer(rctx, replica, 4, InProcess([replica] * 4).call)
    rows = replica.data.epoch_order(1)[:64]
    results = replica.gradients(t.params, [rows[r * 16:(r + 1) * 16] for r in range(4)])
    shard = t.measure(results)
    assert set(shard) == set(contracting_steps(replica.plan)) and len(shard) == 7
    stats = [st for outs in shard.values() for st in outs.values()]
    assert len(stats) == 8 and not any("of_bound" in st for st in stats)           # no per-replica rounding stated
    assert all(st["of_order_bound"] <= 1.0 for st in stats), shard                   # order only, measured
    assert any(st["nonzero"] for st in stats) and max(st["max_rel"] for st in stats) < 1e-5
    from studio.engine.services.data_parallel import step_line
    rec = training.StepRecord(1, 1, 2.3, 0.1, {"owners": 0, "round_trip": 0, "tree": 0, "measure": 0, "driver": 0}, shard)
    assert "order only: " in step_line(rec) and "f32 weight gradients differ" in step_line(rec)
    print({n: {o: (st["max_rel"], st["of_order_bound"]) for o, st in outs.items()} for n, outs in shard.items()})
    # the control: the same replicas' outputs rounded per replica to bf16 are no longer order-only
    rounded = [{**x, "contracting": {n: {"inputs": c["inputs"], "outputs": {o: round_to(v, "bf16").astype(np.float32)
                                                                            for o, v in c["outputs"].items()}}
                                     for n, c in x["contracting"].items()}} for x in results]
    worse = t.measure(rounded)
    ratios = {n: max(st["of_order_bound"] for st in outs.values()) for n, outs in worse.items()}
    assert min(ratios.values()) > 1.0, ratios
    print("rounded per replica to bf16:", ratios)


@pytest.mark.slow
def test_owners_on_dask_at_f32_give_the_in_process_bits(tmp_path, monkeypatch, rctx, replica):
    from studio.engine.services import data_parallel
    monkeypatch.setenv("SCELLIS_HOME", str(rctx.trust.home))       # the owners' processes judge the same receipts
    r = data_parallel.train(F32, owners=2, steps=2, precision="f32", out_dir=tmp_path, ctx=rctx, prove=True)
    rec = r["record"]
    assert r["proved"] == [] and all(o["receipt"] == "valid" for o in rec["ops"].values()), rec["ops"]
    assert rec["precision"] == "f32" and rec["owners"] == 2 and len(rec["steps"]) == 2
    assert all("of_order_bound" in st for s in rec["steps"] for outs in s["shard"].values() for st in outs.values())
    local, _ = _train(rctx, replica, 1)
    assert rec["params_sha256"] == params_hash(local.params)
    with pytest.raises(StudioError) as e:
        data_parallel.train(F32, owners=2, steps=1, precision="bf16", out_dir=tmp_path, ctx=rctx)
    assert e.value.field == "--precision"
