"""A full disk, as seen: `conform` printed two tracebacks and "internal error
… this is a bug"; the learner's disk-full error named no file. Now an OS error is one line naming
the file and the errno, exit 2. The disk is really full: a tiny tmpfs (where this user may mount
one; else the tests are skipped). No mocks."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from studio.engine.atomic import write_bytes
from studio.engine.errors import from_os_error

REPO = Path(__file__).resolve().parents[2]
MEDIAN = REPO / "examples" / "windowed_median"


@pytest.fixture
def full(tmp_path):
    """(folder, None): a folder on a real 256 KiB tmpfs; where this user may not mount one, the
    test is skipped (a file-size limit would also cap the worker's shared-memory segments, so the
    error would not be the receipt's)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    ok = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                                              capture_output=True).returncode == 0
    if not ok:
        pytest.skip("a tiny tmpfs cannot be mounted here (needs root or a user namespace)")
    try:
        yield mnt, None
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)   # atomic-ok: filling a scratch filesystem
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno in (errno.ENOSPC, errno.EFBIG)
    finally:
        os.close(fd)


def _one_line_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr and "this is a bug" not in stderr and "internal error" not in stderr, stderr
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_write_on_a_full_disk_names_its_file_and_errno(full):
    folder, _ = full
    _fill(folder)
    target = folder / "out.json"
    with pytest.raises(OSError) as info:
        write_bytes(target, b"x" * 65536)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    e = from_os_error(info.value)
    assert e.file == str(target) and "(ENOSPC)" in e.message and "\n" not in e.format()
    assert not [p for p in folder.iterdir() if p.name != "filler"]          # no temp file left behind


@pytest.mark.slow
def test_conform_on_a_full_disk_is_one_line_and_exit_2(full, tmp_path):
    folder, preexec = full
    home = folder / "home"
    home.mkdir()
    from studio.engine.records.seal import Seal
    Seal(home).key()                    # the user's key exists already: the receipt is what does not fit
    if preexec is None:
        _fill(folder)
    env = {**os.environ, "SCELLIS_HOME": str(home)}
    out = subprocess.run([sys.executable, "-m", "studio.cli", "conform", str(MEDIAN)], capture_output=True,
                         text=True, env=env, cwd=REPO, timeout=600, preexec_fn=preexec)
    assert out.returncode == 2, out.stdout + out.stderr
    line = _one_line_error(out.stderr)
    assert str(home) in line and ("ENOSPC" in line or "EFBIG" in line or "Errno 28" in line
                                  or "Errno 27" in line), line


@pytest.mark.slow
def test_the_learner_on_a_full_disk_names_the_checkpoint_file(full, tmp_path):
    folder, preexec = full
    ck = folder / "ck"
    ck.mkdir()
    if preexec is None:
        _fill(folder)
    env = {**os.environ, "SCELLIS_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-m", "studio.cli", "learn", "online_mean", "--steps", "1",
                          "--owners", "1", "--checkpoint", str(ck)], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=600, preexec_fn=preexec)
    assert out.returncode == 2, out.stdout + out.stderr
    line = _one_line_error(out.stderr)
    assert str(ck) in line and ("ENOSPC" in line or "EFBIG" in line or "Errno 28" in line
                                or "Errno 27" in line), line


def test_a_seal_key_on_a_full_disk_names_its_file(full):
    from studio.engine.errors import StudioError
    from studio.engine.records.seal import Seal
    mnt, _ = full
    home = mnt / "home"
    home.mkdir()
    _fill(mnt)
    seal = Seal(home)
    with pytest.raises(StudioError, match="cannot create the seal key: \\[Errno 28\\]") as e:
        seal.key()
    assert e.value.file == str(seal.path) and not list(home.iterdir())     # no temp file left behind
