"""The small ResNet of resources/workflows/resnet_digits.toml, trained data-parallel in bf16 on the 8×8
digits (docs/workflows.md, "Data-parallel training"; docs/bf16.md):

- its written-out gradients are the network's gradients: one replica's device gradients against an
  independent numpy f64 network (benchmarks/resnet_numpy.py: im2col and matmul, its own backward) at
  the same bf16 parameters and images; control: a backward that loses the first block's skip
  cotangent (its main path's taken twice instead) is caught, far outside the bf16 tolerance in the
  layer before the block, while every layer after it stays right;
- through owners on Dask: the same replicas give the same bits on 1, 2 and 4 owners, the loss falls,
  every weight-gradient node is measured at every step (exact where the batch splits the sum into
  exact pieces, the per-replica rounding otherwise), and a replica count that is not a power of two
  gets the divisor warning.

Every op is proven once per run (the proof store); the owners judge the receipts in this test's user
folder like any process would."""
import sys
from pathlib import Path

import numpy as np
import pytest

from studio.engine.precision import round_to
from studio.engine.sharding.training import Replica, Trainer, contracting_steps, params_hash

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from benchmarks.resnet_numpy import loss_and_grads  # noqa: E402  (the peer lives with the benchmarks)

RESNET = REPO / "resources" / "workflows" / "resnet_digits.toml"

pytestmark = pytest.mark.slow          # every test needs the network's 15 ops proven (once per run)


@pytest.fixture(scope="module")
def rctx(module_ctx, proof_store):
    """This module's context (its own user folder), every op of the network proven there once (the
    proof store: once per run), its regenerated corpora remembered for every Replica made on it."""
    from proof_store import proven
    r = Replica(str(RESNET), allow_unverified=True, ctx=module_ctx)
    for pkg in {sp.pkg.hash: sp.pkg for sp in r.plan.steps.values()}.values():
        assert proven(proof_store, module_ctx, pkg)["verdict"] == "pass", pkg.id
    return module_ctx


@pytest.fixture(scope="module")
def replica(rctx):
    return Replica(str(RESNET), ctx=rctx)                  # every receipt valid: nothing allowed unverified


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _oracle(replica, rows):
    params = {n: np.asarray(replica.plan.host[n][0]).astype(np.float64) for n in replica.grad_keys}
    x = np.asarray(round_to(replica.data.images[rows], "bf16")).astype(np.float64)
    return loss_and_grads(params, x, replica.data.one_hot(rows), dtype=np.float64)


def test_the_written_out_gradients_are_the_networks(replica):
    rows = replica.data.epoch_order(1)[:16]
    params = {n: np.asarray(replica.plan.host[n][0]).astype(np.float32) for n in replica.grad_keys}
    (got,) = replica.gradients(params, [rows])
    loss, grads, _ = _oracle(replica, rows)
    assert abs(got["loss"] - loss) < 0.02 * abs(loss)
    errors = {n: _rel(got["grads"][n], grads[n]) for n in grads}
    assert max(errors.values()) < 0.05, errors                       # bf16 activations and gradients
    # every weight gradient is a batch-contracting node, reported with its inputs for the shard report
    assert set(got["contracting"]) == set(contracting_steps(replica.plan)) and len(got["contracting"]) == 7


def test_a_backward_that_drops_the_residual_cotangent_is_caught(tmp_path, rctx):
    text = RESNET.read_text()
    old = 'inputs = { a = "g_a1_main.dx", b2 = "g_s2.dx" }'
    assert old in text
    bad = tmp_path / "resnet_digits.toml"
    bad.write_text(text.replace(old, 'inputs = { a = "g_a1_main.dx", b2 = "g_a1_main.dx" }'))
    (tmp_path / "resnet_digits").mkdir()
    (tmp_path / "resnet_digits" / "digits.csv.gz").write_bytes((RESNET.parent / "resnet_digits" / "digits.csv.gz").read_bytes())
    broken = Replica(str(bad), ctx=rctx)
    rows = broken.data.epoch_order(1)[:16]
    params = {n: np.asarray(broken.plan.host[n][0]).astype(np.float32) for n in broken.grad_keys}
    (got,) = broken.gradients(params, [rows])
    _, grads, _ = _oracle(broken, rows)
    errors = {n: _rel(got["grads"][n], grads[n]) for n in grads}
    assert errors["f_stem"] > 0.2, errors                             # the layer before the first block's skip
    assert max(v for n, v in errors.items() if n != "f_stem") < 0.05, errors   # the ones after it are still right


class InProcess:
    """Owners as plain objects in this process: the same calls the Dask owners get (the Dask path
    itself runs in test_data_parallel_owners_on_dask)."""

    def __init__(self, replicas):
        self.replicas = replicas

    def call(self, method, args):
        return [method(r, *a) for r, a in zip(self.replicas, args)]


def test_same_bits_on_one_two_and_four_owners_and_every_weight_gradient_measured(rctx, replica):
    hashes, steps = {}, {}
    for owners in (1, 2, 4):
        t = Trainer(rctx, replica, owners, InProcess([replica] * owners).call)
        order = replica.data.epoch_order(1)
        recs = [t.step(order[k * 64:(k + 1) * 64], k + 1, 1) for k in range(2)]
        hashes[owners], steps[owners] = params_hash(t.params), recs
    assert len(set(hashes.values())) == 1, hashes
    rec = steps[4][1]
    assert set(rec.shard) == set(contracting_steps(replica.plan))
    # the bf16 weight gradients round per replica: somewhere the collective differs from the whole node
    conv = [st for n, outs in rec.shard.items() for st in outs.values() if n.startswith("g_f_")]
    assert len(conv) == 6 and any(st["nonzero"] for st in conv)
    assert all(st["of_bound"] <= 1.0 for st in conv), conv         # within half an ulp per rounding, as stated
    assert "power of two" in t.divisor and t.warning is None


def _variant(tmp_path, *edits):
    text = RESNET.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    (tmp_path / "resnet_digits").mkdir(exist_ok=True)
    (tmp_path / "resnet_digits" / "digits.csv.gz").write_bytes((RESNET.parent / "resnet_digits" / "digits.csv.gz").read_bytes())
    path = tmp_path / "resnet_digits.toml"
    path.write_text(text)
    return path


def test_three_replicas_get_the_divisor_warning(tmp_path, rctx):
    three = Replica(str(_variant(tmp_path, ("batch = 64", "batch = 48"), ("replicas = 4", "replicas = 3"))), ctx=rctx)
    t = Trainer(rctx, three, 3, InProcess([three] * 3).call)
    assert "not a power of two" in t.divisor and "3 replicas is not a power of two" in t.warning
    assert "g_f_stem" in t.warning                                    # a bf16 node the scaled cotangent reaches


def test_owners_on_dask_give_the_in_process_bits_and_a_record(tmp_path, monkeypatch, rctx, replica):
    from studio.engine.services import data_parallel
    monkeypatch.setenv("SCELLIS_HOME", str(rctx.trust.home))       # the owners' processes judge the same receipts
    r = data_parallel.train(RESNET, owners=2, steps=2, out_dir=tmp_path, ctx=rctx, prove=True)
    rec = r["record"]
    assert r["proved"] == [] and all(o["receipt"] == "valid" for o in rec["ops"].values()), rec["ops"]
    assert rec["owners"] == 2 and rec["replicas"] == 4 and len(rec["steps"]) == 2 and len(rec["epochs"]) == 1
    assert all(set(s["shard"]) == set(contracting_steps(replica.plan)) for s in rec["steps"])
    assert 0.0 <= rec["epochs"][0]["accuracy"] <= 1.0 and Path(r["record_path"]).is_file()
    local = Trainer(rctx, replica, 1, InProcess([replica]).call)
    order = replica.data.epoch_order(1)
    for k in range(2):
        local.step(order[k * 64:(k + 1) * 64], k + 1, 1)
    assert rec["params_sha256"] == params_hash(local.params)       # Dask's owners, the same bits as one process
