"""The learner as data (docs/learner.md "The file"): a learner.toml beside its .assign programs and
.npy arrays, or the same system built in Python; unequal shares and an owner with none; every
mistake is a StudioError at file:line:col or field with a hint, before anything runs."""
import shutil

import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.learner import combine
from studio.engine.learner.program import parse_program
from studio.engine.learner.system import System, load_system
from studio.engine.resources import ROOT

LSQ = ROOT / "learners" / "least_squares_momentum"


def copy(tmp_path, name="least_squares_momentum"):
    dst = tmp_path / name
    shutil.copytree(ROOT / "learners" / name, dst)
    return dst


def edit(folder, old, new, file="learner.toml"):
    p = folder / file
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new))


def test_the_shipped_file_is_the_whole_system():
    s = load_system(LSQ / "learner.toml")
    assert (s.k, s.s, s.m, s.steps) == (3, 4, 3, 40)
    assert s.rate == np.float32(0.1) and s.samples.shape == (96, 4) and s.samples.dtype == np.float32
    assert s.shares == [50, 31, 0, 15]                            # unequal, owner 2 holds nothing
    assert s.owners[2].size == 0 and s.assignment()[50] == 1
    assert s.contribution.hash == parse_program((LSQ / "contribution.assign").read_text(), origin="x").hash


def test_the_same_system_built_in_python_has_the_same_contract():
    f = load_system(LSQ)
    c = parse_program((LSQ / "contribution.assign").read_text(), origin="c")
    u = parse_program((LSQ / "update.assign").read_text(), origin="u")
    p = System.build(k=3, s=4, m=3, contribution=c, update=u, params=np.zeros(3), state=np.zeros(3), rate=0.1,
                     samples=np.load(LSQ / "samples.npy"), shares=[50, 31, 0, 15])
    assert combine.contract_hash(p) == combine.contract_hash(f) and p.data_hash() == f.data_hash()
    q = System.build(k=3, s=4, m=3, contribution=c, update=u, params=np.zeros(3), state=np.zeros(3), rate=0.1,
                     samples=np.load(LSQ / "samples.npy"))
    assert q.shares == [96]                                        # default: one owner with everything
    assert [o.size for o in q.evenly(7).owners] == [14, 14, 14, 14, 14, 13, 13]


def test_an_assignment_array_gives_each_sample_its_owner(tmp_path):
    d = copy(tmp_path)
    a = np.arange(96) % 3
    np.save(d / "owners.npy", a)
    edit(d, "shares = [50, 31, 0, 15]", 'assignment = "owners.npy"')
    s = load_system(d)
    assert s.shares == [32, 32, 32] and s.owners[1][:3].tolist() == [1, 4, 7]


@pytest.mark.parametrize("old,new,match", [
    ("shares = [50, 31, 0, 15]", "shares = [50, 31, 0, 14]", "add up to 95, samples.npy holds 96"),
    ("k = 3\n", "k = 0\n", "k = 0 is too small"),
    ("rate = 0.1", 'rate = "fast"', "must be a number"),
    ("steps = 40", "step = 40", "unknown field 'step'"),
    ('samples = "samples.npy"', 'samples = "missing.npy"', "missing.npy"),
    ("params = [0.0, 0.0, 0.0]", "params = [0.0, 0.0]", "has 2 values, the learner declares 3"),
])
def test_mistakes_in_the_file_are_named_at_their_line(tmp_path, old, new, match):
    d = copy(tmp_path)
    edit(d, old, new)
    line = next(n for n, text in enumerate((d / "learner.toml").read_text().split("\n"), 1) if new.strip() in text)
    with pytest.raises(StudioError, match=match) as e:
        load_system(d)
    assert e.value.file.endswith("learner.toml") and e.value.line == line


def test_samples_of_the_wrong_width_are_refused(tmp_path):
    d = copy(tmp_path)
    np.save(d / "samples.npy", np.zeros((96, 5), np.float32))
    with pytest.raises(StudioError, match=r"shape \(96, 5\), the learner needs \(N, 4\)"):
        load_system(d)


def test_a_program_that_writes_outside_its_range_is_refused_before_anything_runs(tmp_path):
    d = copy(tmp_path)
    edit(d, "for i in 0..k: contrib[i] := residual * sample[i]",
         "for i in 0..k: contrib[i] := residual * sample[i]\nparam[0] := 1.0", file="contribution.assign")
    with pytest.raises(StudioError) as e:
        load_system(d)
    assert e.value.file.endswith("contribution.assign")


def test_a_missing_program_is_named(tmp_path):
    d = copy(tmp_path)
    (d / "update.assign").unlink()
    with pytest.raises(StudioError, match="cannot read the update program update.assign") as e:
        load_system(d)
    assert e.value.field == "learner.update"
