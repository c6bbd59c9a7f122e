"""`scellis`: exit 0 ok, 1 check failed, 2 usage or input error; never a traceback for user errors."""
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import MEDIAN


def scellis(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.mark.slow
def test_ops_list_lists_the_builtins():
    res = scellis("ops", "list", "--json")
    assert res.returncode == 0
    ops = {o["id"]: o for o in json.loads(res.stdout)}
    assert ops["core/signal/affine@1"]["source"] == "builtin"
    assert ops["user/demo/windowed_median@1"]["source"] == "user"
    text = scellis("ops", "list").stdout
    assert "core/reduce/sum@1" in text and "Clamp each element to [lo, hi]" in text


@pytest.mark.slow
def test_ops_show():
    res = scellis("ops", "show", "user/demo/windowed_median@1", "--json")
    info = json.loads(res.stdout)
    assert info["tolerance"] == "exact" and info["shape_class"] == "static"
    assert "argmedian" in info["subgradient"] or "selected" in info["subgradient"]


def test_run_writes_output(tmp_path):
    x = np.array([0, 0, 9, 0, 0, 1, 1, -7, 1, 1], np.float32)
    np.save(tmp_path / "x.npy", x)
    res = scellis("run", "user/demo/windowed_median@1", "--param", "w=3", "--input", tmp_path / "x.npy",
                  "--out", tmp_path / "y.csv")
    assert res.returncode == 0, res.stderr
    y = np.loadtxt(tmp_path / "y.csv", delimiter=",")
    assert y.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.slow
@pytest.mark.parametrize("args,needle", [
    (("run", "user/demo/windowed_median@1", "--param", "w=8", "--input", "X"), "w = 8 violates 'odd'"),
    (("run", "user/demo/windowed_median@1", "--param", "w=9", "--input", "X"), "w = 9 violates 'w <= n'"),
    (("run", "user/demo/windowed_median@1", "--param", "w=3"), "needs input(s) x"),
    (("run", "user/demo/windowed_median@1", "--param", "w", "--input", "X"), "not NAME=VALUE"),
    (("run", "user/demo/windowed_median@1", "--param", "w=3", "--input", "missing.npy"), "no such file"),
    (("run", "user/demo/windowed_median@1", "--param", "w=3", "--input", "X", "--budget", "16"), "over the run's memory budget"),
    (("run", "user/demo/windowed_median@1", "--param", "w=3", "--input", "X", "--timeout", "nan"), "argument --timeout"),
    (("run", "user/demo/windowed_median@1", "--param", "w=3", "--input", "X", "--out", "."), "only a regular file"),
    (("run", "user/demo/windowed_median@1", "--param", "w=3", "--input", "X", "--out", "z=y.npy"), "no output named 'z'"),
    (("run", "user/demo/windowed_median@1", "--param", "w=3", "--input", "q=X"), "no input named 'q'"),
    (("ops", "show", "user/demo/nope@1"), "no op 'user/demo/nope@1'"),
    (("check", "/nonexistent/folder"), "no op"),
])
def test_user_errors_exit_2_without_traceback(tmp_path, args, needle):
    np.save(tmp_path / "x.npy", np.arange(7, dtype=np.float32))
    args = [str(tmp_path / "x.npy") if a == "X" else a for a in args]
    res = scellis(*args, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr


def test_usage_error_exits_2():
    res = scellis("frobnicate")
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_check_passes_with_exit_0():
    res = scellis("check", MEDIAN)
    assert res.returncode == 0 and "verdict: pass" in res.stdout


@pytest.mark.slow
def test_headless_demo_writes_a_plot(tmp_path):
    out = tmp_path / "demo.png"
    res = scellis("demo", "--out", out, "--n", "200000")
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert "removed spikes" in res.stdout
