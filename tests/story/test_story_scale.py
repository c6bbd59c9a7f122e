"""The story at full scale and the rough edges a new user meets: fir's taps gradient at
10⁶ samples on the device, `--steps` as the step to reach, `--prove --compare` proving the
composite's parts, bf16 outputs that load as numbers, the divisor warning naming only the nodes a
cotangent reaches, the headless plot's title and x label, `core/` refused to a fork, symlinked
packages on the ops path, and a git ring's HEAD. Each check with the case that makes it fail."""
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from conftest import BUILTINS, MEDIAN, copy_package

from studio.engine.arrays import save_array
from studio.engine.contract.catalog import Catalog
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.grad.vjp import device_vjp
from studio.engine.resources import ROOT
from studio.engine.workflow.plan import make_plan, refuse_unverified
from studio.engine.workflow.spec import parse_workflow
from studio.engine.workflow.train import swapped

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "workflows" / "train_median.toml"
COMPOSITE = "user/demo/windowed_median_composite@1"


# ------------------------------------------------------------------ 1. fir's taps gradient at 10⁶
def one_loop(tmp_path) -> Path:
    """fir with the lane sum of its taps gradient replaced by one loop over the whole signal in
    one lane: what the kernel was before it was made a tree."""
    src = (BUILTINS / "fir" / "backward.wgsl").read_text()
    lane_sum = src[src.index("    // BEGIN lane sum"):src.index("    // END lane sum")]
    return copy_package(BUILTINS / "fir", tmp_path / "fir_one_loop", {"backward.wgsl": [(
        lane_sum, "    for (var i = select(m, 0u, lane == 0u); i < m; i = i + 1u) {\n"
                  "        acc = acc + dy[i] * x[i + t];\n    }\n")]})


@pytest.mark.slow
def test_fir_s_device_gradients_at_the_story_size_are_the_reference_s(ctx, device, tmp_path):
    n, rng = 1_000_000, np.random.default_rng(3)     # values with a mean, as the story's are: a sum
    inputs = {"x": rng.uniform(0.5, 1.5, size=n).astype(np.float32),          # cut short shows
              "taps": np.full(5, 0.2, np.float32)}
    cts = {"dy": rng.uniform(-0.5, 1.5, size=n - 4).astype(np.float32)}
    x64, dy64 = inputs["x"].astype(np.float64), cts["dy"].astype(np.float64)
    want = np.array([np.dot(dy64, x64[t:t + n - 4]) for t in range(5)])
    scale = np.array([np.dot(np.abs(dy64), np.abs(x64[t:t + n - 4])) for t in range(5)])
    got = device_vjp(ctx, load_package(BUILTINS / "fir"), inputs, {}, cts)["taps"]
    assert np.all(np.abs(got - want) <= 1e-5 * scale), (got, want)
    if "llvmpipe" in str(device.profile.adapter.get("device")):    # the cap is lavapipe's own
        cut = device_vjp(ctx, load_package(one_loop(tmp_path)), inputs, {}, cts)["taps"]
        assert np.all(np.abs(cut - want) > 1e-2 * scale), (cut, want)


def test_no_lane_of_fir_s_backward_loops_past_lavapipe_s_cap_at_any_admissible_size(device):
    """A lane makes ceil(m / PASS) passes; the largest f32 array a storage binding holds must need
    fewer than lavapipe's 65,535 loop iterations."""
    src = (BUILTINS / "fir" / "backward.wgsl").read_text()
    pass_ = int(src.split("const PASS: u32 = ")[1].split("u;")[0])
    body = src[src.index("// BEGIN lane sum"):src.index("// END lane sum")]
    assert body.count("acc = acc + dy[i] * x[i + t];") * 256 == pass_          # the pass covers PASS terms
    largest = int(device.profile.limits["max-storage-buffer-binding-size"]) // 4
    assert -(-largest // pass_) < 65535


# ------------------------------------------------------------------ 3. --prove --compare proves the parts
def small(tmp_path, n=2048, steps=3) -> tuple[Path, object]:
    text = SHIPPED.read_text().replace("n = 1000000", f"n = {n}").replace("steps = 150", f"steps = {steps}")
    p = tmp_path / "t.toml"
    p.write_text(text)
    return p, parse_workflow(text, file=str(p), base=tmp_path)


def test_the_shipped_training_is_the_story_s_size():
    assert "params = { n = 1000000, seed = 7 }" in SHIPPED.read_text()


def test_an_unproven_composite_s_hint_names_its_parts_not_itself(ctx, tmp_path):
    _, wf = small(tmp_path)
    plan = make_plan(ctx, swapped(wf, {"median": COMPOSITE}))
    with pytest.raises(StudioError) as e:
        refuse_unverified(plan)
    hint = e.value.hint
    assert "`scellis conform core/shape/unfold@1`" in hint and "`scellis conform core/reduce/median_rows@1`" in hint
    assert "windowed_median_composite" not in hint
    plain = make_plan(ctx, wf)                       # a kernel op is conformed by its own folder
    with pytest.raises(StudioError) as e:
        refuse_unverified(plain)
    assert f"`scellis conform {load_package(BUILTINS / 'fir').root}`" in e.value.hint


@pytest.mark.slow
def test_prove_with_compare_proves_the_composite_s_parts(ctx, tmp_path):
    from studio.engine.services.workflows import train
    p, _ = small(tmp_path)
    r = train(ctx, p, prove=True, compare={"median": COMPOSITE}, receipts=tmp_path / "gradcheck", out_dir=tmp_path)
    proved = "\n".join(r["lines"])
    for op in ("core/shape/unfold@1", "core/reduce/median_rows@1"):
        assert f"proof {op}:" in proved and f"gradcheck {op}: PASS" in proved, proved
    assert r["comparison"]["bitwise_equal"] and [x["op"] for x in r["comparison"]["rungs"]][1] == COMPOSITE


# ------------------------------------------------------------------ 4. bf16 outputs load as numbers
def test_a_bf16_output_saves_as_f32_that_np_load_reads(tmp_path):
    values = np.array([1.5, -2.0, 3.140625, 1e-38, -0.0, np.inf], np.float32)
    a = values.astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "raw.npy", a)                                  # what was written before: bytes
    assert np.load(tmp_path / "raw.npy").dtype.kind == "V"
    save_array(tmp_path / "out.npy", a)
    back = np.load(tmp_path / "out.npy")
    assert back.dtype == np.float32 and np.array_equal(back.view(np.uint32), a.astype(np.float32).view(np.uint32))
    assert np.array_equal(back.astype(ml_dtypes.bfloat16).view(np.uint16), a.view(np.uint16))   # exact both ways
    save_array(tmp_path / "out.csv", a.reshape(3, 2))
    assert np.loadtxt(tmp_path / "out.csv", delimiter=",").reshape(-1).tolist()[:3] == [1.5, -2.0, 3.140625]


def test_the_bf16_workflow_s_sink_loads_as_numbers(ctx, tmp_path):
    from studio.engine.services.workflows import run_workflow
    shutil.copytree(ROOT / "workflows" / "bf16_conv", tmp_path / "bf16_conv")
    shutil.copy(ROOT / "workflows" / "bf16_conv.toml", tmp_path / "bf16_conv.toml")
    run_workflow(ctx, tmp_path / "bf16_conv.toml", out_dir=tmp_path, allow_unverified=True)
    dw = np.load(tmp_path / "bf16_conv.dw.npy")
    assert dw.dtype == np.float32 and dw.shape == (6, 4, 3) and np.all(np.isfinite(dw))
    assert np.all(dw.view(np.uint32) & 0xFFFF == 0)                    # bf16 values, widened exactly


# ------------------------------------------------------------------ 5. the divisor warning
def test_the_cotangent_reaches_the_vjp_steps_and_what_they_feed_only():
    from studio.engine.sharding.report import cotangent_reached

    def step(**inputs):
        return SimpleNamespace(inputs={k: SimpleNamespace(node=v) for k, v in inputs.items()})
    plan = SimpleNamespace(order=["x", "w", "conv", "dx", "dw", "conv2", "data_op"],
                           steps={"conv": step(x="x", w="w"), "dx": step(dy="conv", w="w"),
                                  "dw": step(x="x", dy="conv"), "conv2": step(x="dx", w="w"),
                                  "data_op": step(data="x")})
    assert cotangent_reached(plan) == {"dx", "dw", "conv2"}     # conv2: a forward fed a scaled cotangent


# ------------------------------------------------------------------ 7. the headless plot
def _png_rows(path: Path) -> np.ndarray:
    from PySide6.QtGui import QImage
    img = QImage(str(path)).convertToFormat(QImage.Format.Format_Grayscale8)
    ptr = img.constBits()
    rows = np.frombuffer(ptr, np.uint8, img.bytesPerLine() * img.height()).reshape(img.height(), -1)
    return rows[:, :img.width()].copy()                            # the image's memory goes with it


def _runs(column_block: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) row of each run of rows holding dark pixels (text)."""
    dark = list((column_block < 128).any(axis=1)) + [False]
    runs, start = [], None
    for r, d in enumerate(dark):
        if d and start is None:
            start = r
        elif not d and start is not None:
            runs.append((start, r - 1))
            start = None
    return runs


def _apart(runs: list[tuple[int, int]]) -> bool:
    """Tick labels, then the axis label: two runs of text at least 6 rows tall each, 3 blank rows between."""
    tall = [r for r in runs if r[1] - r[0] + 1 >= 6]
    return len(tall) >= 2 and tall[1][0] - tall[0][1] > 3


def test_the_demo_plot_keeps_its_title_and_its_x_label_clear(qtbot, tmp_path):
    from studio.figures import COLOURS, export_plot, signal_plot
    y = np.sin(np.arange(4000) / 50.0)

    def plot():
        return signal_plot([("signal", y, COLOURS[0], 0)], "spike_removal: the story's signal",
                           x_label="sample", y_label="value")
    export_plot(plot(), str(tmp_path / "ok.png"))
    import pyqtgraph.exporters as ex                              # the export as it was: never laid out
    w = plot()
    before = ex.ImageExporter(w.plotItem)
    before.parameters()["width"] = w.width()
    before.export(str(tmp_path / "before.png"))
    for name, clear in (("ok.png", True), ("before.png", False)):
        px = _png_rows(tmp_path / name)
        assert px.shape[1] == 1400
        top_clear = bool((px[:3] > 200).all())                    # nothing drawn on the top edge: no clipped title
        h, mid = px.shape[0], px.shape[1] // 2                    # the x label sits under the middle tick ("2000")
        bottom = px[h - 60:, mid - 40:mid + 40]
        frame = int(np.argmax((bottom < 128).mean(axis=1) > 0.9)) if ((bottom < 128).mean(axis=1) > 0.9).any() else -1
        apart = _apart(_runs(bottom[frame + 2:]))
        assert (top_clear, apart) == (clear, clear), (name, top_clear, apart)


# ------------------------------------------------------------------ 8. ids, catalogs, rings
@pytest.mark.slow
def test_a_fork_cannot_take_the_core_namespace(ctx, tmp_path):
    from studio.engine.services import publishing
    src = load_package(BUILTINS / "clip")
    with pytest.raises(StudioError) as e:
        publishing.fork(ctx, src, "core/me/clip@1", to=tmp_path / "a")
    assert e.value.field == "NEW_ID" and "core/" in e.value.message and not (tmp_path / "a").exists()
    assert publishing.fork(ctx, src, "user/me/clip@1", to=tmp_path / "b").id == "user/me/clip@1"
    r = subprocess.run([sys.executable, "-m", "studio.cli", "fork", "core/signal/clip@1", "core/signal/clip@2",
                        "--to", str(tmp_path / "c")], capture_output=True, text=True, cwd=REPO, env=os.environ)
    assert r.returncode == 2 and "core/" in r.stderr and "Traceback" not in r.stderr and not (tmp_path / "c").exists()


def _median_as(dst: Path, new_id: str) -> Path:
    copy_package(MEDIAN, dst, {"op.toml": [('id = "user/demo/windowed_median@1"', f'id = "{new_id}"')]})
    return dst


def test_a_symlinked_package_on_the_ops_path_is_found_and_loops_are_refused(tmp_path):
    ops, elsewhere = tmp_path / "ops", tmp_path / "elsewhere"
    ops.mkdir()
    kept = _median_as(elsewhere / "kept", "user/me/kept@1")
    (ops / "linked").symlink_to(kept, target_is_directory=True)
    inside = _median_as(ops / "inside", "user/me/inside@1")
    (inside / "sub").mkdir()
    (ops / "into").symlink_to(inside / "sub", target_is_directory=True)       # into a package's middle
    (inside / "again").symlink_to(inside, target_is_directory=True)           # a package linking itself: a loop
    (ops / "loop").symlink_to(ops, target_is_directory=True)                  # the ops folder itself: a loop
    (ops / "dangling").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    cat = Catalog([ops])
    ids = [p.id for p in cat.list()]
    assert ids == ["user/me/inside@1", "user/me/kept@1"]
    assert cat.resolve("user/me/kept@1").root == ops / "linked"
    problems = {Path(e.file).name: e.message for e in cat.problems}
    assert set(problems) == {"into", "again", "loop"}, problems                # a dangling link is no folder
    assert "inside the package" in problems["into"] and "loop" in problems["again"] and "loop" in problems["loop"]


def _git(cwd, *args, check=True):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=check, capture_output=True, text=True)


def test_a_plain_clone_of_a_git_ring_shows_its_files(tmp_path):
    from studio.engine.publish.ring import GitRing
    entry = {"id": "user/me/x@1", "hash": "ab" * 32}
    remote = tmp_path / "remote.git"
    _git(tmp_path, "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(remote))
    # without the ring setting HEAD: a push to main, and a plain clone checks out nothing
    other = tmp_path / "other.git"
    _git(tmp_path, "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(other))
    plain = GitRing("other", str(other), tmp_path / "wc_other")
    plain.sync()
    (plain.root / "index.json").write_text("{}")
    _git(plain.root, "add", "-A")
    _git(plain.root, "commit", "-q", "-m", "x")
    _git(plain.root, "push", "-q", "origin", "HEAD:refs/heads/main")
    _git(tmp_path, "clone", "-q", str(other), "c0")
    assert not (tmp_path / "c0" / "index.json").exists()
    # the ring's publish names its branch as the remote's HEAD
    ring = GitRing("team", str(remote), tmp_path / "wc")
    ring.sync()
    assert ring.publish(entry, {"op.toml": b'id = "user/me/x@1"\n'}, {}) == "pushed"
    assert _git(tmp_path, "--git-dir", str(remote), "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/main"
    _git(tmp_path, "clone", "-q", str(remote), "c1")
    assert (tmp_path / "c1" / "index.json").is_file()
    assert (tmp_path / "c1" / "packages" / entry["hash"] / "op" / "op.toml").is_file()
    # a remote whose HEAD names a branch that exists keeps it
    theirs = tmp_path / "theirs.git"
    _git(tmp_path, "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(theirs))
    seed = tmp_path / "seed"
    _git(tmp_path, "-c", "init.defaultBranch=master", "init", "-q", str(seed))
    (seed / "README").write_text("theirs\n")
    _git(seed, "add", "-A")
    _git(seed, "commit", "-q", "-m", "theirs")
    _git(seed, "push", "-q", str(theirs), "master")
    GitRing("t2", str(theirs), tmp_path / "wc2").publish(entry, {"op.toml": b"x"}, {})
    assert _git(tmp_path, "--git-dir", str(theirs), "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/master"


# ------------------------------------------------------------------ 9. a quiet install
@pytest.mark.slow
def test_a_plain_install_is_quiet_and_carries_the_package_data(tmp_path):
    """`pip install .` (not editable) into a fresh venv, offline: a wheel built from a copy of the
    tree with this interpreter's setuptools (no build isolation), then installed without deps."""
    import setuptools
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__} here; the build needs >= 77 (the test extra installs it)")
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "pyproject.toml", "README.md", "studio", "scellis",
                            "resources", "shaders"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    (src / "resources" / "ops" / "core" / "fir" / "receipts").mkdir()
    (src / "resources" / "ops" / "core" / "fir" / "receipts" / "r.json").write_text("{}")   # never shipped
    def build(tree: Path, dist: Path) -> str:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                                "--no-index", "-w", str(dist), str(tree)], capture_output=True, text=True)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        log = built.stdout + built.stderr
        assert "running build_py" in log                              # the verbose log is the build's own
        return log
    log = build(src, tmp_path / "dist")
    assert "would be ignored" not in log, log[log.index("would be ignored") - 500:][:1500]
    noisy = tmp_path / "noisy"                                        # the package data as it was declared
    shutil.copytree(src, noisy)
    (noisy / "pyproject.toml").write_text((src / "pyproject.toml").read_text().replace(
        "include-package-data = false", "include-package-data = true"))
    assert build(noisy, tmp_path / "noisy_dist").count("Package would be ignored") > 10
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    inst = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                           "--disable-pip-version-check", str(wheel)], capture_output=True, text=True)
    assert inst.returncode == 0 and "would be ignored" not in inst.stdout + inst.stderr, inst.stderr
    site = next((env / "lib").glob("python3*/site-packages"))
    data = site / "studio" / "resources"
    for rel in ("ops/core/fir/op.toml", "ops/core/fir/reference.py", "grammars/backward.lark",
                "workflows/train_median.toml", "shaders/bf16.wgsl"):
        assert (data / rel).is_file(), rel
    assert not list(data.rglob("receipts"))
    def tracked(folder: str, prefix: str = "") -> set[str]:
        return {prefix + str(p.relative_to(REPO / folder)) for p in (REPO / folder).rglob("*")
                if p.is_file() and "receipts" not in p.parts and "__pycache__" not in p.parts and p.suffix != ".pyc"
                and str(p.relative_to(REPO)) in set(files)}
    shipped = tracked("resources") | tracked("shaders", "shaders/")
    installed = {str(p.relative_to(data)) for p in data.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert shipped <= installed, sorted(shipped - installed)[:10]
