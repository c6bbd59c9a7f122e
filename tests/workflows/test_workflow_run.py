"""Running workflows on the device (docs/workflows.md): one lookup, one verification, one execution
path per step whoever wrote the op; the record pins the user's op like the builtins beside it;
output hashes reproduce; a tampered op is caught by verify; a missing receipt refuses the run;
intermediates stay on the device. Real wgpu, real files; package copies live under tmp_path."""
import hashlib
import json
import shutil
import threading

import numpy as np
import pytest
from conftest import BUILTINS, MEDIAN
from proof_store import proven as store_proof

from studio.engine.contract.package import folder_hash, load_package
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.proof.receipts import receipt_dir
from studio.engine.workflow.plan import make_plan
from studio.engine.workflow.provenance import (
    make_record,
    read_record,
    verify_record,
    write_record,
)
from studio.engine.workflow.report import spike_report
from studio.engine.workflow.resident import Resident
from studio.engine.workflow.run import array_digest, run_workflow
from studio.engine.workflow.sources import spike_free_signal, spike_mask
from studio.engine.workflow.spec import parse_workflow
from studio.engine.workflow.wavio import write_wav

N = 20_000


def story(ops: dict, n: int = N) -> str:
    """The story's chain with the ops given by package path: a builtin, the user's median, a builtin."""
    return f'''[workflow]
name = "story"
[steps.signal]
op = "{ops['signal']}"
params = {{ n = {n}, seed = 3 }}
[steps.before]
op = "{ops['affine']}"
inputs = {{ x = "signal.y" }}
params = {{ scale = 0.5, offset = 0.25 }}
[steps.median]
op = "{ops['median']}"
inputs = {{ x = "before.y" }}
params = {{ w = 7 }}
[steps.after]
op = "{ops['affine']}"
inputs = {{ x = "median.y" }}
params = {{ scale = 2.0, offset = -0.5 }}
[sources.clean]
spike_free = "signal"
'''


@pytest.fixture(scope="module")
def proven(module_ctx, tmp_path_factory, proof_store):
    """Copies of the chain's ops, each with a conformance receipt earned here (never in the repository):
    the run's one conformance of that content (proof_store.py), its receipt sealed with this context's key."""
    root = tmp_path_factory.mktemp("ops")
    out = {}
    for name, src in (("signal", BUILTINS / "spiky_signal"), ("affine", BUILTINS / "affine"), ("median", MEDIAN)):
        dst = root / name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
        module_ctx.trust.record_authored(folder_hash(dst), path=dst.resolve())
        entry = store_proof(proof_store, module_ctx, load_package(dst))
        assert entry["verdict"] == "pass", "\n".join(entry["lines"])
        out[name] = str(dst)
    return out


def wf_of(text: str, tmp_path, name: str = "w.toml"):
    p = tmp_path / name
    p.write_text(text)
    return parse_workflow(text, file=str(p), base=tmp_path)


def bits(a):
    return np.asarray(a).view(np.uint32)


def test_the_story_chain_runs_proven_and_the_record_pins_every_op_alike(module_ctx, proven, tmp_path):
    wf = wf_of(story(proven), tmp_path)
    first = run_workflow(module_ctx, wf)                                # strict: every op has its receipt here
    again = run_workflow(module_ctx, wf)
    rec = make_record(module_ctx, first)
    steps = {s["name"]: s for s in rec["steps"]}
    profile = module_ctx.device.profile.id
    for name, s in steps.items():
        assert s["receipt"]["status"] == "valid" and s["receipt"]["receipt"] == f"{profile}.json"
        rpkg = load_package(proven["median" if name == "median" else "signal" if name == "signal" else "affine"])
        rfile = receipt_dir(rpkg, module_ctx.seal) / f"{profile}.json"
        assert s["receipt"]["sha256"] == hashlib.sha256(rfile.read_bytes()).hexdigest()
        assert s["package_hash"] == load_package(s["ref"]).hash
    # the user's op is pinned exactly as the builtins beside it: the same fields, nothing says who wrote it
    assert steps["median"].keys() == steps["before"].keys() == steps["signal"].keys()
    assert {"op", "package_hash", "receipt", "params", "inputs", "outputs", "seconds"} <= steps["median"].keys()
    assert not any("builtin" in json.dumps(s) or "origin" in s for s in rec["steps"])
    assert steps["median"]["inputs"]["x"]["sha256"] == steps["before"]["outputs"]["y"]["sha256"]
    # output hashes reproduce across two runs, and equal the one-op-at-a-time path bit for bit
    for key in first.digests:
        assert first.digests[key] == again.digests[key]
    x = run_op(module_ctx, load_package(proven["signal"]), {}, {"n": N, "seed": 3})["y"]
    b = run_op(module_ctx, load_package(proven["affine"]), {"x": x}, {"scale": 0.5, "offset": 0.25})["y"]
    m = run_op(module_ctx, load_package(proven["median"]), {"x": b}, {"w": 7})["y"]
    assert np.array_equal(bits(first.arrays["median.y"]), bits(m))
    assert first.digests["median.y"] == array_digest(m)
    assert rec["seeds"] == {"signal": 3, "clean": 3}
    assert rec["gpu_profile"]["backend"] == module_ctx.device.profile.backend and rec["engine"]["wgpu"]
    assert all(s["seconds"]["run"] > 0 for s in rec["steps"])


def test_a_missing_receipt_refuses_the_run_and_allowing_unverified_records_it(module_ctx, proven, pkg_copy, tmp_path):
    ops = dict(proven, median=str(pkg_copy(MEDIAN, "median_unproven", forward__wgsl=[   # other content: no receipt
        ("// user/demo/windowed_median@1:", "// an unproven copy of user/demo/windowed_median@1:")])))
    text = story(ops)
    wf = wf_of(text, tmp_path)
    with pytest.raises(StudioError) as e:
        run_workflow(module_ctx, wf)
    err = e.value
    line = text.count("\n", 0, text.index(f'op = "{ops["median"]}"')) + 1
    assert (err.file, err.line, err.field) == (wf.file, line, "steps.median.op")
    assert "no valid conformance receipt" in err.message and "receipt none" in err.message
    assert "scellis conform" in err.hint and "--allow-unverified" in err.hint
    res = run_workflow(module_ctx, wf, allow_unverified=True)
    rec = make_record(module_ctx, res)
    assert rec["run"]["allow_unverified"] is True and rec["run"]["unverified_steps"] == ["median"]
    assert {s["name"]: s["receipt"]["status"] for s in rec["steps"]} == {
        "signal": "valid", "before": "valid", "median": "none", "after": "valid"}


def test_a_tampered_op_between_runs_is_caught_by_verify(module_ctx, proven, pkg_copy, tmp_path):
    median = pkg_copy(MEDIAN, "median_mine")
    ops = dict(proven, median=str(median))
    wf = wf_of(story(ops), tmp_path)
    res = run_workflow(module_ctx, wf, allow_unverified=True)
    path = write_record(tmp_path / "run.record.json", make_record(module_ctx, res), module_ctx.seal)
    rec = read_record(path, module_ctx.seal).doc
    assert verify_record(module_ctx, rec).ok                            # untouched: every step reproduces
    # a comment changes the content but not the output: caught by the pinned hash
    k = median / "forward.wgsl"
    k.write_text("// an edit\n" + k.read_text())
    rep = verify_record(module_ctx, rec)
    by = {s.name: s for s in rep.steps}
    assert not rep.ok and not by["median"].ok and by["signal"].ok and by["before"].ok
    assert by["median"].outputs["y"][0] == by["median"].outputs["y"][1]
    assert any("op content changed" in p for p in by["median"].problems)
    # the classic bug: another element than the middle one; the output no longer reproduces either
    k.write_text(k.read_text().replace("y[i] = win[p.w / 2u];", "y[i] = win[p.w / 2u - 1u];"))
    rep = verify_record(module_ctx, rec)
    by = {s.name: s for s in rep.steps}
    a, b = by["median"].outputs["y"]
    assert a != b and by["after"].outputs["y"][0] != by["after"].outputs["y"][1]
    assert by["signal"].ok and by["before"].ok and not by["after"].ok
    assert any("DIFFERS" in line for line in rep.lines()) and rep.lines()[-1].startswith("verdict: NOT")


def test_a_record_edited_by_hand_is_refused(module_ctx, proven, tmp_path):
    res = run_workflow(module_ctx, wf_of(story(proven, n=500), tmp_path))
    path = write_record(tmp_path / "r.json", make_record(module_ctx, res), module_ctx.seal)
    rec = json.loads(path.read_text())
    rec["workflow"]["text"] = rec["workflow"]["text"].replace("w = 7", "w = 5")
    path.write_text(json.dumps(rec))
    with pytest.raises(StudioError) as e:
        read_record(path, module_ctx.seal)
    assert "the record was edited" in e.value.message and e.value.file == str(path)
    path.write_text('{"schema": "scellis-workflow-record/1", "steps": [}')
    with pytest.raises(StudioError) as e:
        read_record(path, module_ctx.seal)
    assert e.value.line == 1 and "not JSON" in e.value.message


def test_one_step_feeds_two_and_a_source_feeds_a_step(module_ctx, proven, tmp_path):
    text = f'''[workflow]
name = "dag"
[steps.signal]
op = "{proven['signal']}"
params = {{ n = 3000, seed = 9 }}
[steps.narrow]
op = "{proven['median']}"
inputs = {{ x = "signal.y" }}
params = {{ w = 3 }}
[steps.wide]
op = "{proven['median']}"
inputs = {{ x = "signal.y" }}
params = {{ w = 9 }}
[steps.twice]
op = "{proven['affine']}"
inputs = {{ x = "wide.y" }}
params = {{ scale = 2.0, offset = 0.0 }}
'''
    res = run_workflow(module_ctx, wf_of(text, tmp_path))
    assert res.plan.order == ["signal", "narrow", "wide", "twice"]
    x = res.arrays["signal.y"]
    pkg = load_package(proven["median"])
    for name, w in (("narrow", 3), ("wide", 9)):
        assert np.array_equal(bits(res.arrays[f"{name}.y"]), bits(run_op(module_ctx, pkg, {"x": x}, {"w": w})["y"]))
    assert np.array_equal(res.arrays["twice.y"], np.float32(2) * res.arrays["wide.y"])
    assert res.transfers["uploads"] == 0                        # signal.y was read by two steps, never re-uploaded
    assert [s["inputs"]["x"]["from"] for s in make_record(module_ctx, res)["steps"][1:3]] == ["signal.y", "signal.y"]


def moved_between_steps(log) -> list:
    """Transfers that put an intermediate through the host: a read-back before the last dispatch, or
    an upload of a step's output (a source's first upload has no '.' in its name)."""
    last = max(i for i, (kind, _) in enumerate(log) if kind == "dispatch")
    return [(i, e) for i, e in enumerate(log) if (e[0] == "readback" and i < last) or (e[0] == "upload" and "." in e[1])]


def test_intermediates_stay_on_the_device(module_ctx, proven, device, tmp_path):
    res = run_workflow(module_ctx, wf_of(story(proven), tmp_path), allow_unverified=True)
    assert res.transfers["dispatches"] == 4 and res.transfers["uploads"] == 0
    assert res.transfers["readbacks"] == 4                       # each step's output once, after the last step
    assert moved_between_steps(res.log) == []
    assert [k for k, _ in res.log] == ["dispatch"] * 4 + ["readback"] * 4
    # the check can fail: the same chain with its intermediate taken through the host shows the round trip
    exe = Resident(device)
    cat = module_ctx.catalog
    x = exe.run_op(load_package(proven["signal"]), {}, {"n": 100, "seed": 1}, catalog=cat, label="signal")["y"]
    host = exe.read([x])[0]
    exe.run_op(load_package(proven["median"]), {"x": exe.upload(host, "f32", "signal.y")}, {"w": 3}, catalog=cat)
    assert len(moved_between_steps(exe.log)) == 2


def test_run_to_a_step_and_stop_between_steps(module_ctx, proven, tmp_path):
    wf = wf_of(story(proven), tmp_path)
    part = run_workflow(module_ctx, wf, until="median")
    assert list(part.steps) == ["signal", "before", "median"] and "after.y" not in part.arrays
    assert make_record(module_ctx, part)["run"]["until"] == "median"
    stop, seen = threading.Event(), []

    def on_event(e):
        seen.append((e.kind, e.node, e.index, e.total))
        if e.kind == "done" and e.node == "before":
            stop.set()
    res = run_workflow(module_ctx, wf, on_event=on_event, stop=stop)
    assert res.status == "stopped" and list(res.steps) == ["signal", "before"]
    assert seen[:2] == [("start", "signal", 0, 5), ("done", "signal", 0, 5)] and ("done", "before", 2, 5) in seen
    assert not any(n in ("median", "after") for _, n, _, _ in seen)


def test_the_spike_free_signal_is_the_generator_without_its_spikes(module_ctx, proven, tmp_path):
    res = run_workflow(module_ctx, wf_of(story(proven, n=50_000), tmp_path))
    raw, clean = res.arrays["signal.y"], res.arrays["clean"]
    assert np.array_equal(clean, spike_free_signal(50_000, 3))
    spikes = spike_mask(raw)
    assert 150 < spikes.sum() < 400 and np.all(np.abs(raw[spikes]) >= 5)
    assert np.array_equal(bits(raw[~spikes]), bits(clean[~spikes]))     # equal wherever no spike was put in
    rep = spike_report(raw, res.arrays["after.y"], clean)
    assert 0 < rep["spikes"] <= spikes.sum()                   # those within the centred overlap
    assert rep["spikes_left"] == 0 and rep["spike_energy_removed"] > 0.99 and rep["clean_energy_kept"] > 0.99
    # the report's check can fail: the raw signal itself removes nothing
    assert spike_report(raw, raw, clean)["spike_energy_removed"] == pytest.approx(0.0)


def test_file_sources_and_sinks(module_ctx, proven, tmp_path):
    from studio.engine.services.workflows import run_workflow as use_case
    x = np.linspace(-0.5, 0.5, 257).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "table.csv", np.stack([x, -x], axis=1), delimiter=",", fmt="%.9g")
    write_wav(tmp_path / "x.wav", x, 16000)
    text = f'''[workflow]
name = "files"
record = "files.record.json"
[sources.npy]
file = "x.npy"
[sources.csv]
file = "table.csv"
column = 1
[sources.wav]
file = "x.wav"
[steps.a]
op = "{proven['affine']}"
inputs = {{ x = "npy" }}
params = {{ scale = 2.0, offset = 0.0 }}
[steps.b]
op = "{proven['affine']}"
inputs = {{ x = "csv" }}
params = {{ scale = -1.0, offset = 0.0 }}
[steps.c]
op = "{proven['median']}"
inputs = {{ x = "wav" }}
params = {{ w = 1 }}
[sinks.a_npy]
file = "a.npy"
series = "a.y"
[sinks.b_csv]
file = "b.csv"
series = "b.y"
[sinks.c_wav]
file = "c.wav"
series = "c.y"
sample_rate = 16000
'''
    (tmp_path / "files.toml").write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    r = use_case(module_ctx, tmp_path / "files.toml", out_dir=out)
    assert np.array_equal(np.load(out / "a.npy"), 2 * x)
    assert np.allclose(np.loadtxt(out / "b.csv", delimiter=","), x)
    from studio.engine.workflow.wavio import read_wav
    y, rate = read_wav(out / "c.wav")
    assert rate == 16000 and np.max(np.abs(y - x)) <= 1 / 32768
    rec = read_record(out / "files.record.json", module_ctx.seal).doc
    assert rec["sources"]["npy"]["sha256"] == hashlib.sha256((tmp_path / "x.npy").read_bytes()).hexdigest()
    assert rec["sources"]["csv"]["column"] == 1 and rec["sources"]["wav"]["sample_rate"] == 16000
    assert rec["sinks"]["a_npy"]["sha256"] == array_digest(np.load(out / "a.npy"))["sha256"]
    assert rec["transfers"]["uploads"] == 3 and r["written"] == [str(out / f) for f in ("a.npy", "b.csv", "c.wav")]
    # a changed input file: verify says the source (and what it feeds) no longer reproduces
    np.save(tmp_path / "x.npy", x + 1)
    rep = verify_record(module_ctx, rec)
    assert not rep.ok and any("source npy differs" in p and "x.npy changed" in p for p in rep.problems)


def test_plan_errors_are_positioned_at_the_step(module_ctx, proven, tmp_path):
    base = story(proven)
    cases = [   # (text, where the error points, field, words)
        (base.replace(f'op = "{proven["median"]}"', 'op = "user/demo/windowed_mediam@1"'),
         '"user/demo/windowed_mediam@1"', "steps.median.op", "no op 'user/demo/windowed_mediam@1'"),
        (base.replace("params = { w = 7 }", "params = { w = 8 }"), "8 }", "steps.median.params.w", "odd"),
        (base.replace('inputs = { x = "before.y" }', 'inputs = { z = "before.y" }'), '"before.y"',
         "steps.median.inputs.z", "has no input 'z'"),
        (base.replace('inputs = { x = "before.y" }', 'inputs = { x = "before.q" }'), '"before.q"',
         "steps.median.inputs.x", "has no output 'q'"),
        (base.replace("params = { scale = 0.5, offset = 0.25 }", "params = { scale = 0.5 }"), "{ scale = 0.5 }",
         "steps.before.params", "missing param 'offset'"),
    ]
    for text, needle, field, words in cases:
        with pytest.raises(StudioError) as e:
            make_plan(module_ctx, wf_of(text, tmp_path))
        i = text.index(needle)
        where = (text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1)
        assert (e.value.line, e.value.col, e.value.field) == (*where, field) and words in e.value.message, \
            e.value.format()
    bad = tmp_path / "bad.csv"
    bad.write_text("1.0\n2.0\nthree\n")
    text = base + '[sources.s]\nfile = "bad.csv"\n[steps.t]\nop = "' + proven["affine"] + \
        '"\ninputs = { x = "s" }\nparams = { scale = 1.0, offset = 0.0 }\n'
    with pytest.raises(StudioError) as e:
        make_plan(module_ctx, wf_of(text, tmp_path))
    assert e.value.file == str(bad) and e.value.line == 3
    assert e.value.related and e.value.related[0].file.endswith("w.toml") and e.value.related[0].field == "sources.s.file"
    np.save(tmp_path / "nan.npy", np.array([1.0, np.nan, 3.0] * 5, np.float32))
    text = base + '[sources.s]\nfile = "nan.npy"\n[steps.t]\nop = "' + proven["median"] + '"\ninputs = { x = "s" }\n' \
        'params = { w = 3 }\n'
    with pytest.raises(StudioError) as e:
        make_plan(module_ctx, wf_of(text, tmp_path))
    assert e.value.field == "steps.t.inputs.x" and "not finite" in e.value.message
