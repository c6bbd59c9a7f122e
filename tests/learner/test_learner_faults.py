"""Faults (docs/learner.md "Faults"): an owner's Dask worker process is killed with a real signal
mid-run; the run goes back to its last checkpoint, reshards the dead owner's samples over the
remaining owners (none lost, none counted twice) and, under the canonical tree, ends bitwise
identical to a run where nothing died; at the next checkpoint boundary where the cluster has a
worker to spare (the nanny's restart, or the spare one), the run's owners are re-admitted with
their own partition, and the bits are still the same."""
import os
import signal

import numpy as np
import pytest
from learner_reference import bits, independent_run

from studio.engine.learner.owners import Owners, start_cluster
from studio.engine.learner.run import learn, reshard
from studio.engine.learner.system import load_system
from studio.engine.resources import ROOT

pytestmark = pytest.mark.slow           # Dask clusters, whole runs: the fast lane skips this file


@pytest.fixture(scope="module")
def client():
    cluster, client = start_cluster(4, memory_limit="512MiB")
    yield client
    client.close()
    cluster.close()


def killer(client, owner: int, after: int, n_owners: int):
    """on_step: after step ``after``, SIGKILL the worker process of ``owner`` (once). Waits until the
    nanny has brought back a worker an earlier test killed, so the owners are the ones named here."""
    client.wait_for_workers(4, timeout=180)
    team = Owners.on(client, n_owners)
    pid = team.pids()[owner]
    done = []

    def on_step(rec):
        if rec.step == after and not done:
            os.kill(pid, signal.SIGKILL)
            done.append(pid)
    return on_step, done


@pytest.mark.parametrize("every", [1, 2])
def test_a_killed_owner_loses_no_sample_and_the_run_ends_identical(client, tmp_path, every):
    system = load_system(ROOT / "learners" / "least_squares_momentum").with_shares([40, 33, 23])
    want_p, want_s = independent_run(system, 6)
    on_step, killed = killer(client, owner=1, after=3, n_owners=3)
    events = []
    res = learn(system, client=client, steps=6, checkpoint=tmp_path, checkpoint_every=every, on_step=on_step,
                on_event=events.append, readmit=False)
    assert killed, "the owner was never killed"
    assert (bits(res.params) == bits(want_p)).all() and (bits(res.state) == bits(want_s)).all()
    back = 3 if every == 1 else 2
    assert any("owner 1" in e and f"resuming from the checkpoint at step {back} on 2 owner(s)" in e for e in events), events
    assert len(res.system.owners) == 2 and sum(res.system.shares) == 96
    assert [r.step for r in res.records] == [1, 2, 3, 4, 5, 6]
    assert res.records[-1].shares == res.system.shares


def test_without_a_checkpoint_folder_the_driver_s_copy_is_the_checkpoint(client):
    system = load_system(ROOT / "learners" / "perceptron").with_shares([10, 50, 20])
    want_p, _ = independent_run(system, 4)
    on_step, killed = killer(client, owner=0, after=2, n_owners=3)
    events = []
    res = learn(system, client=client, steps=4, on_step=on_step, on_event=events.append)
    assert killed and (bits(res.params) == bits(want_p)).all()
    assert any("driver's copy of the last agreed step at step 2" in e for e in events), events


def test_resharding_keeps_every_sample_exactly_once():
    system = load_system(ROOT / "learners" / "kmeans_pull").with_shares([30, 0, 25, 35])
    after = reshard(system, [2])
    assert after.shares == [30 + 9, 0 + 8, 35 + 8]
    assert sorted(np.concatenate(after.owners).tolist()) == list(range(90))
    assert after.owners[0][:30].tolist() == list(range(30))             # survivors keep what they held


def test_under_the_per_owner_tree_a_fault_is_said_to_change_the_contract(client):
    import dataclasses

    from studio.engine.learner import combine
    system = dataclasses.replace(load_system(ROOT / "learners" / "online_mean"), tree="per-owner").with_shares([20, 20, 10])
    on_step, killed = killer(client, owner=2, after=1, n_owners=3)
    events = []
    res = learn(system, client=client, steps=3, on_step=on_step, on_event=events.append, readmit=False)
    assert killed and res.step == 3 and res.system.shares == [25, 25]
    assert combine.contract_hash(res.system) != combine.contract_hash(system)
    assert any(f"the contract is {combine.contract_hash(res.system)[:16]}" in e for e in events), events


def test_a_worker_back_is_readmitted_at_the_next_checkpoint_with_the_same_bits(client, tmp_path):
    system = load_system(ROOT / "learners" / "least_squares_momentum").with_shares([40, 33, 23])
    want_p, want_s = independent_run(system, 6)
    on_step, killed = killer(client, owner=1, after=2, n_owners=3)
    events = []
    res = learn(system, client=client, steps=6, checkpoint=tmp_path, checkpoint_every=2, on_step=on_step,
                on_event=events.append)
    assert killed and (bits(res.params) == bits(want_p)).all() and (bits(res.state) == bits(want_s)).all()
    assert any("resuming from the checkpoint at step 2 on 2 owner(s)" in e for e in events), events
    assert any("3 owners are re-admitted at the checkpoint of step 4" in e for e in events), events
    assert [r.step for r in res.records] == [1, 2, 3, 4, 5, 6]
    assert [len(r.shares) for r in res.records] == [3, 3, 2, 2, 3, 3]
    assert res.system.shares == [40, 33, 23] and res.records[-1].shares == [40, 33, 23]


def test_without_readmission_the_run_stays_on_the_survivors(client):
    system = load_system(ROOT / "learners" / "online_mean").with_shares([20, 20, 10])
    want_p, _ = independent_run(system, 4)
    on_step, killed = killer(client, owner=0, after=1, n_owners=3)
    res = learn(system, client=client, steps=4, on_step=on_step, readmit=False)
    assert killed and (bits(res.params) == bits(want_p)).all()
    assert [len(r.shares) for r in res.records] == [3, 2, 2, 2]
