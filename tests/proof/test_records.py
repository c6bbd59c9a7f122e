"""Proof records kept where they belong (docs/receipt.md, "Where records live"): receipts per user
folder keyed by content hash and GPU profile, a read-only install that still proves, one sealed
record format for receipts, checkpoints and provenance, every field counted, bounded reading."""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import BUILTINS, REPO

from studio.engine.context import Context
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.learner import checkpoint as lck
from studio.engine.learner.system import load_system
from studio.engine.proof import receipts
from studio.engine.proof.conformance import conform
from studio.engine.records.reader import read_record, read_regular
from studio.engine.records.seal import Seal
from studio.engine.records.writer import write_record
from studio.engine.resources import ROOT
from studio.engine.services import workflows as wf_service

CLIP = BUILTINS / "clip"


def scellis(*args, home, cwd=None, timeout=600):
    env = {**os.environ, "SCELLIS_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


# ------------------------------------------------------------------ finding 1: receipts per user folder
@pytest.mark.slow
def test_two_user_folders_proving_the_same_builtin_both_read_valid(device, hosts, tmp_path):
    pkg = load_package(CLIP)
    homes = [tmp_path / "a", tmp_path / "b"]
    ctxs = [Context.open(home=h, device=device, hosts=hosts) for h in homes]
    for c in ctxs:
        rep = conform(c, pkg)
        assert rep.ok
        path = receipts.write_receipt(pkg, receipts.make_receipt(pkg, rep), c.seal)
        assert path == c.seal.home / "receipts" / pkg.hash / f"{device.profile.id}.json"
    for c in ctxs:                                   # B proving after A leaves A's receipt valid
        assert receipts.local_status(pkg, device.profile.id, c.seal) == "valid"
    assert not (CLIP / "receipts").exists()          # nothing written into the install
    # negative control: one folder's receipt copied into the other reads from elsewhere, never valid
    a, b = (receipts.receipt_dir(pkg, c.seal) / f"{device.profile.id}.json" for c in ctxs)
    shutil.copyfile(a, b)
    assert receipts.local_status(pkg, device.profile.id, ctxs[1].seal) == "foreign"


def test_receipts_an_older_version_left_in_the_package_folder_are_ignored_with_one_line(pkg_copy, tmp_path):
    root = pkg_copy(CLIP, "clip_old")
    (root / "receipts").mkdir()
    (root / "receipts" / "abc.json").write_text("{}")
    pkg = load_package(root)
    assert receipts.receipts(pkg) == []             # not read, not judged
    note = receipts.legacy_note(pkg)
    assert note and "older version are ignored" in note and note.count("\n") == 0
    (root / "receipts" / "abc.json").unlink()
    assert receipts.legacy_note(pkg) is None


# ------------------------------------------------------------------ finding 2 (and 3): a read-only install proves
def _read_only(cmd: list[str]) -> list[str]:
    """``cmd`` in a private mount namespace where the installed resources are a read-only bind mount."""
    res = str(ROOT)
    inner = f"mount --bind {res} {res} && mount -o remount,bind,ro {res} && exec \"$@\""
    userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *userns, "--mount", "sh", "-c", inner, "sh", *cmd]


@pytest.mark.slow
def test_a_read_only_install_proves_a_builtin_and_runs_the_main_job(tmp_path):
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to mount the resources read-only")
    home, out = tmp_path / "home", tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "SCELLIS_HOME": str(home)}
    probe = subprocess.run(_read_only(["sh", "-c", f"touch {ROOT}/x"]), capture_output=True, text=True)
    assert probe.returncode != 0 and "Read-only" in probe.stderr, probe.stderr     # the mount really is read-only
    before = {p: p.stat().st_mtime_ns for p in ROOT.rglob("*") if p.is_file()}
    r = subprocess.run(_read_only([sys.executable, "-m", "studio.cli", "conform", "core/signal/clip@1"]),
                       capture_output=True, text=True, env=env, cwd=out, timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert list((home / "receipts").glob("*/*.json"))
    wf = ROOT / "workflows" / "spike_removal.toml"
    r = subprocess.run(_read_only([sys.executable, "-m", "studio.cli", "workflow", "run", str(wf), "--prove",
                                   "--out-dir", str(out)]), capture_output=True, text=True, env=env, cwd=out,
                       timeout=900)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert list(out.glob("*.record.json"))
    after = {p: p.stat().st_mtime_ns for p in ROOT.rglob("*") if p.is_file()}
    assert after == before                          # not one file of the install written or added


# ------------------------------------------------------------------ finding 4: learner checkpoints sealed
@pytest.fixture(scope="module")
def adam():
    return load_system(ROOT / "learners" / "logistic_adam")


def _written(adam, folder, seal, step=2):
    lck.save(folder, lck.Checkpoint.of(adam, step, adam.params + 1, adam.state, [1.0, 0.5]), seal)
    return folder / lck.FILE


def test_a_learner_checkpoint_with_any_edited_field_is_refused_naming_it(adam, tmp_path):
    seal = Seal(tmp_path / "home")
    p = _written(adam, tmp_path, seal)
    assert lck.load(tmp_path, seal).step == 2
    good = json.loads(p.read_text())
    # the old attack: parameters set to 1000 with their hash recomputed
    thousand = np.full(adam.params.shape, 1000, np.float32)
    doc = dict(good, params={"count": thousand.size, "f32": base64.b64encode(thousand.tobytes()).decode()})
    doc["params_hash"] = lck.array_hash(thousand)
    for edited, field in ((doc, "params.f32"), (dict(good, step=3), "step"), (dict(good, metrics=[0.0]), "metrics")):
        p.write_text(json.dumps(edited))
        with pytest.raises(StudioError, match="edited after it was sealed") as e:
            lck.load(tmp_path, seal)
        assert e.value.field == field and field in e.value.message
    for step in (-5, 10**9):                         # out of range: refused by the schema before the seal
        p.write_text(json.dumps(dict(good, step=step)))
        with pytest.raises(StudioError, match="not valid") as e:
            lck.load(tmp_path, seal)
        assert e.value.field == "step"
    p.write_text(json.dumps(good))
    assert lck.load(tmp_path, seal).step == 2       # the untouched file still loads


def test_a_learner_checkpoint_from_another_user_folder_is_from_elsewhere(adam, tmp_path):
    _written(adam, tmp_path, Seal(tmp_path / "theirs"))
    with pytest.raises(StudioError, match="from elsewhere") as e:
        lck.load(tmp_path, Seal(tmp_path / "mine"))
    assert e.value.field == "seal"
    assert lck.load(tmp_path, Seal(tmp_path / "theirs")).step == 2


def _bounded(fn, seconds=10):
    out = {}
    t = threading.Thread(target=lambda: out.update(r=_catch(fn)), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the reader blocked"
    return out["r"]


def _catch(fn):
    try:
        return fn()
    except StudioError as e:
        return e


def test_hostile_checkpoints_are_refused_quickly_and_readably(tmp_path):
    seal = Seal(tmp_path / "home")
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / lck.FILE)
    e = _bounded(lambda: lck.load(fifo, seal))
    assert isinstance(e, StudioError) and "FIFO" in e.message
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / lck.FILE).write_text("[" * 100_000 + "]" * 100_000)
    e = _bounded(lambda: lck.load(deep, seal))
    assert isinstance(e, StudioError) and "deep" in e.message and e.line == 1
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    with open(sparse / lck.FILE, "wb") as f:
        f.truncate(3 << 30)                          # 3 GiB, no blocks: refused by its size, never read
    e = _bounded(lambda: lck.load(sparse, seal))
    assert isinstance(e, StudioError) and "limit" in e.message


# ------------------------------------------------------------------ finding 5: provenance records sealed
SMALL = """[workflow]
name = "small"
record = "small.record.json"
[steps.signal]
op = "core/signal/spiky_signal@1"
params = { n = 2000, seed = 3 }
[steps.median]
op = "core/signal/clip@1"
inputs = { x = "signal.y" }
params = { lo = -1.0, hi = 1.0 }
[sinks.out]
file = "clipped.npy"
series = "median.y"
"""


@pytest.fixture
def record(ctx, tmp_path):
    wf = tmp_path / "small.toml"
    wf.write_text(SMALL)
    out = wf_service.run_workflow(ctx, wf, out_dir=tmp_path, prove=True)
    return Path(out["record_path"])


@pytest.mark.slow
def test_a_provenance_record_with_any_edited_field_is_refused_naming_it(ctx, record):
    assert wf_service.verify(ctx, record)["ok"]
    good = json.loads(record.read_text())
    edits = [("run.allow_unverified", lambda d: d["run"].__setitem__("allow_unverified", True)),
             ("run.unverified_steps", lambda d: d["run"].__setitem__("unverified_steps", ["median"])),
             ("steps[1].receipt.status", lambda d: d["steps"][1]["receipt"].__setitem__("status", "none")),
             ("steps[1].receipt.sha256", lambda d: d["steps"][1]["receipt"].__setitem__("sha256", "0" * 64)),
             ("steps[1].inputs.x.sha256", lambda d: d["steps"][1]["inputs"]["x"].__setitem__("sha256", "1" * 64)),
             ("sinks.out.sha256", lambda d: d["sinks"]["out"].__setitem__("sha256", "2" * 64))]
    for field, edit in edits:
        doc = json.loads(json.dumps(good))
        edit(doc)
        record.write_text(json.dumps(doc))
        with pytest.raises(StudioError, match="edited after it was sealed") as e:
            wf_service.verify(ctx, record)
        assert e.value.field == field, (field, e.value.message)
    record.write_text(json.dumps(good))
    assert wf_service.verify(ctx, record)["ok"]


@pytest.mark.slow
def test_a_record_from_another_user_folder_is_re_derived_and_says_what_it_could_not_check(ctx, record, tmp_path):
    theirs = Seal(tmp_path / "theirs")
    doc = json.loads(record.read_text())
    doc.pop("seal")
    write_record(record, doc, theirs)
    rep = wf_service.verify(ctx, record)
    assert rep["ok"] and any("from elsewhere" in n and "Not checkable here" in n for n in rep["notes"])
    # re-derived, not believed: a foreign record claiming other outputs is NOT reproduced
    doc["steps"][1]["outputs"]["y"]["sha256"] = "3" * 64
    write_record(record, doc, theirs)
    rep = wf_service.verify(ctx, record)
    assert not rep["ok"] and any(s["name"] == "median" and not s["ok"] for s in rep["steps"])


@pytest.mark.slow
def test_workflow_verify_on_the_command_line_refuses_an_edited_record(ctx, record):
    doc = json.loads(record.read_text())
    doc["run"]["allow_unverified"] = True
    record.write_text(json.dumps(doc))
    r = scellis("workflow", "verify", record, home=ctx.seal.home)
    assert r.returncode == 2 and "run.allow_unverified" in r.stderr and "reproduced" not in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------ finding 6: one recipe, one reader
def test_every_record_goes_through_the_records_home():
    """No module outside studio/engine/records/ turns a proof record into JSON or back by hand."""
    owners = ["studio/engine/proof/receipts.py", "studio/engine/learner/checkpoint.py",
              "studio/engine/workflow/checkpoint.py", "studio/engine/workflow/provenance.py",
              "studio/engine/workflow/train_record.py", "studio/engine/proof/gradcoverage.py"]
    for rel in owners:
        assert _by_hand((REPO / rel).read_text()) == [], rel
    # negative control: a module that dumps its own JSON and hashes it is caught
    assert _by_hand("import json\nx = json.dumps(body)\nh = hashlib.sha256(x)\n") == ["import json", "json.dumps"]
    defs = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "studio").rglob("*.py")
                  if any(d in p.read_text() for d in ("def parse_json(", "def array_digest(", "def json_nesting(")))
    assert defs == ["studio/engine/records/canonical.py", "studio/engine/records/reader.py"]


def _by_hand(text: str) -> list[str]:
    return [w for w in ("import json", "json.dumps", "json.loads") if w in text]


def test_the_bounded_reader_refuses_what_is_not_a_regular_file(tmp_path):
    with pytest.raises(StudioError, match="folder"):
        read_regular(tmp_path, 10, what="the record")
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(StudioError, match="limit"):
        read_regular(tmp_path / "big", 10, what="the record")
    seal = Seal(tmp_path / "home")
    p = write_record(tmp_path / "r.json", {"schema": "scellis-test/1", "x": float("nan"), "y": [1, 2]}, seal)
    rec = read_record(p, seal, schema="scellis-test/1", what="r", hint="h", max_bytes=1 << 20)
    assert rec.seal.ok and rec.doc["x"] == "nan"     # strict JSON has no NaN: it travels as a string
    with pytest.raises(StudioError, match="schema"):
        read_record(p, seal, schema="scellis-other/1", what="r", hint="h", max_bytes=1 << 20)
    assert hashlib.sha256(p.read_bytes()).hexdigest()   # written whole, readable


def test_a_seal_key_that_cannot_be_created_is_one_error_naming_its_file(tmp_path):
    (tmp_path / "home").write_text("a file where the user folder should be")
    seal = Seal(tmp_path / "home")
    with pytest.raises(StudioError, match="seal key cannot be read: Not a directory") as e:
        seal.key()
    assert e.value.file == str(seal.path)
