"""A shared workflow file that tries to write where it may not, as seen.

`record = "/any/path"` wrote anywhere, and sinks accepted absolute and `../` paths (a sink
`../../x.npy` landed outside --out-dir); a record pointed at the trust store broke every later
`trust`. Each test is the attack; every path a workflow file names now stays in the output folder,
and what is refused is refused at its line:col before anything runs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from studio.engine.errors import StudioError
from studio.engine.services.workflows import run_workflow, train
from studio.engine.workflow.spec import parse_workflow

REPO = Path(__file__).resolve().parents[2]

BASE = '''[workflow]
name = "evil"
{record}
[steps.signal]
op = "core/signal/spiky_signal@1"
params = {{ n = 64, seed = 1 }}

[sinks.out]
file = {sink}
series = "signal.y"
{train}'''


def _text(record: str | None = None, sink: str = '"out.npy"', train_ck: str | None = None) -> str:
    tr = ""
    if train_ck is not None:
        tr = ('\n[sources.p]\nvalues = [1.0]\ntrainable = true\n\n[train]\nprediction = "signal.y"\n'
              f'target = "signal.y"\ncheckpoint = {train_ck}\n')
    return BASE.format(record=f"record = {record}" if record else "", sink=sink, train=tr)


def _where(text: str, needle: str) -> tuple[int, int]:
    for n, line in enumerate(text.split("\n"), 1):
        if needle in line:
            return n, line.index(needle) + 1
    raise AssertionError(needle)


@pytest.mark.parametrize("record", ['"/tmp/anywhere.json"', '"~/.bashrc"', '"../outside.record.json"',
                                    '"a/../../b.json"', '"C:/x.json"'])
def test_a_record_outside_the_output_folder_is_refused_at_its_line(record):
    text = _text(record=record)
    with pytest.raises(StudioError) as info:
        parse_workflow(text, file="evil.toml")
    e = info.value
    assert (e.line, e.col) == _where(text, record) and e.field == "workflow.record"
    assert "inside the output folder" in e.message


@pytest.mark.parametrize("sink", ['"../../x.npy"', '"/etc/x.npy"', '"~/x.csv"', '"a/../../x.png"'])
def test_a_sink_outside_the_output_folder_is_refused_at_its_line(sink):
    text = _text(sink=sink)
    with pytest.raises(StudioError) as info:
        parse_workflow(text, file="evil.toml")
    assert (info.value.line, info.value.col) == _where(text, sink) and info.value.field == "sinks.out.file"


def test_a_checkpoint_outside_the_output_folder_is_refused_at_its_line():
    text = _text(train_ck='"../../c.checkpoint.json"')
    with pytest.raises(StudioError) as info:
        parse_workflow(text, file="evil.toml")
    assert info.value.field == "train.checkpoint" and info.value.line == _where(text, "../../c.checkpoint")[0]


def test_paths_inside_the_output_folder_still_parse():
    wf = parse_workflow(_text(record='"runs/evil.record.json"', sink='"runs/out.npy"'), file="ok.toml")
    assert wf.record == "runs/evil.record.json" and wf.sinks["out"].path == "runs/out.npy"


def test_a_symlink_that_leaves_the_output_folder_is_refused_before_anything_runs(ctx, tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "runs").symlink_to(elsewhere)
    wf = tmp_path / "evil.toml"
    wf.write_text(_text(sink='"runs/x.npy"'))
    with pytest.raises(StudioError) as info:
        run_workflow(ctx, wf, out_dir=out)
    assert "through a symlink" in info.value.message and info.value.field == "sinks.out.file"
    assert info.value.line == _where(wf.read_text(), '"runs/x.npy"')[0]
    assert list(elsewhere.iterdir()) == [] and not (out / "evil.record.json").exists()


def test_a_symlinked_record_is_refused_for_training_too(ctx, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "evil.record.json").symlink_to(tmp_path / "victim.json")
    wf = tmp_path / "evil.toml"
    wf.write_text(_text(train_ck='"c.checkpoint.json"'))
    with pytest.raises(StudioError) as info:
        train(ctx, wf, out_dir=out)
    assert "through a symlink" in info.value.message and info.value.field == "workflow.record"
    assert not (tmp_path / "victim.json").exists()


@pytest.mark.slow
def test_scellis_workflow_run_with_a_record_on_the_trust_store_exits_2_and_touches_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    store = home / "trust.json"
    store.write_text('{"schema": "scellis-trust/1", "entries": {}}\n')
    before = store.read_bytes()
    wf = tmp_path / "evil.toml"
    wf.write_text(_text(record=f'"{store}"'))
    env = {**os.environ, "SCELLIS_HOME": str(home)}
    out = subprocess.run([sys.executable, "-m", "studio.cli", "workflow", "run", str(wf), "--out-dir",
                          str(tmp_path / "out")], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert out.returncode == 2, out.stderr
    line, col = _where(wf.read_text(), f'"{store}"')
    assert f"evil.toml:{line}:{col}" in out.stderr and "Traceback" not in out.stderr
    assert store.read_bytes() == before

