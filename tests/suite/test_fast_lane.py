"""The fast lane (``pytest -m "not slow"``) still touches every module of studio/:
scripts/fast_lane_coverage.py runs it under coverage and names each module none of whose function
bodies ran. Its own controls run it on a small project of their own; the real check runs the whole
lane, so it is in the slow lane (CI)."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "fast_lane_coverage.py"


def _checker():
    spec = importlib.util.spec_from_file_location("fast_lane_coverage", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


PROJECT = {
    "pytest.ini": "[pytest]\nmarkers =\n    slow: long-running\n",
    "pkg/__init__.py": "",
    "pkg/called.py": '''
        def f():
            """Docstring."""
            return 1
        ''',
    "pkg/imported_only.py": '''
        def g():
            """Only its def line runs when the module is imported."""
            return 2
        ''',
    "pkg/unreached.py": '''
        def h():
            return 3
        ''',
    "pkg/constants.py": "X = 1\n",
    "pkg/in_worker.py": '''
        def w():
            return 4
        ''',
    "pkg/resources/op/reference.py": '''
        def ref():
            return 5
        ''',
    "tests/test_pkg.py": '''
        import multiprocessing as mp

        import pytest

        from pkg import called, constants, imported_only, in_worker


        def test_called():
            assert called.f() == 1 and constants.X == 1


        def test_worker_counts():
            p = mp.get_context("spawn").Process(target=in_worker.w)   # runs only in the child
            p.start()
            p.join(60)
            assert p.exitcode == 0


        @pytest.mark.slow
        def test_unreached_in_the_fast_lane():
            from pkg import unreached
            assert unreached.h() == 3
        ''',
}


def _run(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}    # not measured by a lane around it
    return subprocess.run([sys.executable, str(SCRIPT), "--package", str(project / "pkg"), "--cwd", str(project),
                           *args], capture_output=True, text=True, timeout=300, env=env)


def test_the_checker_names_each_module_the_lane_does_not_reach(tmp_path):
    _write(tmp_path, PROJECT)
    result = tmp_path / "verdict.json"
    res = _run(tmp_path, "--result", str(result))
    assert res.returncode == 1, res.stdout + res.stderr
    # the --result file says what it printed: the verdict the whole suite's slow lane reads
    verdict = json.loads(result.read_text())
    assert verdict_failures(verdict) == ["untouched: pkg/imported_only.py", "untouched: pkg/unreached.py"]
    assert verdict_failures({**verdict, "untouched": [], "pytest_rc": 1}) == ["the lane failed (pytest exit status 1)"]
    assert verdict_failures({**verdict, "untouched": [], "marker": "slow"}) == \
        ["the lane was -m 'slow', not the fast lane"]
    assert verdict_failures({**verdict, "untouched": []}) == []
    named = {line.strip() for line in res.stderr.splitlines() if re.fullmatch(r"  \S+\.py", line)}
    # imported but no function body ran; never imported (its test is slow); the worker's module counts,
    # and so does a module of constants that was imported; op data under resources/ is not judged
    assert named == {"pkg/imported_only.py", "pkg/unreached.py"}, res.stderr
    assert "2 of 6 modules" in res.stderr


def test_the_checker_passes_when_every_module_is_reached(tmp_path):
    _write(tmp_path, {**PROJECT, "tests/test_more.py": "from pkg import imported_only\n\n\n"
                                                       "def test_g():\n    assert imported_only.g() == 2\n"})
    res = _run(tmp_path, "--marker", "slow or not slow")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all 6 modules touched" in res.stdout


@pytest.mark.slow
def test_a_failing_lane_fails_the_check(tmp_path):
    _write(tmp_path, {**PROJECT, "tests/test_more.py": "def test_broken():\n    assert False\n"})
    res = _run(tmp_path, "--marker", "slow or not slow", "--", "-k", "broken or called or worker or unreached")
    assert res.returncode == 1
    assert "the lane failed under coverage (pytest exit status 1)" in res.stderr
    assert "pkg/imported_only.py" in res.stderr


def test_function_bodies_exclude_docstrings_and_module_level_code():
    lines = _checker().body_lines('X = 1\n\ndef f():\n    """Doc."""\n    return X\n\nclass C:\n'
                                  '    def m(self):\n        return 2\n')
    assert lines == {5, 9}
    assert _checker().body_lines("X = 1\nY = 2\n") is None


def test_the_host_only_modules_count_when_a_host_answered_ready():
    checker = _checker()
    studio = REPO / "studio"
    pool = studio / "engine" / "trust" / "pool.py"
    ready = checker.body_lines(pool.read_text(), "_wait_ready")
    assert ready and ready < checker.body_lines(pool.read_text())
    others = checker.body_lines(pool.read_text()) - ready
    host_only = {"studio/engine/trust/host.py", "studio/engine/trust/seccomp.py", "studio/engine/trust/namespaces.py"}
    assert host_only <= set(checker.untouched(studio, {str(pool.resolve()): others}))   # the pool, but no host
    assert not host_only & set(checker.untouched(studio, {str(pool.resolve()): {min(ready)}}))


def test_a_missing_package_is_a_usage_error(tmp_path, capsys):
    assert _checker().main(["--package", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere: no such folder" in err


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_fast_lane_touches_every_module_of_studio():
    """./test.sh ran the fast lane under coverage as its first lane and names the checker's verdict in
    SCELLIS_FAST_LANE_RESULT: the lane is judged on that run, not run a second time. Run any other way,
    the test runs the checker itself."""
    result = os.environ.get("SCELLIS_FAST_LANE_RESULT")
    if result:
        verdict = json.loads(Path(result).read_text(encoding="utf-8"))
        assert verdict_failures(verdict) == [], verdict
        return
    res = subprocess.run([sys.executable, str(SCRIPT)], cwd=REPO, capture_output=True, text=True, timeout=3500)
    assert res.returncode == 0, res.stderr[-4000:]


def verdict_failures(verdict: dict) -> list[str]:
    """What the checker's recorded verdict says went wrong (empty: the fast lane passed, every module touched)."""
    out = [f"untouched: {m}" for m in verdict["untouched"]]
    if verdict["marker"] != "not slow":
        out.append(f"the lane was -m {verdict['marker']!r}, not the fast lane")
    if verdict["pytest_rc"] != 0:
        out.append(f"the lane failed (pytest exit status {verdict['pytest_rc']})")
    return out
