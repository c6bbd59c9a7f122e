"""bf16 in the learner (studio/engine/sharding/learner.py; docs/bf16.md): a shipped learner trained
with bf16 weight gradients on 1, 2, 4 and 3 replicas. Its contributions and its f32 canonical-tree
numerator are exact under sharding at every step; the bf16 weight gradient is rounded per
replica, by a reported non-zero amount (zero on one replica); 3 replicas warn. Negative control: a
per-owner combine tree is not exact at f32 across replica counts, and the report says so."""
from dataclasses import replace

import pytest
from conftest import REPO

from studio.engine.errors import StudioError
from studio.engine.learner.system import load_system
from studio.engine.sharding.kinds import EXACT, EXACT_AT_ID, ROUNDED
from studio.engine.sharding.learner import learner_lines, learner_run

LEARNER = REPO / "resources" / "learners" / "least_squares_momentum"
STEPS = 12


@pytest.fixture(scope="module")
def system():
    return load_system(LEARNER)


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [1, 2, 4, 3])
def test_bf16_weight_gradients_on_replicas(system, replicas):
    run = learner_run(system, replicas, STEPS)
    print("\n".join(learner_lines(system.name, run)))
    c, f, w = (run.nodes[k] for k in ("contribution", "numerator (f32, canonical tree)", "weight gradient (bf16 mean)"))
    assert (c["label"], f["label"], w["label"]) == (EXACT, EXACT_AT_ID, ROUNDED)
    assert c["bitwise_steps"] == f["bitwise_steps"] == STEPS
    if replicas == 1:
        assert w["max"] == 0.0 and run.final_vs_one["max"] == 0.0
    else:
        assert w["nonzero"] > 0 and 0 < w["mean_ulps"] <= w["max_ulps"] and w["den"]["nonzero"] > 0
        assert run.final_vs_one["nonzero"] > 0
    assert (run.warning is not None) == (replicas == 3)
    if run.warning:
        assert "3 replicas is not a power of two" in run.warning and "weight gradient (bf16 mean)" in run.warning


def test_a_partition_dependent_tree_is_caught_at_f32(system):
    per_owner = replace(system, tree="per-owner")
    run = learner_run(per_owner, 4, STEPS)          # 4 × 24 samples: not the canonical subtrees
    assert run.nodes["numerator (f32, canonical tree)"]["bitwise_steps"] < STEPS


def test_replicas_that_do_not_divide_the_samples_are_refused(system):
    with pytest.raises(StudioError, match="do not split into 5 equal replica shares"):
        learner_run(system, 5, 2)


def test_the_cli_reports_a_learner(capsys):
    from studio.cli import main
    assert main(["shard-report", str(LEARNER), "--replicas", "3", "--steps", "4"]) == 0
    out = capsys.readouterr().out
    assert "rounded per replica" in out and "bit for bit at 4/4 steps" in out and "warning: 3 replicas" in out
