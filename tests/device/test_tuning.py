"""Kernels tuned per GPU, every candidate proven before it is timed: `tune [..]` in a
binding descriptor (grammar errors at line:col), the checker's judgement of each candidate, and
`scellis tune` on a small op whose candidates include a fast but wrong one (a mutant): it is
rejected and never recorded, never run; the record is sealed (a tampered one is refused), keyed by
content (an edit invalidates it) and GPU profile; a run uses the tuned value, and without a record
the declared default."""
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest
from conftest import BUILTINS, EXAMPLES, copy_package

from studio.engine.contract.bindings import parse_bindings
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError

HEAD = "@group(0) @binding(0) x : storage read f32[n]\n"


def small_op(dst: Path, *, tune: str = "1, 2, 8", default: str = "2", mutant: str = "8u",
             extra_wgsl: str = "") -> Path:
    """core/math/add@1 with RUN elements per invocation, RUN tunable; the kernel returns at once
    (writes nothing: the fastest of all) when RUN is ``mutant``."""
    return copy_package(BUILTINS / "add", dst, {
        "op.toml": [('invocations = "n"\n\n[bindings]', 'invocations = "cdiv(n, RUN)"\n\n[bindings]'),
                    ('@group(0) @binding(3) p : uniform { n: u32 = n }\n"""\n\n[backward]',
                     '@group(0) @binding(3) p : uniform { n: u32 = n }\n'
                     f'override RUN: u32 = {default} tune [{tune}]\n"""\n\n[backward]')],
        "forward.wgsl": [("@group(0) @binding(0)", f"override RUN: u32 = 2u;\n{extra_wgsl}@group(0) @binding(0)"),
                         ("    let i = gid.x + gid.y * nwg.x * 64u;\n    if (i >= p.n) { return; }\n"
                          "    y[i] = a[i] + b[i];",
                          "    let t = gid.x + gid.y * nwg.x * 64u;\n"
                          f"    if (RUN == {mutant}) {{ return; }}   // the mutant: fast, and wrong\n"
                          "    for (var k = 0u; k < RUN; k++) {\n        let i = t * RUN + k;\n"
                          "        if (i < p.n) { y[i] = a[i] + b[i]; }\n    }")]})


# ------------------------------------------------------------------ the grammar
def test_tune_clause_parses_with_candidate_positions():
    d = parse_bindings(HEAD + "override RUN: u32 = 512 tune [64, 512, 2048]", file="op.toml", line=20)
    o = d.overrides[0]
    assert o.tunable and o.candidates == (64, 512, 2048) and o.value.eval({}) == 512
    assert o.candidates_at == ((21, 31), (21, 35), (21, 40))
    assert str(o) == "override RUN: u32 = 512 tune [64, 512, 2048]"
    assert not parse_bindings(HEAD + "override W: u32 = w", file="op.toml").overrides[0].tunable


@pytest.mark.parametrize("line,col,text,needle", [
    (2, 10, "override RUN: u32 = 512 tune [64, 128]", "the default 512 of tunable override 'RUN' is not among"),
    (2, 35, "override RUN: u32 = 512 tune [64, n, 512]", "tune candidate 'n' of 'RUN' is not a constant"),
    (2, 35, "override RUN: u32 = 512 tune [64, -1, 512]", "tune value -1 of 'RUN' does not fit u32"),
    (2, 34, "override RUN: u32 = 64 tune [64, 64]", "listed twice"),
    (2, 10, "override RUN: u32 = n tune [64]", "a tunable's default is a constant"),
    (2, 31, "override RUN: u32 = 512 tune []", "unexpected ']'"),
    (2, 25, "override RUN: u32 = 512 tuned [64]", "unexpected"),
])
def test_a_bad_tune_clause_is_refused_at_line_col(line, col, text, needle):
    with pytest.raises(StudioError) as e:
        parse_bindings(HEAD + text, file="op.toml")
    assert (e.value.file, e.value.line, e.value.col) == ("op.toml", line, col), e.value.format()
    assert needle in e.value.message and e.value.hint


def test_invocations_may_name_a_tunable_and_a_variant_rebinds_it():
    from studio.engine.contract.tunables import variant
    pkg = load_package(EXAMPLES / "windowed_median_fast")
    k = pkg.contract.kernel
    assert str(k.written) == "cdiv(n - w + 1, RUN)" and k.invocations.eval({"n": 10**6, "w": 7}) == 1954
    v = variant(pkg.contract, {"RUN": 64})
    assert v.kernel.invocations.eval({"n": 10**6, "w": 7}) == 15625
    assert v.bindings.override_values({"w": 7}) == {"W": 7, "RUN": 64}
    assert pkg.contract.bindings.override_values({"w": 7}) == {"W": 7, "RUN": 512}   # the original is untouched
    with pytest.raises(StudioError, match="not a tune candidate"):
        variant(pkg.contract, {"RUN": 100})


# ------------------------------------------------------------------ the checker
def test_checker_refuses_a_candidate_that_cannot_launch_at_its_line_col(ctx, tmp_path):
    from studio.engine.proof.checker import check_package
    bad = check_package(ctx, load_package(small_op(tmp_path / "bad", tune="0, 2")), compile_kernel=False)
    e = next(e for e in bad.errors if "tune candidate RUN = 0" in e.message)
    assert "division by zero" in e.message and e.file.endswith("op.toml")
    text = (tmp_path / "bad" / "op.toml").read_text().splitlines()
    assert text[e.line - 1][e.col - 1:].startswith("0, 2]")
    good = check_package(ctx, load_package(small_op(tmp_path / "good")), compile_kernel=False)
    assert good.ok and any("tune candidates launch" in p for p in good.passed)


def test_checker_compiles_each_candidate(ctx, tmp_path):
    """A value wgpu refuses (a zero-length array sized by the override) is named at its candidate."""
    from studio.engine.proof.checker import check_package
    wgsl = "var<workgroup> tile: array<f32, RUN * 64u - 64u>;\n"
    root = small_op(tmp_path / "arr", tune="1, 2", extra_wgsl=wgsl, mutant="99u")
    text = (root / "forward.wgsl").read_text()
    (root / "forward.wgsl").write_text(text.replace("    for (var k", "    tile[0] = 0.0;\n    for (var k"))
    rep = check_package(ctx, load_package(root))
    errs = [e for e in rep.errors if "tune candidate RUN = 1" in e.message]
    assert errs and "wgpu refuses" in errs[0].message, [e.format() for e in rep.errors]
    assert not any("tune candidate RUN = 2" in e.message for e in rep.errors)


def test_the_fast_median_declares_its_tunable_and_passes_the_checker(ctx):
    from studio.engine.proof.checker import check_package
    pkg = load_package(EXAMPLES / "windowed_median_fast")
    (o,) = [o for o in pkg.contract.bindings.overrides if o.tunable]
    assert (o.name, o.value.eval({}), o.candidates) == ("RUN", 512, (64, 128, 256, 512, 1024, 2048))
    rep = check_package(ctx, pkg)
    assert rep.ok, [e.format() for e in rep.errors]
    assert any("tune candidates launch within the adapter's limits and compile" in p for p in rep.passed)


# ------------------------------------------------------------------ tune, record, run
def _scellis(home: Path, *args):
    env = {**os.environ, "SCELLIS_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.fixture(scope="module")
def tuned_op(tmp_path_factory):
    """`scellis tune` on the small op, once: its home, package root and JSON result."""
    home = tmp_path_factory.mktemp("tunehome")
    old = os.environ.get("SCELLIS_HOME")
    os.environ["SCELLIS_HOME"] = str(home)          # copy_package records the package as authored there
    try:
        root = small_op(tmp_path_factory.mktemp("ops") / "addrun")
    finally:
        if old is None:
            os.environ.pop("SCELLIS_HOME")
        else:
            os.environ["SCELLIS_HOME"] = old
    r = _scellis(home, "tune", root, "--size", 4096, "--repeats", 2, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    return home, root, json.loads(r.stdout)


def _ctx(home, device, hosts):
    from studio.engine.context import Context
    return Context.open(home=home, device=device, hosts=hosts)


@pytest.mark.slow
def test_a_fast_but_wrong_candidate_is_rejected_and_never_recorded(tuned_op):
    home, root, out = tuned_op
    by = {c["values"]["RUN"]: c for c in out["candidates"]}
    assert set(by) == {1, 2, 8}
    assert by[8]["proven"] is False and "never written" in by[8]["failure"] and by[8]["seconds"] == []
    assert by[1]["proven"] and by[2]["proven"] and by[1]["seconds"] and by[2]["seconds"]
    assert out["winner"] in ({"RUN": 1}, {"RUN": 2}) and out["default"] == {"RUN": 2}
    rec = json.loads(Path(out["record"]).read_text())
    assert rec["classes"]["*"]["winner"] != {"RUN": 8} and rec["package_hash"] == out["hash"]
    assert Path(out["record"]).parent.name == load_package(root).hash


@pytest.mark.slow
def test_a_run_uses_the_tuned_value_and_says_so(tuned_op, tmp_path, device, hosts):
    home, root, out = tuned_op
    winner = out["winner"]["RUN"]
    x = tmp_path / "a.npy"
    np.save(x, np.arange(300, dtype=np.float32))
    r = _scellis(home, "run", root, "--input", f"a={x}", "--input", f"b={x}", "--out", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr
    assert f"RUN={winner} (tuned on this GPU profile, class *; proven by conformance" in r.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), 2 * np.arange(300, dtype=np.float32))


@pytest.mark.slow
def test_a_run_uses_a_recorded_winner_other_than_the_default(tuned_op, tmp_path, hosts):
    """Deterministic whatever the timing: a record (sealed here) naming RUN=1 makes the run's
    pipeline specialise RUN=1, where the declared default is 2."""
    from studio.engine.device.device import Device
    from studio.engine.records.writer import write_record
    from studio.engine.services import actions
    from studio.engine.services.tuning import read_tuning, record_path
    home, root, _ = tuned_op
    dev = Device()                     # a fresh device: its pipeline cache holds only this run's
    ctx = _ctx(home, dev, hosts)
    pkg = load_package(root)
    path = record_path(pkg, dev.profile.id, ctx.seal)
    good = path.read_text()
    doc = read_tuning(pkg, dev.profile.id, ctx.seal)
    doc["classes"]["*"]["winner"] = {"RUN": 1}
    try:
        write_record(path, {k: v for k, v in doc.items() if k != "seal"}, ctx.seal)
        a = np.arange(500, dtype=np.float32)
        y = actions.run(ctx, pkg, inputs={"a": a, "b": a}, params={})["y"]
        assert np.array_equal(y, 2 * a)
        ran = [json.loads(k[3]) for k in dev._pipelines]
        assert ran == [{"RUN": 1}]
    finally:
        path.write_text(good)


@pytest.mark.slow
def test_no_candidate_that_failed_conformance_is_ever_run(tuned_op, device, hosts):
    """Even a record sealed here that names the mutant as winner: it was not proven, so the default runs."""
    from studio.engine.records.writer import write_record
    from studio.engine.services.tuning import read_tuning, record_path, tuned
    home, root, _ = tuned_op
    ctx = _ctx(home, device, hosts)
    pkg = load_package(root)
    path = record_path(pkg, device.profile.id, ctx.seal)
    good = path.read_text()
    try:
        doc = read_tuning(pkg, device.profile.id, ctx.seal)
        doc["classes"]["*"]["winner"] = {"RUN": 8}
        write_record(path, {k: v for k, v in doc.items() if k != "seal"}, ctx.seal)
        run_pkg, info = tuned(ctx, pkg)
        assert info["source"] == "declared" and "not a proven candidate" in info["why"]
        assert run_pkg.contract.bindings.override_values({"n": 4}) == {"RUN": 2}
    finally:
        path.write_text(good)


@pytest.mark.slow
def test_a_tampered_tuning_record_is_refused(tuned_op, device, hosts):
    from studio.engine.services.tuning import read_tuning, record_path, tuned
    home, root, _ = tuned_op
    ctx = _ctx(home, device, hosts)
    pkg = load_package(root)
    path = record_path(pkg, device.profile.id, ctx.seal)
    good = path.read_text()
    doc = json.loads(good)
    doc["classes"]["*"]["winner"] = {"RUN": 1 if doc["classes"]["*"]["winner"] == {"RUN": 2} else 2}
    try:
        path.write_text(json.dumps(doc))
        with pytest.raises(StudioError, match="edited after it was sealed") as e:
            read_tuning(pkg, device.profile.id, ctx.seal)
        assert e.value.field.startswith("classes.*.winner")
        run_pkg, info = tuned(ctx, pkg)
        assert info["source"] == "declared" and info["why"].startswith("tuning record refused")
        assert run_pkg is pkg
    finally:
        path.write_text(good)
    assert tuned(ctx, pkg)[1]["source"] == "tuned"         # the control: the sealed record counts


@pytest.mark.slow
def test_a_kernel_edit_invalidates_the_record(tuned_op, tmp_path, device, hosts):
    from studio.engine.services.tuning import tuned
    home, root, _ = tuned_op
    ctx = _ctx(home, device, hosts)
    assert tuned(ctx, load_package(root))[1]["source"] == "tuned"
    edited = tmp_path / "edited"
    import shutil
    shutil.copytree(root, edited)
    (edited / "forward.wgsl").write_text((root / "forward.wgsl").read_text() + "// an edit\n")
    pkg = load_package(edited)
    run_pkg, info = tuned(ctx, pkg)
    assert info == {"values": {"RUN": 2}, "source": "declared", "proven": False, "why": "no tuning record"}
    assert run_pkg is pkg


def test_without_a_record_the_declared_default_runs(ctx):
    from studio.engine.services.tuning import tuned
    pkg = load_package(EXAMPLES / "windowed_median_fast")
    run_pkg, info = tuned(ctx, pkg, {"w": 7})
    assert run_pkg is pkg and info["values"] == {"RUN": 512} and info["source"] == "declared"
    assert tuned(ctx, load_package(EXAMPLES / "windowed_median"))[1] == {}     # no tunable: nothing to say


def test_tune_refuses_an_op_without_tunables_and_a_bad_param(ctx):
    from studio.engine.proof.tuning import combinations, timing_cases
    with pytest.raises(StudioError, match="declares no tunable override"):
        combinations(load_package(EXAMPLES / "windowed_median"))
    with pytest.raises(StudioError, match="has no parameter q"):
        timing_cases(load_package(EXAMPLES / "windowed_median_fast"), {"q": 1}, [100])


@pytest.mark.slow
def test_a_workflow_step_runs_the_tuned_value_and_its_record_says_so(tuned_op, tmp_path, device, hosts):
    from studio.engine.workflow.run import run_workflow
    from studio.engine.workflow.spec import load_workflow
    home, root, out = tuned_op
    ctx = _ctx(home, device, hosts)
    wf = tmp_path / "wf.toml"
    wf.write_text('[workflow]\nname = "tuned"\nsummary = "one tuned step"\n\n'
                  '[sources.a]\nvalues = [1.0, 2.0, 3.0, 4.0, 5.0]\n\n'
                  f'[steps.add]\nop = "{root}"\ninputs = {{ a = "a", b = "a" }}\n')
    res = run_workflow(ctx, load_workflow(wf), allow_unverified=True)
    assert np.array_equal(res.value("add.y"), np.array([2, 4, 6, 8, 10], np.float32))
    step = res.steps["add"].to_record(res)
    assert step["tuning"]["source"] == "tuned" and step["tuning"]["proven"] is True
    assert step["tuning"]["values"] == out["winner"] and step["package_hash"] == out["hash"]
    assert res.steps["add"].plan.pkg.contract.bindings.override_values({}) == out["winner"]


# ------------------------------------------------------------------ the Studio's Tune panel
@pytest.mark.slow
def test_the_tune_panel_plots_every_candidate_and_marks_the_failing_one(qtbot, tuned_op):
    from studio.app.panels.tune import FAILED, WINNER, TunePanel
    from studio.engine.services.tuning import TuneReport
    _, _, out = tuned_op
    panel = TunePanel()
    qtbot.addWidget(panel)
    panel.show_result(msgspec.convert(out, TuneReport))         # `scellis tune --json`, read back as the report
    bars = {b["label"]: b for b in panel.bars}
    assert set(bars) == {"RUN=1", "RUN=2", "RUN=8 (fails)"}
    assert bars["RUN=8 (fails)"]["failed"] and bars["RUN=8 (fails)"]["colour"] == FAILED
    win = f"RUN={out['winner']['RUN']}"
    assert bars[win]["colour"] == WINNER and bars[win]["ms"] > 0
    assert "1 candidate(s) fail conformance and are never used" in panel.status.text()
    assert "FAILS conformance" in panel.text.toPlainText()


def test_the_tune_panel_refuses_bad_input_with_a_message(qtbot):
    from studio.app.panels.tune import TunePanel
    panel = TunePanel()
    qtbot.addWidget(panel)
    panel.params.setText("w=seven")
    panel.run()
    assert panel.status.text() == "tuning failed" and "NAME=NUMBER" in panel.text.toPlainText()
    assert panel.thread is None and panel.run_button.isEnabled()
    panel.params.setText("w=7")
    panel.sizes.setText("0")
    panel.run()
    assert "sizes" in panel.text.toPlainText() and panel.thread is None


def test_the_tune_panel_is_in_the_tools_menu(qtbot):
    from studio.app.panels.tune import TunePanel
    from studio.app.shell.window import MainWindow
    from studio.app.bridge.worker_bridge import DeviceWorkers
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    qtbot.addWidget(win)
    try:
        act = next(a for a in win.menus.menu("tools").actions() if a.text() == "&Tune kernel…")
        assert win.tune_dock.isHidden()
        act.trigger()
        assert not win.tune_dock.isHidden() and isinstance(win.tune_dock.panel, TunePanel)
    finally:
        win.shutdown()


# ------------------------------------------------------------------ the command's exits
def test_tune_on_an_op_without_tunables_is_a_usage_error(tmp_path):
    r = _scellis(tmp_path, "tune", "user/demo/windowed_median@1")
    assert r.returncode == 2 and "declares no tunable override" in r.stderr and "Traceback" not in r.stderr
    r = _scellis(tmp_path, "tune", "user/demo/windowed_median_fast@1", "--only", "RUN=3")
    assert r.returncode == 2 and "none of [3] is a tune candidate" in r.stderr


@pytest.mark.slow
def test_when_every_candidate_fails_nothing_is_recorded_and_the_exit_is_1(tmp_path, _isolated_home):
    root = small_op(tmp_path / "allbad", tune="2, 8", mutant="RUN")   # `if (RUN == RUN)`: every value is wrong
    r = _scellis(_isolated_home, "tune", root, "--size", 1024, "--repeats", 1)
    assert r.returncode == 1, r.stderr + r.stdout
    assert r.stdout.count("FAILS conformance: never timed, never chosen") == 2
    assert "no candidate passes conformance: nothing recorded" in r.stdout
    assert not (_isolated_home / "tuning").exists()


@pytest.mark.slow
def test_the_fast_median_is_tuned_recorded_and_used_by_a_run(tmp_path, _isolated_home):
    """Tuning end to end, on two candidates: each proven on the whole corpus, timed,
    the winner recorded for class w=7, and `scellis run --param w=7` says it ran it, proven."""
    r = _scellis(_isolated_home, "tune", "user/demo/windowed_median_fast@1", "--param", "w=7", "--only",
                 "RUN=256,512", "--size", 20000, "--repeats", 1, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [c["values"]["RUN"] for c in out["candidates"]] == [512, 256]          # the declared default first
    assert all(c["proven"] and c["cases"] > 300 for c in out["candidates"])
    assert out["class"] == "w=7" and Path(out["record"]).is_file()
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).standard_normal(3000).astype(np.float32))
    r = _scellis(_isolated_home, "run", "user/demo/windowed_median_fast@1", "--param", "w=7", "--input", x)
    assert r.returncode == 0, r.stderr
    assert f"RUN={out['winner']['RUN']} (tuned on this GPU profile, class w=7; proven by conformance" in r.stderr
    r = _scellis(_isolated_home, "run", "user/demo/windowed_median_fast@1", "--param", "w=5", "--input", x)
    assert "RUN=512 (declared default: the tuning record has no class w=5 or *)" in r.stderr
