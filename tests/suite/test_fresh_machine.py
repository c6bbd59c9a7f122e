"""A fresh machine gets right answers or a clear refusal: never wgpu's OpenGL backend
for compute unless asked, the main job proves every op it runs, the set-up script's decisions,
and a real X11 window. Every check here runs real wgpu, real subprocesses, a real X server."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, MEDIAN, REPO

BROKEN = EXAMPLES / "broken_medians" / "wrong_middle"


def scellis(*args, env=None, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


GL = {"WGPU_BACKEND_TYPE": "OpenGL"}


def _has_gl_adapter() -> bool:
    import wgpu
    return any(a.info["backend_type"] == "OpenGL" for a in wgpu.gpu.enumerate_adapters_sync())


def test_the_adapter_in_use_is_never_opengl(device):
    assert device.profile.backend in ("Vulkan", "Metal", "D3D12"), device.profile.summary
    assert device.profile.to_json()["backend"] == device.profile.backend
    assert device.profile.to_json()["trusted_backend"] is True


@pytest.mark.slow
def test_profile_command_records_the_backend():
    res = scellis("profile")
    assert res.returncode == 0, res.stderr
    prof = json.loads(res.stdout)
    assert prof["backend"] == prof["adapter"]["backend_type"]
    assert prof["backend"] in ("Vulkan", "Metal", "D3D12") and prof["trusted_backend"] is True


def _assert_refusal(res):
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "OpenGL" in res.stderr and "not trustworthy" in res.stderr
    assert "apt-get install mesa-vulkan-drivers" in res.stderr and "--allow-opengl" in res.stderr


@pytest.mark.slow
def test_forced_opengl_main_job_refuses_and_draws_nothing(tmp_path):
    out = tmp_path / "demo.png"
    res = scellis("demo", "--n", "20000", "--out", out, env=GL)
    _assert_refusal(res)
    assert not out.exists()


@pytest.mark.slow
def test_forced_opengl_story_workflow_refuses_and_draws_nothing(tmp_path):
    out = tmp_path / "story.png"
    res = scellis("workflow", "run", "--prove", "--plot", out, env=GL, cwd=tmp_path)
    _assert_refusal(res)
    assert not out.exists() and not list(tmp_path.glob("*.record.json"))


@pytest.mark.slow
def test_forced_opengl_run_and_conform_refuse(tmp_path, pkg_copy):
    pkg = pkg_copy()
    np.save(tmp_path / "x.npy", np.arange(16, dtype=np.float32))
    _assert_refusal(scellis("run", pkg, "--param", "w=3", "--input", tmp_path / "x.npy", env=GL))
    _assert_refusal(scellis("conform", pkg, "--no-receipt", env=GL))
    _assert_refusal(scellis("profile", env=GL))


@pytest.mark.slow
def test_opted_in_opengl_main_job_proves_first_and_stops_on_the_wrong_median(tmp_path):
    """Opting in does not mean trusting: the job runs conformance on the GL profile first, and the
    story median's wrong outputs there stop it with the failing case, never a plot. ./test.sh's
    set-up installs Mesa's OpenGL driver, so an OpenGL adapter is there to opt into."""
    assert _has_gl_adapter(), "no OpenGL adapter: install libegl-mesa0 libgl1-mesa-dri (scripts/setup.sh test)"
    out = tmp_path / "demo.png"
    res = scellis("--allow-opengl", "demo", "--n", "20000", "--out", out, env=GL)
    assert res.returncode != 0 and not out.exists()
    assert "user/demo/windowed_median@1 fails conformance" in res.stderr, res.stdout + res.stderr
    assert "first failure  case" in res.stderr and "reproduce" in res.stderr


def test_choose_adapter_refuses_opengl_unless_opted_in(monkeypatch):
    import wgpu

    from studio.engine.device.device import choose_adapter
    from studio.engine.errors import StudioError
    monkeypatch.setenv("WGPU_BACKEND_TYPE", "OpenGL")
    monkeypatch.delenv("SCELLIS_ALLOW_OPENGL", raising=False)
    assert _has_gl_adapter(), "no OpenGL adapter: install libegl-mesa0 libgl1-mesa-dri (scripts/setup.sh test)"
    with pytest.raises(StudioError, match="not trustworthy"):
        choose_adapter(wgpu)
    assert choose_adapter(wgpu, allow_opengl=True).info["backend_type"] == "OpenGL"
    monkeypatch.setenv("SCELLIS_ALLOW_OPENGL", "1")
    assert choose_adapter(wgpu).info["backend_type"] == "OpenGL"


def test_main_job_proves_its_ops_then_plots_the_right_median(ctx, tmp_path):
    from studio.engine.services.demo import spike_removal
    proofs = []
    r = spike_removal(ctx, n=50_000, w=7, seed=3, on_proof=proofs.append)
    assert [p.op for p in proofs] == ["core/signal/spiky_signal@1", "user/demo/windowed_median@1"]
    assert all(p.status in ("valid", "earned") for p in proofs)
    x, y = r["x"], r["y"]
    expect = np.median(np.lib.stride_tricks.sliding_window_view(x, 7), axis=1).astype(np.float32)
    assert np.array_equal(y, expect)            # the plotted curve is the true median, bit for bit
    assert np.sum(np.abs(x[3:-3] - y) > 2.0) > 50   # and it removed spikes


@pytest.mark.slow
def test_demo_command_prints_its_proofs_and_writes_the_plot(tmp_path):
    out = tmp_path / "demo.png"
    res = scellis("demo", "--n", "20000", "--out", out)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("proof ") == 2, res.stdout
    assert any(f"[{b}, " in res.stdout for b in ("Vulkan", "Metal", "D3D12")), res.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_require_receipt_refuses_a_failing_op_and_proves_a_good_one(tmp_path, pkg_copy):
    np.save(tmp_path / "x.npy", np.array([0, 0, 9, 0, 0, 1, 1, -7, 1, 1], np.float32))
    bad = pkg_copy(BROKEN, "bad")
    res = scellis("run", bad, "--param", "w=3", "--input", tmp_path / "x.npy", "--out", tmp_path / "y.npy",
                  "--require-receipt")
    assert res.returncode == 1 and "fails conformance" in res.stderr and "first failure" in res.stderr  # a failed check
    assert "running anyway" not in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "y.npy").exists()
    good = pkg_copy(MEDIAN, "good")
    # the proof has its own budget: conformance takes longer than this run's 2 s, and is not blamed for it
    res = scellis("run", good, "--param", "w=3", "--input", tmp_path / "x.npy", "--out", tmp_path / "y.npy",
                  "--require-receipt", "--timeout", "2", timeout=300)
    assert res.returncode == 0, res.stderr
    assert np.load(tmp_path / "y.npy").tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    home = Path(os.environ["SCELLIS_HOME"])           # conformance ran first and earned a receipt
    assert list(home.glob("receipts/*/*.json")) or list((good / "receipts").glob("*.json"))
    assert "no valid conformance receipt" not in res.stderr
    assert "so conformance ran first" in res.stderr and "relies on receipt" in res.stderr   # stderr names it


# ------------------------------------------------------------------ the set-up script's decisions
def setup_dry(env):
    return subprocess.run(["bash", str(REPO / "scripts" / "setup.sh")], capture_output=True, text=True,
                          env={**os.environ, "SETUP_DRY_RUN": "1", "SETUP_PYTHON": sys.executable, **env})


def test_setup_installs_the_vulkan_driver_when_only_opengl_is_found():
    res = setup_dry({"WGPU_BACKEND_TYPE": "OpenGL"})
    assert res.returncode == 0, res.stderr
    assert "would install mesa-vulkan-drivers" in res.stdout, res.stdout + res.stderr


def test_setup_leaves_a_vulkan_machine_alone():
    env = {k: v for k, v in os.environ.items() if k != "WGPU_BACKEND_TYPE"}
    res = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh")], capture_output=True, text=True,
                         env={**env, "SETUP_DRY_RUN": "1", "SETUP_PYTHON": sys.executable})
    assert res.returncode == 0, res.stderr
    assert "mesa-vulkan-drivers" not in res.stdout and "[Vulkan]" in res.stderr


@pytest.mark.slow
def test_a_second_setup_with_nothing_changed_returns_at_once(tmp_path):
    """./studio.sh runs setup at every launch: with a stamp of its inputs unchanged, it returns at
    once; any input changed (the script, the backend variable) runs it again. A copy of the script
    in a temporary checkout, whose .venv python is this one (pip has nothing to do: its stamp is new)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    (repo / ".venv" / "bin").mkdir(parents=True)
    py = repo / ".venv" / "bin" / "python"
    py.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    (repo / ".venv" / ".installed").touch()
    env = {k: v for k, v in os.environ.items() if k not in ("SETUP_DRY_RUN", "SETUP_FORCE", "DISPLAY",
                                                             "WAYLAND_DISPLAY", "WGPU_BACKEND_TYPE")}

    def setup(**extra):
        return subprocess.run(["bash", str(repo / "scripts" / "setup.sh")], capture_output=True, text=True,
                              env={**env, **extra}, cwd=repo, timeout=300)
    stamp = repo / ".venv" / ".setup-main"

    def ran(**extra) -> bool:      # a full run writes the stamp again; a skipped one touches nothing
        before = stamp.stat().st_mtime_ns if stamp.exists() else None
        time.sleep(0.01)
        res = setup(**extra)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        return stamp.stat().st_mtime_ns != before
    assert ran() and stamp.is_file()
    assert not ran()                                       # the second launch: nothing changed
    assert ran(WGPU_BACKEND_TYPE="Vulkan")                 # an input changed
    assert not ran(WGPU_BACKEND_TYPE="Vulkan")
    with open(repo / "scripts" / "setup.sh", "a") as f:
        f.write("\n# an edit of the script\n")
    assert ran(WGPU_BACKEND_TYPE="Vulkan")
    assert ran(WGPU_BACKEND_TYPE="Vulkan", SETUP_FORCE="1")
    dry = setup(SETUP_DRY_RUN="1", SETUP_PYTHON=sys.executable)       # a dry run never skips
    assert dry.returncode == 0 and "compute adapter" in dry.stderr


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="the xcb check reads Debian's package database")
def test_setup_names_the_xcb_libraries_qt_needs_on_a_display():
    res = setup_dry({"DISPLAY": ":99"})
    missing = [p for p in ("libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxkbcommon-x11-0")
               if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                                 text=True).stdout.find("install ok installed") < 0]
    for p in missing:
        assert p in res.stdout
    if not missing:
        assert "xcb" not in res.stdout


# ------------------------------------------------------------------ a real window on X11
WINDOW = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
if __name__ == "__main__":   # the device worker is a spawned child that imports this file
    app = QApplication(sys.argv)
    from studio.app.shell.window import MainWindow
    w = MainWindow(); w.resize(1000, 700); w.show()
    def done():
        img = w.grab().toImage()
        lit = len({img.pixel(x, y) for x in range(0, img.width(), 37) for y in range(0, img.height(), 37)})
        print("platform", app.platformName(), "visible", w.isVisible(), "colours", lit, flush=True)
        app.quit()
    QTimer.singleShot(1500, done)
    app.exec()
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is installed by ./test.sh's set-up")
def test_studio_opens_a_real_window_on_x11(tmp_path):
    display = f":{90 + os.getpid() % 500}"
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        script = tmp_path / "window.py"
        script.write_text(WINDOW)
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60,
                             cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert "platform xcb visible True" in res.stdout, res.stdout + res.stderr
        assert int(res.stdout.split("colours")[1]) > 3, res.stdout      # drawn, not a blank window
    finally:
        xvfb.terminate()
        xvfb.wait(10)


# ------------------------------------------------------------------ a plain (non-editable) install
@pytest.mark.slow
def test_a_plain_install_runs_a_builtins_conformance(tmp_path):
    """pip install of a wheel (not -e) into a fresh venv: the builtins, grammars and templates come
    from package data. The dependencies come from this venv (a .pth line), the project only from the
    wheel; the commands run from a folder outside the repository."""
    wheels = tmp_path / "wheels"
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "deps.pth").write_text("\n".join(deps) + "\n")
    wheel = next(wheels.glob("scellis_studio-*.whl"))
    res = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                          "--no-index", "--ignore-installed", str(wheel)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": ""})
    assert res.returncode == 0, res.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "SCELLIS_HOME": str(tmp_path / "home"), "PYTHONPATH": ""}
    where = subprocess.run([str(py), "-c", "import studio, studio.engine.resources as r; print(studio.__file__);"
                            "print(r.BUILTINS)"], capture_output=True, text=True, env=env, cwd=work)
    assert where.returncode == 0, where.stderr
    assert str(site) in where.stdout.splitlines()[0], where.stdout + where.stderr   # not the checkout
    assert str(REPO) not in where.stdout
    api = subprocess.run([str(py), "-c", "import scellis; print(scellis.__file__, scellis.op.__name__)"],
                         capture_output=True, text=True, env=env, cwd=work)     # the public API is in the wheel
    assert api.returncode == 0 and str(site) in api.stdout, api.stdout + api.stderr
    scellis_bin = venv / "bin" / "scellis"
    listed = subprocess.run([str(scellis_bin), "ops", "list"], capture_output=True, text=True, env=env, cwd=work)
    assert listed.returncode == 0, listed.stderr
    assert "core/signal/affine@1" in listed.stdout and "user/demo/windowed_median@1" in listed.stdout
    conf = subprocess.run([str(scellis_bin), "conform", "core/signal/affine@1"], capture_output=True, text=True,
                          env=env, cwd=work, timeout=300)
    assert conf.returncode == 0, conf.stdout + conf.stderr
    assert "verdict   : PASS" in conf.stdout and "receipt" in conf.stdout
    check = subprocess.run([str(scellis_bin), "check", "user/demo/windowed_median@1"], capture_output=True,
                           text=True, env=env, cwd=work, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    # the data-parallel ResNet from the wheel: its images are package data, its owners Dask workers
    resnet = site / "studio" / "resources" / "workflows" / "resnet_digits.toml"
    train = subprocess.run([str(scellis_bin), "train", str(resnet), "--owners", "1", "--steps", "1",
                            "--allow-unverified", "--out-dir", str(work)], capture_output=True, text=True, env=env,
                           cwd=work, timeout=300)
    assert train.returncode == 0, train.stdout + train.stderr
    assert "held-out accuracy" in train.stdout and (work / "resnet_digits.record.json").is_file()
