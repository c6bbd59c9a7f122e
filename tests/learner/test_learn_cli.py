"""`scellis learn` (docs/learner.md "On the command line"): a metric line per step with the owners'
agreement, the final parameter hash (the same bits for any --owners), a checkpoint resumed with
--resume, and bad input as a positioned error with exit 2."""
import re

import pytest
from learner_reference import independent_run

from studio.cli import main
from studio.engine.learner.fingerprint import array_hash
from studio.engine.learner.system import load_system
from studio.engine.resources import ROOT


def final_hash(out: str) -> str:
    return re.search(r"final parameter hash ([0-9a-f]{64})", out).group(1)


@pytest.mark.slow
def test_learn_prints_a_line_per_step_and_the_final_hash(capsys, tmp_path):
    system = load_system(ROOT / "learners" / "online_mean")
    want, _ = independent_run(system, 3)
    assert main(["learn", "online_mean", "--owners", "2", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("step ")]
    assert len(lines) == 3 and all("agree " in ln and "owners 2 (shares 25,25)" in ln for ln in lines)
    assert final_hash(out) == array_hash(want)
    assert "combine canonical: binary tree over the global sample order" in out
    assert main(["learn", str(ROOT / "learners" / "online_mean"), "--owners", "3", "--steps", "2",
                 "--checkpoint", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["learn", str(ROOT / "learners" / "online_mean" / "learner.toml"), "--steps", "3",
                 "--checkpoint", str(tmp_path), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "resumed from the checkpoint at step 2" in out
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("step ")] == ["3/3"]
    assert final_hash(out) == array_hash(want) and "owners 3 (shares 17,17,16)" in out


def test_bad_input_is_a_positioned_error(capsys, tmp_path):
    assert main(["learn", "no_such_learner"]) == 2
    err = capsys.readouterr().err
    assert "no learner file or shipped learner named 'no_such_learner'" in err and "least_squares_momentum" in err
    (tmp_path / "learner.toml").write_text("[learner]\nk = 2\ns = 2\nm = 0\nrate = [1]\n")
    assert main(["learn", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"learner\.toml:\d+:\d+ \[learner\.", err)
    assert main(["learn", "online_mean", "--resume"]) == 2
    assert "--resume needs --checkpoint" in capsys.readouterr().err
