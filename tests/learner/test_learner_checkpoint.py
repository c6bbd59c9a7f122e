"""Checkpoints (docs/learner.md "Checkpoints"): parameters, state, step, contract hash, combine order
and sample-to-owner assignment in one sealed file written atomically; a resumed run is bitwise
identical to an uninterrupted one; a corrupt, tampered or mismatching checkpoint is refused with
what differs."""
import base64
import json

import numpy as np
import pytest
from learner_reference import bits

from studio.engine.errors import StudioError
from studio.engine.home import studio_home
from studio.engine.learner import checkpoint as ckpt
from studio.engine.learner import combine
from studio.engine.learner.owners import start_cluster
from studio.engine.learner.run import learn
from studio.engine.learner.system import load_system
from studio.engine.records.seal import Seal
from studio.engine.resources import ROOT


@pytest.fixture(scope="module")
def client():
    cluster, client = start_cluster(3, memory_limit="512MiB")
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def adam():
    return load_system(ROOT / "learners" / "logistic_adam")


@pytest.mark.slow
def test_a_resumed_run_is_bitwise_the_uninterrupted_one(client, adam, tmp_path):
    whole = learn(adam, client=client, steps=6)
    first = learn(adam, client=client, steps=3, checkpoint=tmp_path)
    ck = ckpt.load(tmp_path)
    assert ck.step == 3 and ck.contract_hash == combine.contract_hash(adam)
    assert ck.order.startswith("canonical: binary tree over the global sample order")
    assert (ck.assignment == adam.assignment()).all()
    assert (bits(ck.params) == bits(first.params)).all() and (bits(ck.state) == bits(first.state)).all()
    rest = learn(adam, client=client, steps=6, checkpoint=tmp_path, resume=True)
    assert rest.step == 6 and [r.step for r in rest.records] == [4, 5, 6]
    assert (bits(rest.params) == bits(whole.params)).all() and (bits(rest.state) == bits(whole.state)).all()
    assert rest.metrics == whole.metrics                     # the history goes on where it stopped
    assert list((tmp_path).iterdir()) == [tmp_path / ckpt.FILE]  # no temp file left behind


@pytest.mark.slow
def test_resume_keeps_the_checkpoint_s_owners_or_takes_new_ones_under_the_canonical_tree(client, adam, tmp_path):
    whole = learn(adam, client=client, steps=4)
    learn(adam.with_shares([60, 60]), client=client, steps=2, checkpoint=tmp_path)
    same = learn(adam, client=client, steps=4, checkpoint=tmp_path, resume=True)
    assert same.system.shares == [60, 60]                    # the assignment written in the checkpoint
    learn(adam.with_shares([60, 60]), client=client, steps=2, checkpoint=tmp_path)
    other = learn(adam, client=client, owners=3, steps=4, checkpoint=tmp_path, resume=True)
    assert other.system.shares == [40, 40, 40]
    assert (bits(same.params) == bits(whole.params)).all() and (bits(other.params) == bits(whole.params)).all()


def written(adam, tmp_path, step=2):
    ck = ckpt.Checkpoint.of(adam, step, adam.params + 1, adam.state, [1.0, 0.5])
    ckpt.save(tmp_path, ck)
    return tmp_path / ckpt.FILE


def test_a_tampered_byte_is_refused(adam, tmp_path):
    p = written(adam, tmp_path)
    assert (bits(ckpt.load(tmp_path).params) == bits(adam.params + 1)).all()
    raw = bytearray(p.read_bytes())
    i = raw.index(b'"step": 2') + len('"step": ')
    raw[i] = ord("3")
    p.write_bytes(bytes(raw))
    with pytest.raises(StudioError, match="edited after it was sealed: step changed") as e:
        ckpt.load(tmp_path)
    assert e.value.field == "step"


def test_resealed_parameters_that_do_not_match_their_hash_are_refused(adam, tmp_path):
    p = written(adam, tmp_path)
    doc = json.loads(p.read_text())
    doc.pop("seal")
    doc["params"] = {"count": 3, "f32": base64.b64encode(np.zeros(3, np.float32).tobytes()).decode()}
    p.write_text(json.dumps(Seal(studio_home()).seal(doc)))        # resealed with this folder's own key
    with pytest.raises(StudioError, match="params do not match their hash"):
        ckpt.load(tmp_path)


def test_garbage_and_absence_are_refused_readably(tmp_path):
    with pytest.raises(StudioError, match="no checkpoint here"):
        ckpt.load(tmp_path)
    (tmp_path / ckpt.FILE).write_bytes(b"\x00{not json")
    with pytest.raises(StudioError, match="is not JSON"):
        ckpt.load(tmp_path)


def test_a_checkpoint_of_another_learner_is_refused_naming_what_differs(adam, tmp_path):
    written(adam, tmp_path)
    ck = ckpt.load(tmp_path)
    other = load_system(ROOT / "learners" / "perceptron")
    with pytest.raises(StudioError, match="data_hash: the samples") as e:
        ckpt.check_resumable(ck, other)
    assert "contract_hash" in e.value.message and e.value.field == "data_hash"
    import dataclasses
    faster = dataclasses.replace(adam, rate=np.float32(0.1))
    with pytest.raises(StudioError, match="data_hash"):
        ckpt.check_resumable(ck, faster)
    per_owner = dataclasses.replace(adam, tree="per-owner")
    with pytest.raises(StudioError, match="contract_hash: the contract differs") as e:
        ckpt.check_resumable(ck, per_owner)
    assert e.value.field == "contract_hash"
    ckpt.check_resumable(ck, adam.with_shares([1, 119]))      # canonical: any placement resumes


def test_resume_refuses_a_mismatching_checkpoint_before_anything_runs(adam, tmp_path):
    written(adam, tmp_path)
    with pytest.raises(StudioError, match="different learner"):
        learn(load_system(ROOT / "learners" / "perceptron"), client=None, checkpoint=tmp_path, resume=True, steps=3)
    with pytest.raises(StudioError, match="--resume needs --checkpoint"):
        learn(adam, resume=True)
