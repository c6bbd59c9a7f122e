"""The learner's bf16 combine (docs/learner.md "bf16 combine", docs/bf16.md "The learner at bf16"):
each owner's partial sum rounded once to bf16, the rounded partials added
in f32 in the per-owner tree, the mean divided by N. The shipped least_squares_bf16 trains on real
Dask owners on 1, 2, 4 and 3 owners, bit for bit as an independent implementation written from the
contract's words (its own tree, ml_dtypes' f32 -> bf16 rounding); one owner is the global rounding
rnd(S)/N; more owners differ from one, by the amounts the shard report measures, and the shard
report's in-process run is the Dask run's bits. The f32 canonical statement (zero difference
between owner counts) is tests/learner/test_learner_owners.py::test_the_examples_train_to_the_same_bits_on_any_owners;
here it is restated on the same data. Controls: a bf16 contract hash is not the f32 one, an f32
checkpoint is refused by a bf16 run, the canonical tree is refused with bf16, and a truncating
rounding gives other bits. The divisor warning: `scellis learn` and the Learner panel, at 3 owners
and not at 2 or 4."""
from __future__ import annotations

import re
import shutil
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from learner_reference import bits, independent_tree

from studio.cli import main
from studio.engine.errors import StudioError
from studio.engine.learner import combine
from studio.engine.learner.fingerprint import array_hash
from studio.engine.learner.owners import start_cluster
from studio.engine.learner.run import learn
from studio.engine.learner.system import load_system
from studio.engine.resources import ROOT
from studio.engine.sharding.learner import (
    BF16_NODE,
    bf16_system,
    learn_warning,
    learner_lines,
    learner_run,
)

BF16 = ROOT / "learners" / "least_squares_bf16"
F32 = ROOT / "learners" / "least_squares_momentum"
STEPS = 6


@pytest.fixture(scope="module")
def client():
    cluster, client = start_cluster(4, memory_limit="512MiB")
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def system():
    return load_system(BF16)


def rnd_ml(a):
    """bf16 rounding by ml_dtypes (f32 -> bf16 is one correct rounding there), back as f32."""
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def independent_bf16_run(system, steps, rounding=rnd_ml):
    """From the words: per non-empty owner the tree over its list positions, rounded once; the tree
    over those in owner order; mean = numerator / f32(N); the update program."""
    params, state = system.params.copy(), system.state.copy()
    n = system.samples.shape[0]
    for _ in range(steps):
        partials = []
        for idx in system.owners:
            if idx.size:
                rows = np.stack([system.contribution.contributions(params, system.samples[i:i + 1])[0] for i in idx])
                partials.append(rounding(independent_tree(rows, 0, len(idx))))
        num = independent_tree(np.stack(partials), 0, len(partials))
        mean = np.array([np.float32(x) / np.float32(n) for x in num], np.float32)
        params, state = system.update.apply(params, state, mean, system.rate)
    return np.asarray(params, np.float32), np.asarray(state, np.float32)


def global_rounding_run(system, steps):
    """One device: the canonical f32 sum of every contribution rounded once, rnd(S)/N."""
    f32 = replace(system, tree="canonical", precision="f32").evenly(1)
    params, state = system.params.copy(), system.state.copy()
    for _ in range(steps):
        mean = np.divide(rnd_ml(combine.local_numerator(f32, params)), np.float32(system.samples.shape[0]),
                         dtype=np.float32)
        params, state = system.update.apply(params, state, mean, system.rate)
    return np.asarray(params, np.float32)


@pytest.fixture(scope="module")
def runs(system, client):
    """Dask runs of least_squares_bf16 on 1, 2, 4 and 3 owners (even shares)."""
    return {r: learn(bf16_system(system, r), client=client, steps=STEPS) for r in (1, 2, 4, 3)}


@pytest.mark.slow
@pytest.mark.parametrize("owners", [1, 2, 4, 3])
def test_bf16_trains_on_dask_owners_as_its_words_say(system, runs, owners):
    res = runs[owners]
    assert res.step == STEPS and all(r.agreed for r in res.records) and len(res.system.owners) == owners
    want_p, want_s = independent_bf16_run(bf16_system(system, owners), STEPS)
    assert np.array_equal(bits(res.params), bits(want_p)) and np.array_equal(bits(res.state), bits(want_s))
    report = learner_run(system, owners, STEPS)               # `scellis shard-report` in process: the same bits
    assert report.final_hash == res.params_hash
    assert report.contract_hash == res.contract_hash
    print("\n".join(learner_lines(system.name, report)))


def test_one_owner_is_the_global_rounding(system, runs):
    assert np.array_equal(bits(runs[1].params), bits(global_rounding_run(system, STEPS)))


@pytest.mark.parametrize("owners", [2, 4, 3])
def test_more_owners_round_per_owner_and_the_report_says_by_how_much(system, runs, owners):
    assert not np.array_equal(bits(runs[owners].params), bits(runs[1].params))
    assert runs[owners].contract_hash != runs[1].contract_hash          # the partition is in the contract
    w = learner_run(system, owners, STEPS).nodes[BF16_NODE]
    assert w["nonzero"] > 0 and 0 < w["mean_ulps"] <= w["max_ulps"] < 4 and 0 < w["max_rel"] < 0.05
    assert w["den"]["nonzero"] > 0 and w["den"]["max_ulps"] > 0


def test_at_f32_the_owner_count_changes_no_bit(system):
    """The f32 statement (rnd = id) on the same data; on Dask: test_learner_owners (all examples)."""
    f32 = replace(system, tree="canonical", precision="f32")
    p = system.params
    want = bits(combine.local_numerator(f32.evenly(1), p))
    for r in (2, 4, 3):
        assert np.array_equal(bits(combine.local_numerator(f32.evenly(r), p)), want)
        assert learner_run(system, r, 3).nodes["numerator (f32, canonical tree)"]["bitwise_steps"] == 3


def test_a_bf16_contract_is_not_the_f32_one(system):
    same_partition_f32 = replace(system, precision="f32")
    assert combine.contract_hash(system) != combine.contract_hash(same_partition_f32)
    assert "bf16: each non-empty owner's partial sum" in combine.order_text(system)
    assert "bf16" not in combine.order_text(same_partition_f32)


def test_a_truncating_rounding_gives_other_bits(system, runs):
    """The comparison can fail: rounding toward zero instead of to nearest even differs."""
    def truncate(a):
        return (np.asarray(a, np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    p, _ = independent_bf16_run(bf16_system(system, 4), STEPS, truncate)
    assert not np.array_equal(bits(p), bits(runs[4].params))
    f32_p, _ = independent_bf16_run(bf16_system(system, 4), STEPS, lambda a: np.asarray(a, np.float32))
    assert not np.array_equal(bits(f32_p), bits(runs[4].params))    # no rounding at all: other bits too


def test_an_f32_checkpoint_is_refused_by_a_bf16_run_and_a_bf16_one_resumes(system, client, tmp_path):
    sysm = bf16_system(system, 2)
    learn(replace(sysm, precision="f32"), client=client, steps=2, checkpoint=tmp_path / "f32")
    with pytest.raises(StudioError, match="contract_hash") as e:
        learn(sysm, client=client, steps=3, checkpoint=tmp_path / "f32", resume=True)
    assert e.value.field == "contract_hash"
    learn(sysm, client=client, steps=2, checkpoint=tmp_path / "bf16")
    res = learn(sysm, client=client, steps=STEPS, checkpoint=tmp_path / "bf16", resume=True)
    assert "resumed from the checkpoint at step 2" in res.events
    want, _ = independent_bf16_run(sysm, STEPS)
    assert np.array_equal(bits(res.params), bits(want))


def test_the_canonical_tree_is_refused_with_bf16(tmp_path):
    text = (BF16 / "learner.toml").read_text().replace('tree = "per-owner"', 'tree = "canonical"')
    for f in BF16.iterdir():                         # the learner's own files beside it
        if f.name != "learner.toml":
            shutil.copy2(f, tmp_path / f.name)
    (tmp_path / "learner.toml").write_text(text)
    with pytest.raises(StudioError, match="needs the per-owner tree") as e:
        load_system(tmp_path)
    assert e.value.field == "combine.precision" and e.value.line
    with pytest.raises(StudioError, match="needs the per-owner tree"):
        replace(load_system(F32), precision="bf16").validate()


def test_the_divisor_warning_names_the_count_and_the_node(system):
    assert learn_warning(system) is None                       # the file's 4 owners
    assert learn_warning(system, 2) is None and learn_warning(system, 1) is None
    w = learn_warning(system, 3)
    assert w.startswith("3 replicas is not a power of two") and BF16_NODE in w
    assert learn_warning(load_system(F32), 3) is None          # an f32 combine: nothing to warn about
    six = system.with_shares([20, 20, 0, 20, 20, 16])          # 5 non-empty owners combine
    assert learn_warning(six).startswith("5 replicas")


def final_hash(out: str) -> str:
    return re.search(r"final parameter hash ([0-9a-f]{64})", out).group(1)


@pytest.mark.slow
@pytest.mark.parametrize("owners", [3, 2, 4])
def test_scellis_learn_warns_at_3_owners_only(system, capsys, owners):
    assert main(["learn", "least_squares_bf16", "--owners", str(owners), "--steps", "2"]) == 0
    out = capsys.readouterr().out
    warned = [ln for ln in out.splitlines() if ln.startswith("warning: ")]
    if owners == 3:
        assert len(warned) == 1 and "3 replicas is not a power of two" in warned[0] and BF16_NODE in warned[0]
    else:
        assert warned == []
    assert "bf16: each non-empty owner's partial sum" in out
    assert f"contract {combine.contract_hash(bf16_system(system, owners))}" in out     # the split run, named
    want, _ = independent_bf16_run(bf16_system(system, owners), 2)
    assert final_hash(out) == array_hash(want)


def test_the_learner_panel_shows_the_warning(qtbot):
    from studio.app.tools.learner_view import LearnerPanel
    panel = LearnerPanel()
    qtbot.addWidget(panel)
    panel.choice.setCurrentText("least_squares_bf16")
    assert "bf16" in panel.info.text() and panel.warning.text() == ""
    panel.owners.setValue(3)
    assert "3 replicas is not a power of two" in panel.warning.text() and BF16_NODE in panel.warning.text()
    assert combine.contract_hash(panel.system.evenly(3))[:16] in panel.info.text()      # the split it will run
    panel.owners.setValue(4)
    assert panel.warning.text() == ""
    panel.owners.setValue(3)
    panel.choice.setCurrentText("least_squares_momentum")
    assert panel.warning.text() == ""


@pytest.mark.slow
def test_scellis_shard_report_on_the_bf16_learner_is_the_dask_runs_bits(system, runs, capsys):
    """`scellis shard-report FILE --replicas 3` (through the device worker) reports the bf16 node as
    rounded per replica, warns, and names the final parameter hash of the Dask run on 3 owners."""
    assert main(["shard-report", str(BF16), "--replicas", "3", "--steps", str(STEPS)]) == 0
    out = capsys.readouterr().out
    assert f"final parameter hash {runs[3].params_hash}" in out
    assert re.search(r"node weight gradient \(bf16 mean\) +rounded per replica +Σ_r rnd\(S_r\)/N − rnd\(S\)/N as run: "
                     r"[1-9]\d*/18 non-zero", out)
    assert "bit for bit at 6/6 steps" in out and "warning: 3 replicas is not a power of two" in out


@pytest.mark.slow
def test_learn_refuses_a_bf16_canonical_system_built_by_replace(system):
    with pytest.raises(StudioError, match="needs the per-owner tree"):
        learn(replace(system, tree="canonical"), steps=1)
