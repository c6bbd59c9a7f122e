"""Training through the median (docs/workflows.md, "Training"): a gain, an offset and FIR taps before
the user's windowed median learn to undo a known distortion of the story signal; the loss (MSE
against the clean signal) falls at least tenfold, every VJP on the device; the composite rung gives
the same gradients at w times the memory; a nondifferentiable median is refused by name; checkpoints
are hash-verified and resume exactly. Small sizes: seconds on two cores."""
import json
import re
import shutil

import numpy as np
import pytest
from conftest import MEDIAN, _authored
from proof_store import proven

from studio.engine.errors import StudioError
from studio.engine.proof.gradcheck import gradcheck
from studio.engine.proof.receipts import write_gradcheck_receipt
from studio.engine.resources import ROOT
from studio.engine.services.workflows import train as train_use_case
from studio.engine.workflow import checkpoint as ckpt
from studio.engine.workflow.optim import Optimizer
from studio.engine.workflow.spec import parse_workflow
from studio.engine.workflow.train import Trainer, swapped
from studio.engine.workflow.train_record import compare_rungs

SHIPPED = ROOT / "workflows" / "train_median.toml"
COMPOSITE = "user/demo/windowed_median_composite@1"
OPS = ("core/signal/fir@1", "core/math/multiply@1", "core/math/add@1", "user/demo/windowed_median@1",
       "core/reduce/mse@1", "core/shape/unfold@1", "core/reduce/median_rows@1")


@pytest.fixture(scope="module")
def reports(module_ctx):
    """Gradcheck reports for every declared VJP the pipeline uses (each must pass)."""
    out = {}
    for op in OPS:
        pkg = module_ctx.catalog.resolve(op)
        rep = gradcheck(module_ctx, pkg)
        assert rep.verdict == "pass", (op, rep.why)
        out[op] = (pkg, rep)
    return out


@pytest.fixture(scope="module")
def ledger(module_ctx, reports, tmp_path_factory):
    """Their receipts, sealed with the module context's key, kept outside the repository. The tests
    train with ``module_ctx``: its key judges them."""
    root = tmp_path_factory.mktemp("gradcheck")
    for pkg, rep in reports.values():
        write_gradcheck_receipt(pkg, rep, root, seal=module_ctx.seal)
    return root


@pytest.fixture(scope="module")
def trained_ledger(module_ctx, ledger, reports, proof_store):
    """The ledger, and each device VJP's conformance receipt in the module context's folder: the
    run's one proof of it (proof_store.py), so the tape finds it valid (``ctx.proven``) instead of
    proving it again. For the tests that train on the device (slow); the fast one is refused first."""
    for pkg, _ in reports.values():
        if pkg.contract.backward_kernel is not None:
            assert proven(proof_store, module_ctx, pkg)["verdict"] == "pass", pkg.id
    return ledger


def small(tmp_path, *, n: int = 2048, steps: int = 30, optimizer: str = "adam", lr: float = 0.05, name="t.toml"):
    """The shipped training workflow at a CI size, written next to the test's files."""
    text = SHIPPED.read_text()
    for old, new in (("n = 1000000", f"n = {n}"), ("steps = 150", f"steps = {steps}"),
                     ('optimizer = "adam"', f'optimizer = "{optimizer}"'), ("learning_rate = 0.05", f"learning_rate = {lr}")):
        assert old in text
        text = text.replace(old, new)
    p = tmp_path / name
    p.write_text(text)
    return p, parse_workflow(text, file=str(p), base=tmp_path)


@pytest.mark.slow
@pytest.mark.usefixtures("trained_ledger")     # the device VJPs' receipts first
def test_the_loss_falls_tenfold_through_the_median_on_the_device(module_ctx, ledger, tmp_path):
    _, wf = small(tmp_path)
    tr = Trainer(module_ctx, wf, receipts=ledger, allow_unverified=True)
    ladder = tr.ladder()
    assert any(line.startswith("median: user/demo/windowed_median@1: declared vjp, gradcheck passed, runs on the "
                               "device; subgradient:") for line in ladder)
    seen = []
    res = tr.run(on_step=seen.append)
    assert len(res.losses) == 30 == len(seen) and [s.step for s in seen] == list(range(1, 31))
    assert res.fall >= 10, (res.losses[0], res.final_loss)
    assert set(res.places) >= {"median", "filter", "gain_b", "offset_b", "scaled", "shifted", "loss"}
    assert set(res.places.values()) == {"device"}                    # every VJP ran on the device
    assert res.params["gain"].shape == (1,) and res.params["taps"].shape == (5,)
    assert not np.array_equal(res.params["taps"], res.initial["taps"])
    # the check can fail: with a learning rate too small to move, the loss does not fall tenfold
    still = Trainer(module_ctx, wf, receipts=ledger, allow_unverified=True,
                    optimizer=Optimizer("adam", 1e-7)).run(3)
    assert still.fall < 1.01


@pytest.mark.slow
@pytest.mark.usefixtures("trained_ledger")     # the device VJPs' receipts first
def test_the_device_gradients_are_the_reference_path_s(module_ctx, ledger, tmp_path):
    """At the trained sizes the device VJPs give the gradients the reference path gives (the check
    that found lavapipe's 65,535-iteration loop cap in fir's device VJP at 10^6 samples)."""
    _, wf = small(tmp_path, n=3000)
    on_device = Trainer(module_ctx, wf, receipts=ledger, allow_unverified=True)
    on_reference = Trainer(module_ctx, wf, receipts=ledger, allow_unverified=True, place="reference")
    loss_d, g_d, tape_d, _ = on_device.gradients(on_device.params)
    loss_r, g_r, tape_r, _ = on_reference.gradients(on_reference.params)
    assert {nd.vjp_place for nd in tape_d.nodes if nd.vjp_place} == {"device"}
    assert {nd.vjp_place for nd in tape_r.nodes if nd.vjp_place} == {"reference"}
    assert loss_d == loss_r
    for k in g_d:
        np.testing.assert_allclose(g_d[k], g_r[k], rtol=1e-4, atol=1e-7, err_msg=k)


@pytest.mark.slow
@pytest.mark.parametrize("optimizer, lr", [("sgd", 0.2), ("momentum", 0.05)])
@pytest.mark.usefixtures("trained_ledger")     # the device VJPs' receipts first
def test_sgd_and_momentum_lower_the_loss_too(module_ctx, ledger, tmp_path, optimizer, lr):
    _, wf = small(tmp_path, steps=25, optimizer=optimizer, lr=lr)
    res = Trainer(module_ctx, wf, receipts=ledger, allow_unverified=True).run()
    assert res.fall >= 10, (optimizer, res.losses[0], res.final_loss)


def test_the_optimizers_update_rules():
    p, g = {"w": np.array([1.0, -2.0], np.float32)}, {"w": np.array([0.5, -1.0])}
    assert Optimizer("sgd", 0.1).step(p, g)["w"].tolist() == pytest.approx([0.95, -1.9])
    mom = Optimizer("momentum", 0.1, momentum=0.5)
    q = mom.step(p, g)
    assert mom.step(q, g)["w"].tolist() == pytest.approx([1.0 - 0.05 - 0.075, -2.0 + 0.1 + 0.15])
    adam = Optimizer("adam", 0.1)
    assert adam.step(p, g)["w"].tolist() == pytest.approx([0.9, -1.9], rel=1e-6)   # first step: lr * sign(g)
    back = Optimizer.from_json(json.loads(json.dumps(adam.to_json())), {"w": (2,)})
    assert back.step(p, g)["w"].tolist() == adam.step(p, g)["w"].tolist()
    with pytest.raises(StudioError):
        Optimizer("adagrad", 0.1)


def nondifferentiable_median(tmp_path):
    dst = tmp_path / "median_nd"
    shutil.copytree(MEDIAN, dst, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    m = dst / "op.toml"
    text = m.read_text()
    text = text[:text.index("[backward]")] + '[backward]\ntext = "nondifferentiable"\n'
    m.write_text(text.replace('id = "user/demo/windowed_median@1"', 'id = "user/demo/median_nd@1"'))
    _authored(dst)
    return dst


def test_a_nondifferentiable_median_is_refused_naming_the_op_and_the_step(module_ctx, ledger, tmp_path):
    p, wf = small(tmp_path)
    nd = nondifferentiable_median(tmp_path)
    bad = swapped(wf, {"median": str(nd)})
    before = module_ctx.device.workgroup_clears
    with pytest.raises(StudioError) as e:
        Trainer(module_ctx, bad, receipts=ledger, allow_unverified=True)
    err = e.value
    assert "step 'median'" in err.message and "user/demo/median_nd@1 is declared nondifferentiable" in err.message
    line = wf.text.count("\n", 0, wf.text.index('op = "user/demo/windowed_median@1"')) + 1
    assert (err.file, err.line, err.field) == (str(p), line, "steps.median.op")
    assert module_ctx.device.workgroup_clears == before                    # refused before anything ran
    # the generator at the start is nondifferentiable too, but off the path from the parameters: no refusal
    assert Trainer(module_ctx, wf, receipts=ledger, allow_unverified=True).plan.steps["signal"].pkg.contract.backward.kind \
        == "nondifferentiable"


def test_a_declared_vjp_without_a_passing_gradcheck_is_refused_with_the_command(module_ctx, tmp_path):
    _, wf = small(tmp_path)
    with pytest.raises(StudioError) as e:
        Trainer(module_ctx, wf, receipts=tmp_path / "no_receipts", allow_unverified=True)
    assert re.search(r"step '(gain_b|offset_b|scaled|shifted|filter|median)'", e.value.message)
    assert "scellis gradcheck" in e.value.hint and "no passing gradcheck" in e.value.message


@pytest.mark.slow
@pytest.mark.usefixtures("trained_ledger")     # the device VJPs' receipts first
def test_the_composite_rung_gives_the_same_gradients_at_w_times_the_memory(module_ctx, ledger, tmp_path):
    _, wf = small(tmp_path, n=1024)
    c = compare_rungs(module_ctx, wf, "median", COMPOSITE, receipts=ledger, allow_unverified=True)
    declared, composite = c["rungs"]
    assert declared["op"] == "user/demo/windowed_median@1" and composite["op"] == COMPOSITE
    assert "core/shape/unfold@1" in composite["tape_ops"] and "core/reduce/median_rows@1" in composite["tape_ops"]
    assert c["bitwise_equal"] and declared["loss"] == composite["loss"]
    w = 7
    assert c["memory_ratio_allocated"] == pytest.approx(w + 1)       # u (m x w) and y, against y alone
    u = next(ln for ln in composite["memory"]["lines"] if " u: " in ln)
    m = 1024 - 5 + 1 - w + 1
    assert f"u: [{m}, {w}]  {4 * m * w} bytes" in u
    res = Trainer(module_ctx, swapped(wf, {"median": COMPOSITE}), receipts=ledger, allow_unverified=True).run(2)
    assert res.places["median"] == "device" and res.losses[1] < res.losses[0]


@pytest.mark.slow
@pytest.mark.usefixtures("trained_ledger")     # the device VJPs' receipts first
def test_a_checkpoint_resumes_exactly_and_a_tampered_one_is_refused(module_ctx, ledger, tmp_path):
    p, _ = small(tmp_path, n=1024)
    kw = dict(receipts=ledger, allow_unverified=True, out_dir=tmp_path)
    whole = train_use_case(module_ctx, p, steps=4, checkpoint="whole.json", record="whole.record.json", **kw)
    half = train_use_case(module_ctx, p, steps=2, checkpoint="half.json", record="half.record.json", **kw)
    rest = train_use_case(module_ctx, p, steps=4, resume=tmp_path / "half.json", checkpoint="rest.json",
                          record="rest.record.json", **kw)            # --steps: the step to reach, as `learn`'s
    assert rest["losses"] == whole["losses"] and rest["final_loss"] == whole["final_loss"]
    assert all(np.array_equal(rest["params"][k], whole["params"][k]) for k in whole["params"])
    rec = json.loads((tmp_path / "whole.record.json").read_text())
    assert rec["kind"] == "train" and rec["training"]["losses"] == whole["losses"]
    assert rec["training"]["checkpoint"]["file"] == str(tmp_path / "whole.json")
    assert {s["name"] for s in rec["steps"]} >= {"median", "loss"}
    assert next(s for s in rec["steps"] if s["name"] == "median")["gradcheck"]["status"] == "pass"
    assert half["losses"] == whole["losses"][:2]
    assert json.loads((tmp_path / "rest.json").read_text())["step"] == 4
    with pytest.raises(StudioError) as e:                                 # already there: nothing to run
        train_use_case(module_ctx, p, steps=2, resume=tmp_path / "half.json", checkpoint="again.json",
                       record="again.record.json", **kw)
    assert "already at step 2" in e.value.message and e.value.field == "--steps"
    d = json.loads((tmp_path / "whole.json").read_text())
    d["params"]["gain"]["values"][0] += 1.0
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(StudioError) as e:
        ckpt.read_checkpoint(tmp_path / "bad.json", module_ctx.seal)
    assert "edited after it was sealed" in e.value.message and e.value.field == "params.gain.values"
    d.pop("seal")                                                          # resealed: a consistent seal, a wrong array
    (tmp_path / "bad.json").write_text(json.dumps(module_ctx.seal.seal(d)))
    with pytest.raises(StudioError) as e:
        ckpt.checkpoint_params(ckpt.read_checkpoint(tmp_path / "bad.json", module_ctx.seal))
    assert "does not match its hash" in e.value.message and e.value.field == "params.gain"


OFFSET = """[workflow]
name = "offset"
record = "offset.record.json"
[steps.signal]
op = "core/signal/spiky_signal@1"
params = { n = 512, seed = 2 }
[sources.ones]
fill = 1.0
like = "signal.y"
[sources.offset]
values = [0.0]
trainable = true
[steps.bias]
op = "core/signal/fir@1"
inputs = { x = "ones", taps = "offset" }
[steps.shifted]
op = "core/math/add@1"
inputs = { a = "signal.y", b = "bias.y" }
[steps.goal]
op = "core/signal/affine@1"
inputs = { x = "signal.y" }
params = { scale = 1.0, offset = 0.5 }
[train]
prediction = "shifted.y"
target = "goal.y"
learning_rate = 0.1
steps = 3
"""


@pytest.mark.slow
def test_scellis_train_on_the_command_line(reports, tmp_path, capsys, ctx, proof_store):
    """In the device worker (a process of its own, judging receipts with this test's key: the
    device VJPs' conformance receipts are in its user folder, from the run's one proof of each)."""
    from studio.cli import main
    from studio.engine.home import studio_home
    from studio.engine.records.seal import Seal as ReceiptSeal
    here = tmp_path / "gradcheck"
    for pkg, rep in reports.values():
        write_gradcheck_receipt(pkg, rep, here, seal=ReceiptSeal(studio_home()))
        if pkg.contract.backward_kernel is not None:
            assert proven(proof_store, ctx, pkg)["verdict"] == "pass", pkg.id
    p = tmp_path / "offset.toml"
    p.write_text(OFFSET)
    png = tmp_path / "loss.png"
    rc = main(["train", str(p), "--allow-unverified", "--gradcheck-receipts", str(here), "--plot", str(png),
               "--out-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "fell" in out.out and "bias: core/signal/fir@1: declared vjp, gradcheck passed, runs on the device" in out.out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rec = json.loads((tmp_path / "offset.record.json").read_text())
    losses = rec["training"]["losses"]
    assert len(losses) == 3 and losses[2] < losses[0] and (tmp_path / "offset.checkpoint.json").is_file()
    big, _ = small(tmp_path, n=1024, steps=3, name="big.toml")
    rc = main(["train", str(big), "--allow-unverified", "--gradcheck-receipts", str(here), "--out-dir", str(tmp_path),
               "--swap", f"median={nondifferentiable_median(tmp_path)}"])
    out = capsys.readouterr()
    assert rc == 2 and "step 'median'" in out.err and "nondifferentiable" in out.err and "Traceback" not in out.err
