"""The suite reports its own time against the budget in pyproject.toml (tests/suite_budget.py)."""
import json
import os
import subprocess
import sys

from suite_budget import REPO, _append, budget, lane_of, report_lines

LIMITS = {"whole_s": 100.0, "fast_s": 10.0, "test_s": 5.0}


def lane(name, wall, files, over=None, tests=3):
    return {"lane": name, "wall_s": wall, "cpu_s": wall * 1.5, "tests": tests, "files": files,
            "over": over or {}}


def test_the_budget_is_read_from_pyproject(tmp_path):
    assert budget()["whole_s"] == 1500 and budget()["test_s"] == 60
    p = tmp_path / "pyproject.toml"
    p.write_text("[tool.scellis.test-budget]\nwhole_s = 42\n")
    assert budget(p) == {"whole_s": 42.0, "fast_s": 180.0, "test_s": 60.0}


def test_the_lane_is_read_from_the_marker_expression():
    assert lane_of("not  slow", False) == "fast" and lane_of("slow", False) == "slow"
    assert lane_of("", False) == "whole" and lane_of("", True) == "part" and lane_of("foo", False) == "part"


def test_a_run_inside_its_budget_prints_its_figures_and_no_warning():
    lines = report_lines([lane("fast", 9.0, {"tests/test_a.py": 5.0, "tests/test_b.py": 3.0})], LIMITS)
    assert lines[0].startswith("suite budget: fast run, 3 tests: 0 min 09.0 s wall, 0 min 13.5 s CPU")
    assert "budget 0 min 10.0 s wall" in lines[0]
    assert lines[2].split() == ["5.0", "s", "tests/test_a.py"]      # slowest first
    assert not [ln for ln in lines if ln.startswith("!!")]


def test_a_run_over_its_budget_warns_loudly_and_names_each_slow_test():
    lines = report_lines([lane("fast", 12.0, {"tests/test_a.py": 12.0},
                               over={"tests/test_a.py::test_x": 7.5})], LIMITS)
    assert any(ln.startswith("!! OVER BUDGET: 0 min 12.0 s against 0 min 10.0 s: 2 s too slow") for ln in lines)
    assert "!! a test over 5 s: 7.5 s  tests/test_a.py::test_x" in lines


def test_the_whole_suite_is_both_lanes_together(tmp_path):
    record = tmp_path / "record.json"
    _append(record, lane("fast", 40.0, {"tests/test_a.py": 30.0}))
    parts = _append(record, lane("slow", 70.0, {"tests/test_a.py": 10.0, "tests/test_c.py": 60.0}))
    assert len(json.loads(record.read_text())) == 2
    lines = report_lines(parts, LIMITS)
    assert lines[0].startswith("suite budget: whole run, 6 tests: 1 min 50.0 s wall")
    assert lines[2].split() == ["60.0", "s", "tests/test_c.py"] and lines[3].split()[0] == "40.0"
    assert lines[-1].startswith("!! OVER BUDGET: 1 min 50.0 s against 1 min 40.0 s")


def test_a_selection_has_no_budget():
    lines = report_lines([lane("part", 500.0, {"tests/test_a.py": 500.0})], LIMITS)
    assert "no budget applies" in lines[0] and not [ln for ln in lines if ln.startswith("!! OVER")]


def test_a_real_run_prints_the_report(tmp_path):
    """A real pytest run of a tiny project with this plugin prints the report at its end."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "def pytest_configure(config):\n"
        "    from suite_budget import SuiteClock\n"
        "    config.pluginmanager.register(SuiteClock(config), 'scellis_suite_budget')\n")
    (tmp_path / "test_t.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "suite budget: whole run, 2 tests:" in res.stdout and "test_t.py" in res.stdout


# ------------------------------------------------------------------ the order: longest files first
def test_files_are_ordered_longest_first_and_a_new_file_counts_as_the_median():
    from suite_order import lane_seconds, longest_first
    record = {"fast": {"a.py": 1.0, "b.py": 9.0}, "slow": {"a.py": 50.0, "c.py": 20.0, "d.py": 30.0}}
    assert lane_seconds(record, "not  slow") == {"a.py": 1.0, "b.py": 9.0}
    assert lane_seconds(record, "") == {"a.py": 51.0, "b.py": 9.0, "c.py": 20.0, "d.py": 30.0}
    slow = lane_seconds(record, "slow")
    # new.py counts as the median (30 s): tied with d.py, and a tie keeps the collection's order
    assert longest_first(["c.py", "new.py", "a.py", "d.py"], slow) == ["a.py", "new.py", "d.py", "c.py"]
    assert longest_first(["x.py", "y.py"], {}) == ["x.py", "y.py"]           # no record: the collection's order


def test_a_real_run_takes_the_longest_file_first_and_records_each_lane(tmp_path):
    """A tiny project: the record says test_b.py is the long one, so it runs first; a run with
    SCELLIS_FILE_SECONDS merges its lane's seconds into the named record."""
    seconds = tmp_path / "seconds.json"
    seconds.write_text(json.dumps({"fast": {"test_a.py": 1.0, "test_b.py": 5.0}}))
    (tmp_path / "conftest.py").write_text(
        f"import sys\nfrom pathlib import Path\nsys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "def pytest_configure(config):\n"
        "    from suite_budget import SuiteClock\n"
        "    from suite_order import LongestFirst\n"
        "    config.pluginmanager.register(SuiteClock(config), 'scellis_suite_budget')\n"
        "    config.pluginmanager.register(LongestFirst(config, Path('seconds.json')), 'scellis_suite_order')\n")
    (tmp_path / "test_a.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "test_b.py").write_text("def test_two():\n    pass\n")
    out = tmp_path / "recorded.json"
    res = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "-m", "not slow"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SCELLIS_FILE_SECONDS": str(out)})
    assert res.returncode == 0, res.stdout + res.stderr
    ran = [ln.split("::")[0] for ln in res.stdout.splitlines() if "PASSED" in ln]
    assert ran == ["test_b.py", "test_a.py"], res.stdout                     # against the collection's a, b
    assert set(json.loads(out.read_text())["fast"]) == {"test_a.py", "test_b.py"}
