"""The benchmark runner: `python -m benchmarks --quick` (the CI mode) exits 0 and writes a
well-formed results/latest.json; its ratio check can fail (a margin that no real run meets).
No test asserts a time: only the schema, and that the check's verdict follows the ratios."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEYS = {"figure", "peer", "time_s", "peer_s", "ratio", "adapter"}

# the peers are the `bench` extra, which test.sh installs with the test extra (scripts/setup.sh)


def _run(tmp_path, *args, env=None):
    out = tmp_path / "latest.json"
    p = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(out), *args], cwd=REPO,
                       capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    return p, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.slow
def test_quick_benchmark_passes_and_writes_results(tmp_path):
    p, rep = _run(tmp_path)
    problems = [ln for ln in p.stdout.splitlines() if ln.startswith(("ERROR", "OVER LIMIT"))]
    assert p.returncode == 0, (problems, p.stdout[-2000:], p.stderr[-3000:])
    assert rep is not None and rep["quick"] is True and not rep["errors"] and not rep["over_limit"]
    assert any(b in rep["adapter"] for b in ("Vulkan", "Metal", "D3D12")), rep["adapter"]
    figures = [r["figure"] for r in rep["rows"]]
    for want in ("median fast kernel n=1e6 w=31", "median story kernel n=1e6 w=7", "engine per-call overhead",
                 "engine transfer cost", "scellis API call", "spike-removal workflow", "Studio cold start"):
        assert any(f.startswith(want) for f in figures), (want, figures)
    for r in rep["rows"]:
        assert KEYS <= set(r), r
        assert r["time_s"] > 0 and r["peer_s"] > 0 and isinstance(r["adapter"], str) and r["adapter"]
        assert r["ratio"] == pytest.approx(r["time_s"] / r["peer_s"], rel=5e-2, abs=1e-3)
    assert "ratio" in p.stdout and "median fast kernel" in p.stdout       # the one table


@pytest.mark.slow
def test_quick_ratio_check_can_fail(tmp_path):
    # a margin of 1e-6 puts every limit far below any ratio the engine can reach: the run must fail
    p, rep = _run(tmp_path, "--only", "median", env={"SCELLIS_BENCH_MARGIN": "1e-6"})
    assert p.returncode == 1, p.stdout[-3000:]
    assert rep["over_limit"] and all(r["ratio"] > r["limit"] for r in rep["rows"] if "limit" in r)
    assert "OVER LIMIT" in p.stdout


def test_limits_follow_the_margin(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    from benchmarks.__main__ import check
    rows = [{"figure": "a", "ratio": 0.5, "limit": 1.0}, {"figure": "b", "ratio": 2.0, "limit": 1.0},
            {"figure": "c", "ratio": 9.0}]
    assert check(rows) == ["b: ratio 2.0 > limit 1.0"]
