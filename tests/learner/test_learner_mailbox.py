"""A same-host owner's mailbox (studio/engine/learner/mailbox.py, docs/learner.md "Owners"): real
files in /dev/shm (or a folder given), real mappings. The driver's box and the owner's are one
memory; a box with another key, size or name is not opened (the owner then goes by value, as one
on another host); a box is not made where the file system lacks room; the name is gone once
opened; the replica comparison is bit for bit (a NaN by its bits, a flipped bit seen); and an
owner's step through its box is its step by value: the same update, the same block sums, and the
replica the driver compares in place of the hash. The slow half (tests/learner/
test_learner_owners.py) runs whole learns through boxes and by value on a LocalCluster."""
import dataclasses
import os

import numpy as np
import pytest

from studio.engine.learner import combine, mailbox
from studio.engine.learner.program import parse_program
from studio.engine.learner.resident import Resident, apply_update, replica_hash
from studio.engine.learner.system import System

ROOT = mailbox.ROOT if os.path.isdir(mailbox.ROOT) else None


def bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


@pytest.fixture
def root(tmp_path):
    """Where boxes are made: /dev/shm where this host has it, else a test folder (the same code)."""
    return ROOT or str(tmp_path)


def test_the_driver_s_box_and_the_owner_s_are_one_memory_and_the_name_goes(root):
    address, box = mailbox.make(5, 2, 3, root=root)
    assert os.path.exists(address.path) and os.stat(address.path).st_mode & 0o077 == 0    # the driver's alone
    there = mailbox.attach(address)
    mailbox.unlink(address)
    assert not os.path.exists(address.path)                                    # nothing left behind
    box.mean[...] = np.arange(5, dtype=np.float32)
    assert (bits(there.mean) == bits(np.arange(5, dtype=np.float32))).all()
    there.sums[1] = -1.5
    there.params[...], there.state[...] = 2.0, 3.0
    assert box.sums.shape == (2, 5) and (box.sums[1] == -1.5).all() and (box.sums[0] == 0).all()
    assert (box.params == 2.0).all() and box.state.shape == (3,) and (box.state == 3.0).all()
    assert (box.mean == np.arange(5)).all()                                    # the arrays do not overlap
    mailbox.unlink(address)                                                    # a second unlink is harmless


def test_a_box_with_another_key_size_or_name_is_not_opened(root):
    address, _ = mailbox.make(4, 1, 0, root=root)
    try:
        assert mailbox.attach(dataclasses.replace(address, key=bytes(16))) is None     # as on another host
        assert mailbox.attach(dataclasses.replace(address, blocks=2)) is None
        assert mailbox.attach(dataclasses.replace(address, path=address.path + "-none")) is None
        assert mailbox.attach(address) is not None                                      # control
    finally:
        mailbox.unlink(address)


def test_no_box_where_the_file_system_lacks_room_or_the_folder_is_not_there(root, tmp_path, monkeypatch):
    before = set(os.listdir(root))
    monkeypatch.setattr(mailbox, "MARGIN", 1 << 62)                            # more than any disk has
    assert mailbox.make(4, 1, 0, root=root) is None
    assert set(os.listdir(root)) == before                                     # and no file made
    monkeypatch.undo()
    assert mailbox.make(4, 1, 0, root=str(tmp_path / "absent")) is None
    assert mailbox.make(1 << 20, 255, 0, root=root) is None                   # over BOX_MAX: by value
    made = mailbox.make(4, 1, 0, root=root)                                    # control
    assert made is not None
    mailbox.unlink(made[0])


def test_the_replica_is_compared_bit_for_bit(root):
    address, box = mailbox.make(3, 0, 2, root=root)
    mailbox.unlink(address)
    p, s = np.array([1.0, np.nan, -0.0], np.float32), np.array([5.0, np.inf], np.float32)
    box.params[...], box.state[...] = p, s
    assert box.same_replica(p, s)                                   # the same NaN bits: the same replica
    assert not box.same_replica(np.array([1.0, np.nan, 0.0], np.float32), s)     # -0.0 is not 0.0
    flipped = s.copy()
    flipped.view(np.uint32)[1] ^= 1
    assert not box.same_replica(p, flipped)
    other_nan = p.copy()
    other_nan.view(np.uint32)[1] ^= 1 << 22 | 1                     # still a NaN, other bits
    assert np.isnan(other_nan[1]) and not box.same_replica(other_nan, s)


def twins(sysm, root):
    """An owner by value and its twin with a mailbox (opened, its name gone): (plan root, blocks,
    the Resident's arguments, plain, boxed, the driver's box)."""
    root_node, blocks = combine.plan(sysm)
    args = (sysm.contribution, sysm.update, sysm.samples, blocks[0], "f32", sysm.rate, sysm.params, sysm.state)
    plain, boxed = Resident(*args), Resident(*args)
    address, box = mailbox.make(sysm.k, len(blocks[0]), sysm.m, root=root)
    assert boxed.attach(address)
    mailbox.unlink(address)
    return root_node, blocks, args, address, plain, boxed, box


def test_an_owners_step_through_its_box_is_its_step_by_value(root):
    upd = parse_program("for i in 0..k: state[i] := 0.9 * state[i] + mean[i]\n"
                        "for i in 0..k: param[i] := param[i] - rate * state[i]")
    con = parse_program("let r = sum(j in 0..k, pairwise: param[j] * sample[j]) - sample[k]\n"
                        "for i in 0..k: contrib[i] := r * sample[i]")
    rng = np.random.default_rng(3)
    k, n = 6, 9
    samples = rng.normal(size=(n, k + 1)).astype(np.float32)
    sysm = System.build(k=k, s=k + 1, m=k, contribution=con, update=upd, params=rng.normal(size=k), state=np.zeros(k),
                        rate=0.05, samples=samples, owners=[list(range(n))])
    root_node, blocks, args, address, plain, boxed, box = twins(sysm, root)
    assert not Resident(*args).attach(dataclasses.replace(address, key=bytes(16)))   # not there: by value
    _, want, _ = plain.advance(None, None, True)
    assert boxed.advance_boxed(False, None, True) == (None, True, pytest.approx(0, abs=60))
    assert all((bits(a) == bits(b)).all() for a, b in zip(box.sums, want))
    for _ in range(3):
        mu = combine.mean(combine.evaluate_plan(root_node, dict(zip(blocks[0], want))), n)
        h, want, _ = plain.advance(mu, None, True)
        box.mean[...] = mu
        got, more, _ = boxed.advance_boxed(True, None, True)
        assert got is None and more
        assert all((bits(a) == bits(b)).all() for a, b in zip(box.sums, want))
        p, s = plain.replica()
        assert box.same_replica(p, s) and replica_hash(box.params, box.state) == h
    _, more, _ = boxed.advance_boxed(True, None, False)                 # the last step: no sums
    assert not more and box.same_replica(*apply_update(sysm.update, p, s, mu, sysm.rate))
    assert np.shares_memory(boxed.replica()[0], boxed.box.params)       # an update program's replica lives there
    p0, s0 = (np.array(a) for a in boxed.replica())
    boxed.advance_boxed(True, 2, True)                                  # control: a flipped bit is seen
    assert not box.same_replica(*apply_update(sysm.update, p0, s0, mu, sysm.rate))
    flipped = np.concatenate(apply_update(sysm.update, p0, s0, mu, sysm.rate, inject=2))
    assert (bits(np.concatenate([box.params, box.state])) == bits(flipped)).all()   # the same flip as by value


class Momentum:
    """An update rule that is not a program (the copy path): its replica is copied into the box."""
    hash = "momentum-rule"

    def apply(self, params, state, mean, rate):
        v = np.float32(0.9) * state + mean
        return params - rate * v, v


def test_a_rule_that_is_not_a_program_copies_its_replica_into_the_box(root):
    rng = np.random.default_rng(5)
    k, n = 4, 5
    con = parse_program("for i in 0..k: contrib[i] := sample[i] * param[i]")
    sysm = System.build(k=k, s=k, m=k, contribution=con, update=parse_program(
        "for i in 0..k: param[i] := param[i]"), params=rng.normal(size=k), state=np.zeros(k), rate=0.1,
        samples=rng.normal(size=(n, k)), owners=[list(range(n))])
    sysm = dataclasses.replace(sysm, update=Momentum())
    root_node, blocks, args, address, plain, boxed, box = twins(sysm, root)
    assert not np.shares_memory(boxed.replica()[0], boxed.box.params)   # the rule's replica stays its own
    _, want, _ = plain.advance(None, None, True)
    boxed.advance_boxed(False, None, True)
    for inject in (None, None, 1):
        mu = combine.mean(combine.evaluate_plan(root_node, dict(zip(blocks[0], want))), n)
        h, want, _ = plain.advance(mu, inject, True)
        box.mean[...] = mu
        boxed.advance_boxed(True, inject, True)
        assert box.same_replica(*plain.replica()) and replica_hash(box.params, box.state) == h
        assert all((bits(a) == bits(b)).all() for a, b in zip(box.sums, want))
    assert not box.same_replica(*apply_update(sysm.update, *boxed.replica(), mu, sysm.rate))   # control
