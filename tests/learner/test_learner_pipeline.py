"""A pipeline as the contribution (docs/learner.md "A pipeline as the contribution"): the contribution
of one sample (a recording: the story's spiky signal at its own seed) is the reverse-mode gradient of
the training workflow's loss — trainable gain, offset and FIR taps before the user's windowed median
— through every op's declared VJP on the device. It trains data-parallel: owners (Dask worker
processes, each with its own device context) give the same bits for 1 and 2 owners, the same bits as
the tree over gradients computed here, and the loss falls."""
import numpy as np
import pytest
from learner_reference import bits, independent_tree
from proof_store import proven

from studio.engine.learner.owners import start_cluster
from studio.engine.learner.run import learn
from studio.engine.learner.system import pipeline_system
from studio.engine.proof.gradcheck import gradcheck
from studio.engine.proof.receipts import write_gradcheck_receipt
from studio.engine.resources import ROOT

OPS = ("core/signal/fir@1", "core/math/multiply@1", "core/math/add@1", "user/demo/windowed_median@1",
       "core/reduce/mse@1")
SEEDS = [3, 11, 5, 8]
STEPS = 2


@pytest.fixture(scope="module")
def setup(module_ctx, tmp_path_factory):
    """Passing gradcheck receipts for the pipeline's VJPs, sealed with the key of a user data
    folder the owners open too; the shipped training workflow at a CI size."""
    home = module_ctx.trust.home
    receipts = tmp_path_factory.mktemp("gradcheck")
    for op in OPS:
        pkg = module_ctx.catalog.resolve(op)
        rep = gradcheck(module_ctx, pkg)
        assert rep.verdict == "pass", (op, rep.why)
        write_gradcheck_receipt(pkg, rep, receipts, seal=module_ctx.seal)
    wf = tmp_path_factory.mktemp("wf") / "train_median.toml"
    text = (ROOT / "workflows" / "train_median.toml").read_text()
    assert "n = 1000000" in text
    wf.write_text(text.replace("n = 1000000", "n = 256"))
    cluster, client = start_cluster(2, memory_limit="2GiB")
    yield {"home": home, "receipts": receipts, "wf": wf, "client": client}
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def device_vjps_proven(setup, module_ctx, proof_store):
    """Conformance receipts, in the folder the owners open, for the ops whose VJPs run on the device:
    no owner proves one again (each would run its whole corpus in its own process, and the driver
    once more). Each proof is the run's one conformance of that content (proof_store.py), its receipt
    sealed here. The slow tests train; the fast ones only read the files."""
    for op in OPS:
        pkg = module_ctx.catalog.resolve(op)
        if pkg.contract.backward_kernel is not None:
            entry = proven(proof_store, module_ctx, pkg)
            assert entry["verdict"] == "pass", (op, "\n".join(entry["lines"]))
    return setup


def system(setup, module_ctx, **kw):
    return pipeline_system(setup["wf"], SEEDS, rate=0.5, receipts=setup["receipts"], home=setup["home"],
                           allow_unverified=True, ctx=module_ctx, steps=STEPS, **kw)


@pytest.mark.slow
def test_the_median_pipeline_trains_data_parallel_to_the_same_bits(device_vjps_proven, module_ctx):
    setup = device_vjps_proven
    one = system(setup, module_ctx)
    assert (one.k, one.s, one.m) == (7, 1, 0)                # gain, offset, 5 taps; a sample is a seed
    r2 = learn(one.with_shares([1, 3]), client=setup["client"], steps=STEPS)      # two owners, uneven
    # the same tree over gradients computed in this process, with this process's device
    rule = one.contribution.use(module_ctx)
    p = one.params.copy()
    for _ in range(STEPS):
        rows = rule.contributions(p, one.samples)
        mean = independent_tree(rows, 0, len(SEEDS)) / np.float32(len(SEEDS))
        p = (p - np.float32(0.5) * mean).astype(np.float32)
    assert (bits(r2.params) == bits(p)).all()
    before = rule.losses(one.params, one.samples).mean()
    after = rule.losses(r2.params, one.samples).mean()
    assert after < before, (before, after)
    assert all(r.agreed for r in r2.records)


def test_a_workflow_without_a_loss_is_refused(setup, tmp_path):
    from studio.engine.errors import StudioError
    from studio.engine.learner.pipeline import WorkflowGradient
    text = setup["wf"].read_text()
    wf = tmp_path / "no_train.toml"
    wf.write_text(text[:text.index("[train]")])
    with pytest.raises(StudioError, match="no \\[train\\] section"):
        WorkflowGradient(wf, ["signal.seed"])
    with pytest.raises(StudioError, match="the workflow has no step 'sig'"):
        WorkflowGradient(setup["wf"], ["sig.seed"])


def pipeline_file(setup, folder, *, k=7, bind='["signal.seed"]'):
    np.save(folder / "seeds.npy", np.array(SEEDS, np.float32).reshape(-1, 1))
    p = folder / "learner.toml"
    p.write_text(f"""[learner]
name = "median_pipeline"
k = {k}
s = 1
m = 0
rate = 0.5
steps = {STEPS}
contribution = {{ workflow = "{setup['wf']}", bind = {bind}, receipts = "{setup['receipts']}", allow_unverified = true }}
update = "sgd.assign"
samples = "seeds.npy"

[owners]
shares = [3, 1]
""")
    (folder / "sgd.assign").write_text("for i in 0..k: param[i] := param[i] - rate * mean[i]\n")
    return p


@pytest.mark.slow
def test_the_pipeline_learner_as_a_file_on_the_command_line(device_vjps_proven, module_ctx, tmp_path, monkeypatch,
                                                             capsys):
    setup = device_vjps_proven
    import re

    from studio.cli import main
    from studio.engine.learner.system import load_system
    monkeypatch.setenv("SCELLIS_HOME", str(setup["home"]))        # the owners judge the receipts with this key
    path = pipeline_file(setup, tmp_path)
    s = load_system(path)
    assert (s.k, s.shares) == (7, [3, 1]) and s.params.tolist() == pytest.approx([1, 0, .2, .2, .2, .2, .2])
    want = learn(s, client=setup["client"], steps=STEPS)
    assert main(["learn", str(path), "--owners", "2", "--steps", str(STEPS)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"final parameter hash ([0-9a-f]{64})", out).group(1) == want.params_hash
    assert len([ln for ln in out.splitlines() if ln.startswith("step ") and "agree" in ln]) == STEPS


@pytest.mark.slow
def test_a_pipeline_file_with_the_wrong_sizes_is_refused(setup, tmp_path, monkeypatch):
    from studio.engine.errors import StudioError
    from studio.engine.learner.system import load_system
    with pytest.raises(StudioError, match="sealed in another user folder"):  # this test's own user: no receipts
        load_system(pipeline_file(setup, tmp_path))
    monkeypatch.setenv("SCELLIS_HOME", str(setup["home"]))
    with pytest.raises(StudioError, match=r"k = 6, the workflow's trainable sources \(gain, offset, taps\) hold 7"):
        load_system(pipeline_file(setup, tmp_path, k=6))
    with pytest.raises(StudioError, match="bind names 2 step parameters, a sample has s = 1 words") as e:
        load_system(pipeline_file(setup, tmp_path, bind='["signal.seed", "signal.n"]'))
    assert e.value.line == 8
