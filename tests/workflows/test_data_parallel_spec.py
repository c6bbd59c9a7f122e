"""A workflow that trains data-parallel (resources/workflows/resnet_digits.toml; docs/workflows.md,
"Data-parallel training"): its [data] table, dataset and init sources and the gradients of its [train]
table, read with a clear error at the field for each mistake; the dataset's limits checked before the
work; the replicas' split and the combine's fixed order."""
import gzip
from pathlib import Path

import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.sharding.training import ordered_sum, shares
from studio.engine.workflow import dataset
from studio.engine.workflow.sources import initial
from studio.engine.workflow.spec import load_workflow, parse_workflow

REPO = Path(__file__).resolve().parents[2]
RESNET = REPO / "resources" / "workflows" / "resnet_digits.toml"

SMALL = """
[workflow]
name = "tiny"

[data]
file = "d.csv"
classes = 3

[sources.x]
dataset = "images"

[sources.t]
dataset = "labels"

[sources.w]
init = "he"
shape = [3, 4]
trainable = true

[steps.fc]
op = "core/nn/linear@1"
inputs = { x = "x", w = "w", bias = "w" }

[train]
prediction = "fc.y"
target = "t"
loss = "fc.y"
gradients = { w = "fc.y" }
batch = 8
replicas = 2
"""


def _parse(tmp_path, text, *edits):
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    (tmp_path / "d.csv").write_text("\n".join(",".join(["1"] * 4 + [str(i % 3)]) for i in range(10)))
    return parse_workflow(text, file=str(tmp_path / "w.toml"), base=tmp_path)


def test_the_shipped_resnet_reads_with_its_gradients_and_data():
    wf = load_workflow(RESNET)
    assert wf.train.explicit and wf.train.replicas == 4 and wf.train.batch == 64
    assert set(wf.train.gradients) == {n for n, s in wf.sources.items() if s.trainable}
    ds = dataset.load(wf.data)
    assert ds.images.shape == (1797, 1, 8, 8) and float(ds.images.max()) == 1.0
    assert len(ds.held_out) == 359 and not set(ds.train) & set(ds.held_out)
    assert sorted(np.bincount(ds.labels))[0] >= 170               # every digit about 180 times


@pytest.mark.parametrize("edit, field, words", [
    (('[sources.w]\ninit = "he"', '[sources.w]\ninit = "xavier"'), "sources.w.init", "is not one of"),
    (("shape = [3, 4]", "shape = [3, 0]"), "sources.w.shape", "positive integers"),
    (("shape = [3, 4]", "shape = [4096, 4096]"), "sources.w.shape", "elements in all"),
    (('dataset = "labels"', 'dataset = "pixels"'), "sources.t.dataset", "is not one of images, labels"),
    (("gradients = { w = \"fc.y\" }", "gradients = { x = \"fc.y\" }"), "train.gradients.x", "not a trainable source"),
    (("gradients = { w = \"fc.y\" }", "gradients = { }"), "train.gradients", "gradients is empty"),
    (("replicas = 2", "replicas = 3"), "train.replicas", "equal replicas"),
    (('file = "d.csv"', 'file = "../d.csv"'), "data.file", ""),
    (('file = "d.csv"', 'file = "d.npy"'), "data.file", ".csv or .csv.gz"),
    (("classes = 3", "classes = 1"), "data.classes", "not in [2, 1000]"),
])
def test_mistakes_are_named_at_their_field(tmp_path, edit, field, words):
    with pytest.raises(StudioError) as e:
        _parse(tmp_path, SMALL, edit)
    assert e.value.field == field and words in e.value.message, (e.value.field, e.value.message)
    assert e.value.line is not None


def test_a_trainable_source_without_a_gradient_and_a_batch_without_data_are_refused(tmp_path):
    with pytest.raises(StudioError, match="trainable source 'v' has no gradient"):
        _parse(tmp_path, SMALL, ("[steps.fc]", '[sources.v]\ninit = "zeros"\nshape = [3]\ntrainable = true\n\n[steps.fc]'))
    with pytest.raises(StudioError, match="has no \\[data\\] table"):
        _parse(tmp_path, SMALL, ('[data]\nfile = "d.csv"\nclasses = 3\n', ""))
    with pytest.raises(StudioError, match="belongs to data-parallel training"):
        _parse(tmp_path, SMALL, ('gradients = { w = "fc.y" }\n', ""), ('loss = "fc.y"\n', ""))


def test_dataset_limits_are_checked_before_the_work(tmp_path, monkeypatch):
    wf = _parse(tmp_path, SMALL)
    bomb = tmp_path / "bomb.csv.gz"
    bomb.write_bytes(gzip.compress(b"0," * (1 << 20)))              # 2 MiB of text in a few kB
    monkeypatch.setattr(dataset, "MAX_TEXT_BYTES", 1 << 20)
    with pytest.raises(StudioError, match="decompresses to more than"):
        dataset.load(type(wf.data)(bomb, classes=3))
    bad = tmp_path / "bad.csv"
    bad.write_text("1,1,1,1,0\n1,1,1,1,7\n")
    with pytest.raises(StudioError) as e:
        dataset.load(type(wf.data)(bad, classes=3))
    assert e.value.line == 2 and "label 7 is not a class in 0..2" in e.value.message
    odd = tmp_path / "odd.csv"
    odd.write_text("1,1,1,0\n1,1,1,1\n")
    with pytest.raises(StudioError, match="side·side pixels"):
        dataset.load(type(wf.data)(odd, classes=3))


def test_init_sources_are_seeded_and_scaled_by_fan_in():
    wf = load_workflow(RESNET)
    a, _ = initial(wf.sources["f_b1"])
    b, _ = initial(wf.sources["f_b1"])
    c, _ = initial(wf.sources["f_b2"])
    assert a.shape == (8, 8, 3, 3) and np.array_equal(a.view(np.uint16), b.view(np.uint16))
    assert not np.array_equal(a.view(np.uint16), c.view(np.uint16))
    assert abs(float(np.std(a.astype(np.float64))) - np.sqrt(2 / 72)) < 0.03
    assert not initial(wf.sources["bias"])[0].any()


def test_owners_hold_contiguous_shares_and_the_combine_is_one_fixed_tree():
    assert shares(4, 1) == [range(0, 4)] and shares(4, 2) == [range(0, 2), range(2, 4)]
    assert shares(5, 2) == [range(0, 3), range(3, 5)]
    with pytest.raises(StudioError, match="at least one replica"):
        shares(4, 5)
    parts = [np.array([1.0]), np.array([2.0 ** 24]), np.array([1.0]), np.array([1.0])]
    # the tree (1 + 2^24) + (1 + 1) = 2^24 + 2 in f32; a sequential sum loses each 1 to rounding: 2^24
    assert ordered_sum(parts)[0] == np.float32(2 ** 24 + 2)
    assert np.float32(np.float32(np.float32(1 + np.float32(2 ** 24)) + np.float32(1)) + np.float32(1)) == 2 ** 24
    assert ordered_sum([np.array([1.0])])[0] == 1.0


def test_the_command_refuses_what_it_cannot_do_before_any_work(capsys):
    from studio.cli import main
    from studio.engine.services.data_parallel import names_gradients
    assert names_gradients(RESNET) and not names_gradients(RESNET.parent / "train_median.toml")
    assert main(["train", str(RESNET), "--precision", "f32"]) == 2          # no f32 twin of the 2-D kinds
    assert "this workflow's convolutions are bf16 ops" in capsys.readouterr().err
    assert main(["train", str(RESNET.parent / "train_median.toml"), "--owners", "2"]) == 2
    assert "train a workflow that writes out its gradients" in capsys.readouterr().err


def test_a_step_and_an_epoch_read_as_one_line_each():
    from studio.engine.services.data_parallel import epoch_line, step_line
    from studio.engine.sharding.training import EpochRecord, StepRecord
    rec = StepRecord(3, 1, 2.25, 0.4, {"owners": 0.25, "round_trip": 0.01, "tree": 0.0001, "measure": 0.1,
                                       "driver": 0.0001},
                     {"g_f": {"df": {"elements": 72, "nonzero": 60, "max_abs": 1e-4, "max_rel": 0.005, "of_bound": 0.9}},
                      "g_fc": {"dw": {"elements": 100, "nonzero": 98, "max_abs": 1e-9, "max_rel": 5e-7}}})
    line = step_line(rec)
    assert line.startswith("step    3  epoch  1  loss 2.2500") and "owners 250.0" in line
    assert "1/1 bf16 weight gradients differ, largest 0.005 of the node (0.90 of the bound, g_f)" in line
    assert epoch_line(EpochRecord(2, 0.5, 0.9471, 8.7)) == "epoch  2  loss 0.5000  held-out accuracy 94.7 %  (8.7 s)"
