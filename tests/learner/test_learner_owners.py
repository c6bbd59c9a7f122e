"""Owners on Dask distributed (docs/learner.md "Owners"): every shipped example trains with 1, 2, 3
and 7 owners (worker processes of a real LocalCluster) and uneven splits, an owner with no sample
among them, to parameters and state bitwise identical to an independent numpy implementation of
the canonical tree; every owner applies the update to its own replica and the hashes agree after
every step; a bit flipped on one owner stops the run naming the owners and the first differing
slot; an existing cluster is used through its scheduler address."""
import dataclasses
import os

import numpy as np
import pytest
from learner_reference import bits, independent_run

from studio.engine.errors import StudioError
from studio.engine.learner import owners as owners_module
from studio.engine.learner.owners import Disagreement, start_cluster
from studio.engine.learner.resident import replica_hash
from studio.engine.learner.run import learn
from studio.engine.learner.system import load_system
from studio.engine.resources import ROOT

pytestmark = pytest.mark.slow           # Dask clusters, whole runs: the fast lane skips this file

EXAMPLES = ("least_squares_momentum", "logistic_adam", "online_mean", "kmeans_pull", "perceptron")
STEPS = 3


@pytest.fixture(scope="module")
def client():
    cluster, client = start_cluster(7, memory_limit="512MiB")
    yield client
    client.close()
    cluster.close()


def placements(n, rng):
    yield "1 owner", [np.arange(n)]
    yield "2 owners, uneven", [np.arange(0, 5), np.arange(5, n)]
    yield "3 owners, one empty", [np.arange(0, n // 3), np.arange(0), np.arange(n // 3, n)]
    a = rng.integers(0, 7, n)
    a[:3] = 6                                        # owner 6 holds the first samples
    yield "7 owners, interleaved", [np.flatnonzero(a == o) for o in range(7)]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_examples_train_to_the_same_bits_on_any_owners(client, name):
    system = load_system(ROOT / "learners" / name)
    want_p, want_s = independent_run(system, STEPS)
    rng = np.random.default_rng(len(name))
    for label, owners in placements(system.samples.shape[0], rng):
        res = learn(system.with_owners(owners), client=client, steps=STEPS)
        assert (bits(res.params) == bits(want_p)).all(), label
        assert (bits(res.state) == bits(want_s)).all(), label
        assert len(res.records) == STEPS and all(r.agreed and len(set(r.hashes)) == 1 for r in res.records)
        assert res.records[-1].shares == [o.size for o in owners]
        assert len(set(res.records[-1].owners)) == len(owners)        # one worker process per owner


def test_the_shipped_split_and_the_steps_of_the_file(client):
    system = load_system(ROOT / "learners" / "least_squares_momentum")
    assert system.shares == [50, 31, 0, 15]
    res = learn(system, client=client, steps=2)
    assert [r.step for r in res.records] == [1, 2] and res.records[0].metric > res.records[1].metric


def test_a_flipped_bit_on_one_owner_stops_the_run_naming_the_owners_and_the_slot(client):
    system = load_system(ROOT / "learners" / "logistic_adam")            # k = 3, m = 8
    with pytest.raises(Disagreement) as e:
        learn(system, client=client, steps=4, inject={"owner": 2, "step": 2, "slot": 1})
    assert (e.value.step, e.value.owners, e.value.slot) == (2, (0, 2), 1)
    assert "owner 0 and owner 2 disagree: first differing slot 1 (parameter 1)" in e.value.message
    with pytest.raises(Disagreement, match=r"first differing slot 7 \(state word 4\)"):
        learn(system, client=client, steps=4, inject={"owner": 1, "step": 1, "slot": 7})
    seen = []
    learn(system, client=client, steps=2, on_step=seen.append)            # without the flip: agreement
    assert [r.agreed for r in seen] == [True, True]
    with pytest.raises(Disagreement, match="owner 0 and the driver's replica disagree") as e:   # one owner:
        learn(system, client=client, owners=1, steps=3, inject={"owner": 0, "step": 2, "slot": 0})   # the driver
    assert (e.value.step, e.value.owners, e.value.slot) == (2, (0, -1), 0)


def test_an_existing_cluster_through_its_scheduler_address(client):
    system = load_system(ROOT / "learners" / "online_mean")
    want, _ = independent_run(system, 2)
    res = learn(system, scheduler=client.scheduler.address, steps=2)
    assert (bits(res.params) == bits(want)).all()
    with pytest.raises(StudioError, match="cannot reach the Dask scheduler"):
        learn(system, scheduler="tcp://127.0.0.1:9", steps=1)


def test_more_owners_than_workers_share_workers_and_keep_the_bits(client):
    """8 owners on 7 workers: owner 7 is a second actor on owner 0's worker; the same bits."""
    system = load_system(ROOT / "learners" / "online_mean")
    want_p, want_s = independent_run(system, 2)
    res = learn(system, client=client, owners=8, steps=2)
    assert (bits(res.params) == bits(want_p)).all() and (bits(res.state) == bits(want_s)).all()
    where = res.records[-1].owners
    assert len(where) == 8 and len(set(where)) == 7 and where[7] == where[0]
    assert res.records[-1].paths == ["cpu (numpy)"] * 8


def test_one_round_trip_carries_only_sums_and_hashes(client):
    """The owners keep their replicas between steps (actors): the driver's replica after each step
    is the owners' (their hash), and a run of 3 steps starts each owner once."""
    system = load_system(ROOT / "learners" / "logistic_adam").with_shares([10, 50, 60])
    from studio.engine.learner.owners import Owners
    team = Owners.on(client, 3)
    team.load(system, system.params, system.state)
    before = [a.pid().result() for a in team._actors]
    from studio.engine.learner.resident import replica_hash
    for step in (1, 2, 3):
        out = team.step(step, more=step < 3)
        assert set(out.hashes) == {replica_hash(out.params, out.state)}
    assert [a.pid().result() for a in team._actors] == before == team.pids()
    reps = [a.replica().result() for a in team._actors]
    assert all((bits(p) == bits(out.params)).all() and (bits(s) == bits(out.state)).all() for p, s in reps)


def test_the_per_owner_tree_on_dask_is_the_partition_s_program(client):
    import dataclasses

    from studio.engine.learner import combine
    system = dataclasses.replace(load_system(ROOT / "learners" / "least_squares_momentum"), tree="per-owner")
    a, b = system.with_shares([50, 31, 0, 15]), system.with_shares([5, 91])
    ra, rb = learn(a, client=client, steps=STEPS), learn(b, client=client, steps=STEPS)
    for s, r in ((a, ra), (b, rb)):                           # each is its own partition's program, exactly
        p, st = s.params, s.state
        for _ in range(STEPS):
            p, st, _ = combine.local_step(s, p, st)
        assert (bits(r.params) == bits(p)).all()
    assert combine.contract_hash(a) != combine.contract_hash(b)
    assert r.records[-1].agreed


def test_a_wait_shorter_than_every_call_still_gets_every_result(client, monkeypatch):
    """Concurrent gathers share one request inside the Dask client: a driver that gave up waiting on
    one (cancelled it) cancelled the others' results, and a loaded machine then failed every run
    with "starting the owners ended with CancelledError"."""
    monkeypatch.setattr(owners_module, "WAIT_S", 0.0005)
    system = load_system(ROOT / "learners" / "online_mean")
    want_p, want_s = independent_run(system, STEPS)
    for n in (2, 7):
        n_samples = system.samples.shape[0]
        res = learn(system.with_owners([np.arange(o, n_samples, n) for o in range(n)]), client=client, steps=STEPS)
        assert (bits(res.params) == bits(want_p)).all() and (bits(res.state) == bits(want_s)).all(), n


def test_owners_on_this_host_go_through_mailboxes_with_the_same_bits_as_by_value(client, monkeypatch):
    """Owners on the driver's host get the mean and give their sums and replica through a mailbox
    (mailbox.py); by value (share_memory=False, as owners on another host) is the same bits and the
    same hashes at every step. No box's name is left behind. An owner that cannot open its box (its
    key is not the one there, as on another host) goes by value in the same run; a flipped bit on a
    boxed owner stops the run as one by value does."""
    from studio.engine.learner import mailbox
    from studio.engine.learner.owners import Owners
    system = load_system(ROOT / "learners" / "logistic_adam").with_shares([10, 50, 60])
    want_p, want_s = independent_run(system, STEPS)
    runs = {shared: learn(system, client=client, steps=STEPS, share_memory=shared) for shared in (True, False)}
    for res in runs.values():
        assert (bits(res.params) == bits(want_p)).all() and (bits(res.state) == bits(want_s)).all()
    assert [r.hashes for r in runs[True].records] == [r.hashes for r in runs[False].records]
    made, calls = mailbox.make, []

    def recorded(k, blocks, state, root=mailbox.ROOT):
        address, box = made(k, blocks, state, root)
        calls.append(address)
        return address, box
    monkeypatch.setattr(mailbox, "make", recorded)
    team = Owners.on(client, 3)
    team.load(system, system.params, system.state)
    assert team.boxed == [True, True, True] and len(calls) == 3
    assert not [a.path for a in calls if os.path.exists(a.path)]               # every name gone once opened
    assert Owners.on(client, 3, share_memory=False).boxed == []               # not loaded: no box at all

    def elsewhere(k, blocks, state, root=mailbox.ROOT):                      # owner 1's key not the box's
        address, box = recorded(k, blocks, state, root)
        return (dataclasses.replace(address, key=bytes(16)) if len(calls) == 5 else address), box
    monkeypatch.setattr(mailbox, "make", elsewhere)
    mixed = Owners.on(client, 3)
    mixed.load(system, system.params, system.state)
    assert mixed.boxed == [True, False, True]
    for step in range(1, STEPS + 1):
        out = mixed.step(step, more=step < STEPS)
        assert set(out.hashes) == {replica_hash(out.params, out.state)}
    assert (bits(out.params) == bits(want_p)).all() and not [a.path for a in calls if os.path.exists(a.path)]
    monkeypatch.undo()
    with pytest.raises(Disagreement, match=r"owner 0 and owner 2 disagree: first differing slot 1 \(parameter 1\)"):
        learn(system, client=client, steps=4, inject={"owner": 2, "step": 2, "slot": 1})
