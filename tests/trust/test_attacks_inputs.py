"""Inputs named inside a shared file are regular files of that file's folder, and no message quotes
a file's contents.

The attack: a workflow input ``secret.npy`` that is a symlink was followed out of the workflow's
folder, and the error echoed the start of the file it led to — 8 of the seal key's 32 bytes, a
credentials file's first line. Now a workflow source or a learner's file must be a relative path
beneath the folder of the file that names it, through no symlink (arrays.input_beneath), refused
at its line:col; the readers' messages say what is wrong in their own words, never the bytes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from studio.engine.arrays import load_array
from studio.engine.errors import StudioError
from studio.engine.learner.system import load_system
from studio.engine.resources import ROOT
from studio.engine.workflow.spec import load_workflow

REPO = Path(__file__).resolve().parents[2]
KEY = b"SEALKEY-" + bytes.fromhex("8f3a91c2d4e5f60718293a4b5c6d7e8f") + b"-TAIL-OF-KEY"      # 32 bytes
CREDS = b"aws_secret_access_key=AKIAEXAMPLESECRET42\nsecond line\n"
SIGNAL = '[workflow]\nname = "evil"\n[steps.signal]\nop = "core/signal/spiky_signal@1"\nparams = { n = 64, seed = 1 }\n'


def _leaks(text: str) -> list[str]:
    """Pieces of the secrets (8 bytes or more, in any spelling a message could use) found in ``text``."""
    out = []
    for secret in (KEY, CREDS):
        for i in range(0, len(secret) - 8):
            piece = secret[i:i + 8]
            for spelled in (piece.decode("latin-1"), repr(piece)[2:-1], piece.hex()):
                if spelled in text:
                    out.append(spelled)
    return out


@pytest.fixture
def secrets(tmp_path) -> Path:
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / "receipt.key").write_bytes(KEY)
    (outside / "credentials").write_bytes(CREDS)
    return outside


def _workflow(folder: Path, rel: str) -> Path:
    folder.mkdir(exist_ok=True)
    wf = folder / "evil.toml"
    wf.write_text(SIGNAL + f'[sources.s]\nfile = "{rel}"\n[sinks.out]\nfile = "out.npy"\nseries = "signal.y"\n')
    return wf


def _at(wf: Path, rel: str) -> tuple[int, int]:
    for n, line in enumerate(wf.read_text().split("\n"), 1):
        if f'"{rel}"' in line:
            return n, line.index(f'"{rel}"') + 1
    raise AssertionError(rel)


@pytest.mark.parametrize("target", ["receipt.key", "credentials"])
def test_a_symlinked_workflow_input_is_refused_at_its_line_and_its_target_never_read(tmp_path, secrets, target):
    wf = _workflow(tmp_path / "wf", "secret.npy")
    (tmp_path / "wf" / "secret.npy").symlink_to(secrets / target)
    with pytest.raises(StudioError) as info:
        load_workflow(wf)
    e = info.value
    assert e.field == "sources.s.file" and (e.line, e.col) == _at(wf, "secret.npy")
    assert "symlink" in e.message and not _leaks(e.format())


def test_a_symlinked_folder_on_the_way_is_refused_too(tmp_path, secrets):
    wf = _workflow(tmp_path / "wf", "data/receipt.key.npy")
    (tmp_path / "wf" / "data").symlink_to(secrets, target_is_directory=True)
    (secrets / "receipt.key.npy").write_bytes(KEY)
    with pytest.raises(StudioError, match="symlink") as info:
        load_workflow(wf)
    assert info.value.field == "sources.s.file" and not _leaks(info.value.format())


@pytest.mark.parametrize("rel", ["../home/receipt.npy", "/etc/hosts.csv", "~/.aws/credentials.csv", "a/../../x.npy"])
def test_an_input_outside_the_workflows_folder_is_refused_at_its_line(tmp_path, rel):
    wf = _workflow(tmp_path / "wf", rel)
    with pytest.raises(StudioError) as info:
        load_workflow(wf)
    assert info.value.field == "sources.s.file" and (info.value.line, info.value.col) == _at(wf, rel)
    assert "inside the folder" in info.value.message


def test_a_regular_input_of_the_folder_still_reads(tmp_path):
    """The control: the same workflow with a real file in its folder (and a subfolder) parses."""
    wf = _workflow(tmp_path / "wf", "data/x.npy")
    (tmp_path / "wf" / "data").mkdir()
    np.save(tmp_path / "wf" / "data" / "x.npy", np.arange(4, dtype=np.float32))
    assert load_workflow(wf).sources["s"].path == tmp_path / "wf" / "data" / "x.npy"


@pytest.mark.slow
def test_scellis_workflow_run_with_a_symlinked_input_exits_2_and_shows_no_byte_of_it(tmp_path, secrets):
    """The attack through the CLI: one line at the workflow's line:col, exit 2, no secret anywhere."""
    wf = _workflow(tmp_path / "wf", "secret.npy")
    (tmp_path / "wf" / "secret.npy").symlink_to(secrets / "receipt.key")
    env = {**os.environ, "SCELLIS_HOME": str(tmp_path / "scellis")}
    out = subprocess.run([sys.executable, "-m", "studio.cli", "workflow", "run", str(wf), "--out-dir",
                          str(tmp_path / "out")], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    line, col = _at(wf, "secret.npy")
    assert out.returncode == 2, out.stderr
    assert f"evil.toml:{line}:{col}" in out.stderr and "Traceback" not in out.stderr
    assert [ln for ln in out.stderr.splitlines() if not ln.startswith("  ")] == [out.stderr.splitlines()[0]]
    assert not _leaks(out.stdout + out.stderr) and not (tmp_path / "out" / "out.npy").exists()


# ------------------------------------------------------------------ no message quotes a file's contents
@pytest.mark.parametrize("name, data", [
    ("key.npy", KEY),                                                        # not .npy: was "it starts with b'SEALKEY-'"
    ("header.npy", b"\x93NUMPY\x01\x00\x40\x00{'descr': '" + CREDS[:40] + b"'}\n"),   # numpy quoted the header
    ("creds.csv", CREDS),                                                    # numpy quoted the value it could not read
    ("mixed.csv", b"1,2\n" + CREDS),
    ("binary.csv", b"\xff\xfe" + KEY),
])
def test_no_reader_message_quotes_the_files_bytes(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(StudioError) as info:
        load_array(p)
    assert not _leaks(info.value.format()), info.value.format()


def test_the_readers_still_say_where_and_what(tmp_path):
    """The control: the messages keep their position and their cause, in words of their own."""
    p = tmp_path / "bad.csv"
    p.write_text("1\n2\nthree\n4\n")
    with pytest.raises(StudioError) as info:
        load_array(p)
    assert (info.value.line, info.value.col) == (3, 1) and "a value is not a number" in info.value.message
    q = tmp_path / "key.npy"
    q.write_bytes(KEY)
    with pytest.raises(StudioError, match="not a .npy file"):
        load_array(q)


# ------------------------------------------------------------------ the learner
def test_a_learners_symlinked_samples_are_refused_at_their_field(tmp_path, secrets):
    d = tmp_path / "mean"
    shutil.copytree(ROOT / "learners" / "online_mean", d)
    (d / "samples.npy").unlink()
    (d / "samples.npy").symlink_to(secrets / "receipt.key")
    with pytest.raises(StudioError) as info:
        load_system(d)
    e = info.value
    assert e.field == "learner.samples" and e.line is not None and "symlink" in e.message
    assert not _leaks(e.format())
    (d / "samples.npy").unlink()                                  # the control: the real file loads
    shutil.copy(ROOT / "learners" / "online_mean" / "samples.npy", d / "samples.npy")
    assert load_system(d).samples.shape[1] == 2


def test_a_learners_program_outside_its_folder_is_refused(tmp_path, secrets):
    d = tmp_path / "mean"
    shutil.copytree(ROOT / "learners" / "online_mean", d)
    toml = d / "learner.toml"
    toml.write_text(toml.read_text().replace('update = "update.assign"', f'update = "{secrets / "credentials"}"'))
    with pytest.raises(StudioError) as info:
        load_system(d)
    assert info.value.field == "learner.update" and not _leaks(info.value.format())
