"""A training checkpoint as a record (studio/engine/workflow/checkpoint.py), without training: it
round-trips bit for bit through its sealed file; a changed byte, another user folder's key, a
field of the wrong type and a parameter that no longer matches its hash are each refused, naming
what is wrong."""
import json

import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.records.seal import Seal
from studio.engine.workflow.checkpoint import checkpoint_params, make_checkpoint, read_checkpoint, write_checkpoint

PARAMS = {"gain": np.array([1.25], np.float32), "taps": np.array([0.2, -0.1, np.float32(1e-30), 0.3], np.float32)}


def written(tmp_path, home="home"):
    seal = Seal(tmp_path / home)
    ck = make_checkpoint(workflow_sha256="a" * 64, step=3, params=PARAMS, optimizer={"kind": "adam", "t": 3},
                         losses=[4.0, 2.0, 1.0])
    path, sha = write_checkpoint(tmp_path / "ck.json", ck, seal)
    return path, sha, seal


def test_a_checkpoint_round_trips_bit_for_bit(tmp_path):
    path, sha, seal = written(tmp_path)
    d = read_checkpoint(path, seal)
    got = checkpoint_params(d, file=str(path))
    assert all(got[n].tobytes() == a.tobytes() for n, a in PARAMS.items())
    assert d["step"] == 3 and d["losses"] == [4.0, 2.0, 1.0] and len(sha) == 64


def test_a_changed_byte_or_another_folder_s_key_is_refused(tmp_path):
    path, _, seal = written(tmp_path)
    text = path.read_text()
    path.write_text(text.replace('"step": 3', '"step": 2'))
    with pytest.raises(StudioError) as e:
        read_checkpoint(path, seal)
    assert "step" in e.value.message + str(e.value.field)
    path.write_text(text)
    with pytest.raises(StudioError):
        read_checkpoint(path, Seal(tmp_path / "another_home"))
    read_checkpoint(path, seal)                                    # the control: the original reads


def test_a_wrong_type_and_a_parameter_off_its_hash_are_refused(tmp_path):
    path, _, seal = written(tmp_path)
    d = json.loads(path.read_text())
    d["step"] = "three"
    path.write_text(json.dumps(d))
    with pytest.raises(StudioError):
        read_checkpoint(path, seal)
    good = read_checkpoint(*written(tmp_path)[::2])
    good["params"]["gain"]["values"][0] += 1.0
    with pytest.raises(StudioError) as e:
        checkpoint_params(good, file="ck.json")
    assert e.value.field == "params.gain" and "does not match its hash" in e.value.message
