"""`scellis workflow run|verify|show` (studio/cli/workflow.py) with the real device worker: the story
workflow writes its plot and record and prints what it removed; verify reproduces it and catches a
changed record; a missing receipt, a bad file: exit 2 with the message at its position, never a
traceback; --prove earns the receipt first. The repository is only read: copies go under tmp_path."""
import json
import shutil

import pytest
from conftest import BUILTINS, MEDIAN, copy_package

from studio.cli import main
from studio.cli.workflow import story_workflow
from studio.engine.contract.package import load_package
from studio.engine.home import studio_home
from studio.engine.proof.receipts import receipt_dir
from studio.engine.records.seal import Seal

N = 20_000


def small_story(tmp_path, text_edits=()):
    text = story_workflow().read_text().replace("n = 1000000", f"n = {N}")
    for old, new in text_edits:
        assert old in text
        text = text.replace(old, new)
    p = tmp_path / "story.toml"
    p.write_text(text)
    return p


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out, out.err


@pytest.mark.slow
def test_the_story_workflow_runs_writes_its_plot_and_record_and_verify_reproduces_it(tmp_path, capsys):
    wf = small_story(tmp_path)
    png, rec = tmp_path / "story.png", tmp_path / "story.record.json"
    rc, out, err = run(capsys, "workflow", "run", wf, "--allow-unverified", "--plot", png, "--record", rec,
                       "--out-dir", tmp_path)
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (tmp_path / "spike_removal.cleaned.npy").is_file()
    for step, op in (("signal", "core/signal/spiky_signal@1"), ("limit", "core/signal/clip@1"),
                     ("median", "user/demo/windowed_median@1"), ("smooth", "core/signal/fir@1")):
        assert any(line.startswith(f"step      {step}") and op in line for line in out.splitlines()), out
    removed = float(out.split("removed   ")[1].split(" %")[0])
    kept = float(out.split("kept      ")[1].split(" %")[0])
    assert removed > 99 and kept > 99, out
    assert "nothing moved between steps" in out
    r = json.loads(rec.read_text())
    assert r["run"]["allow_unverified"] is True and r["report"]["spikes_left"] == 0
    assert r["sinks"]["plot"]["file"] == str(png)
    rc, out, err = run(capsys, "workflow", "verify", rec)
    assert rc == 0 and out.strip().endswith("reproduced: every output hash matches the record"), out + err
    # a record edited by hand is refused, naming the field: exit 2
    r["steps"][2]["outputs"]["y"]["sha256"] = "0" * 64
    rec.write_text(json.dumps(r))
    rc, out, err = run(capsys, "workflow", "verify", rec)
    assert rc == 2 and "steps[2].outputs.y.sha256" in err and "edited after it was sealed" in err, out + err
    # a sealed record whose output hash is not what the op computes does not verify: exit 1
    r.pop("seal")
    rec.write_text(json.dumps(Seal(studio_home()).seal(r)))
    rc, out, err = run(capsys, "workflow", "verify", rec)
    assert rc == 1 and "FAIL  step median" in out and "DIFFERS" in out


@pytest.mark.slow
def test_a_missing_receipt_and_a_bad_file_exit_2_with_the_position(tmp_path, capsys):
    mine = copy_package(MEDIAN, tmp_path / "median")                # a copy: no receipt on this profile
    wf = small_story(tmp_path, [('op = "user/demo/windowed_median@1"', f'op = "{mine}"')])
    rc, out, err = run(capsys, "workflow", "run", wf, "--out-dir", tmp_path)
    line = wf.read_text().count("\n", 0, wf.read_text().index(f'op = "{mine}"')) + 1
    # every unverified step is named at its own position (the builtins' receipts here are the checkout's)
    assert rc == 2 and err.startswith(f"error: {wf}:") and f"{wf}:{line}:6 [steps.median.op]" in err, err
    assert "receipt none" in err and "no valid conformance receipt" in err and "--allow-unverified" in err
    bad = tmp_path / "bad.toml"
    bad.write_text('[workflow]\nname = "b"\n[steps.a]\nop = "core/signal/clip@1"\ninputs = { x = "nowhere" }\n')
    rc, out, err = run(capsys, "workflow", "run", bad, "--allow-unverified", "--out-dir", tmp_path)
    assert rc == 2 and err.startswith(f"error: {bad}:5:16 [steps.a.inputs.x]") and "dangling" in err
    rc, out, err = run(capsys, "workflow", "verify", tmp_path / "nothing.json")
    assert rc == 2 and "does not exist" in err
    rc, out, err = run(capsys, "workflow", "show", story_workflow())
    assert rc == 0 and "user/demo/windowed_median@1" in out and "exact (selection)" in out


@pytest.mark.slow
def test_prove_runs_conformance_first_and_the_record_names_the_receipt(tmp_path, capsys):
    sig = tmp_path / "signal"
    shutil.copytree(BUILTINS / "spiky_signal", sig, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    wf = tmp_path / "gen.toml"
    wf.write_text(f'[workflow]\nname = "gen"\n[steps.signal]\nop = "{sig}"\nparams = {{ n = 5000, seed = 1 }}\n'
                  '[sinks.x]\nfile = "x.csv"\nseries = "signal.y"\n')
    rc, out, err = run(capsys, "workflow", "run", wf, "--out-dir", tmp_path)
    assert rc == 2 and "no valid conformance receipt" in err
    rc, out, err = run(capsys, "workflow", "run", wf, "--prove", "--out-dir", tmp_path)
    assert rc == 0, err
    assert "conformance ran first" in out and "receipt valid" in out
    r = json.loads((tmp_path / "gen.record.json").read_text())
    profile = r["gpu_profile"]["id"]
    assert r["steps"][0]["receipt"]["receipt"] == f"{profile}.json" and (receipt_dir(load_package(sig)) / f"{profile}.json").is_file()
    assert r["seeds"] == {"signal": 1} and (tmp_path / "x.csv").read_text().count("\n") == 5000
    rc, out, err = run(capsys, "workflow", "run", wf, "--out-dir", tmp_path)        # proven now: strict run passes
    assert rc == 0 and "receipt valid" in out


@pytest.mark.parametrize("argv, words", [
    (["train", "x.toml", "--steps", "0"], "not in [1, 1000000]"),
    (["workflow", "run", "x.toml", "--timeout", "nan"], "not a number of seconds"),
])
def test_bad_arguments_are_usage_errors(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and words in capsys.readouterr().err
