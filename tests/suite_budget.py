"""The suite's time budget, reported by the suite itself at the end of every run.

Every run prints its wall and CPU time, its ten slowest test files and every test over the
per-test limit, against the budget written in ``pyproject.toml`` (``[tool.scellis.test-budget]``).
Over budget is a loud warning, never a failure: these machines are noisy, and a timed test is not
a test (docs/testing.md says how to keep a new test inside the budget).

Which budget applies is read from the run itself: ``-m "not slow"`` is the fast lane; a run of
every test is the whole suite. ``./test.sh`` runs the whole suite as two lanes (the fast lane under
coverage, whose data is the fast-lane coverage check, then the slow lane) and names a record file
in ``SCELLIS_SUITE_RECORD``: each lane appends its figures there, and the last lane prints the
whole suite's figures, both lanes together, against the whole budget.

Under pytest-xdist each worker sends its own CPU time (its children's included) to the controller,
so the CPU figure is the whole run's, not only the controller's.
"""
from __future__ import annotations

import json
import os
import resource
import time
import tomllib
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD_ENV = "SCELLIS_SUITE_RECORD"
SECONDS_ENV = "SCELLIS_FILE_SECONDS"      # where a lane merges its per-file seconds (tests/suite_order.py)
DEFAULTS = {"whole_s": 1500.0, "fast_s": 180.0, "test_s": 60.0}


def budget(pyproject: Path = REPO / "pyproject.toml") -> dict[str, float]:
    """The budget from ``[tool.scellis.test-budget]``, with the defaults for missing keys."""
    try:
        table = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["scellis"]["test-budget"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        table = {}
    return {k: float(table.get(k, v)) for k, v in DEFAULTS.items()}


def cpu_seconds() -> float:
    """User and system CPU of this process and of every child it has waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def lane_of(markexpr: str, selected: bool) -> str:
    """'fast', 'slow', 'whole' or 'part' (a selection: no budget applies to it)."""
    expr = " ".join(markexpr.split())
    if selected:
        return "part"
    return {"not slow": "fast", "slow": "slow", "": "whole"}.get(expr, "part")


def minutes(s: float) -> str:
    return f"{int(s // 60)} min {s % 60:04.1f} s"


class SuiteClock:
    """Collects each test's time (setup, call and teardown) by file, and the run's wall and CPU."""

    def __init__(self, config):
        self.config = config
        self.start = time.monotonic()
        self.tests: dict[str, float] = defaultdict(float)
        self.worker_cpu: dict[str, float] = {}
        self.is_worker = hasattr(config, "workerinput")

    def pytest_runtest_logreport(self, report):
        self.tests[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session):
        if self.is_worker:                               # sent to the controller with the worker's end
            self.config.workeroutput["suite_cpu_s"] = cpu_seconds()

    def pytest_testnodedown(self, node, error):
        out = getattr(node, "workeroutput", None) or {}
        if "suite_cpu_s" in out:
            self.worker_cpu[str(node.gateway.id)] = out["suite_cpu_s"]

    def figures(self) -> dict:
        files: dict[str, float] = defaultdict(float)
        for nodeid, s in self.tests.items():
            files[nodeid.split("::", 1)[0]] += s
        opt = self.config.option
        selected = bool(getattr(opt, "keyword", "")) or any(
            "::" in a or a.endswith(".py") for a in self.config.args)
        return {"lane": lane_of(getattr(opt, "markexpr", "") or "", selected),
                "wall_s": time.monotonic() - self.start,
                "cpu_s": cpu_seconds() + sum(self.worker_cpu.values()),
                "tests": len(self.tests), "files": dict(files),
                "over": {n: s for n, s in self.tests.items() if s > budget()["test_s"]}}

    def pytest_terminal_summary(self, terminalreporter):
        if self.is_worker:
            return
        fig = self.figures()
        write = terminalreporter.write_line
        record = os.environ.get(RECORD_ENV)
        parts = _append(Path(record), fig) if record else [fig]
        if os.environ.get(SECONDS_ENV) and fig["lane"] in ("fast", "slow"):
            keep_seconds(Path(os.environ[SECONDS_ENV]), fig["lane"], fig["files"])
        for line in report_lines(parts, budget()):
            write(line, red=line.startswith("!!"), bold=line.startswith(("suite budget", "!!")))


def _append(record: Path, fig: dict) -> list[dict]:
    """Appends this lane's figures to the record; returns every lane recorded so far."""
    try:
        parts = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        parts = []
    parts.append(fig)
    tmp = record.with_name(record.name + ".tmp")
    tmp.write_text(json.dumps(parts), encoding="utf-8")
    os.replace(tmp, record)
    return parts


def keep_seconds(path: Path, lane: str, files: dict[str, float]) -> None:
    """Replaces ``lane``'s per-file seconds in the record tests/suite_order.py reads."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data[lane] = {f: round(s, 1) for f, s in sorted(files.items())}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def report_lines(parts: list[dict], limits: dict[str, float]) -> list[str]:
    """The report: this run's lane, and the whole suite when the record holds every lane."""
    lanes = {p["lane"] for p in parts}
    whole = parts if lanes >= {"fast", "slow"} else [parts[-1]]
    lane = "whole" if len(whole) > 1 else whole[0]["lane"]
    wall, cpu = sum(p["wall_s"] for p in whole), sum(p["cpu_s"] for p in whole)
    tests = sum(p["tests"] for p in whole)
    files: dict[str, float] = defaultdict(float)
    over: dict[str, float] = {}
    for p in whole:
        for f, s in p["files"].items():
            files[f] += s
        over.update(p["over"])
    limit = {"whole": limits["whole_s"], "fast": limits["fast_s"]}.get(lane)
    head = (f"suite budget: {lane} run, {tests} tests: {minutes(wall)} wall, {minutes(cpu)} CPU"
            + (f" (budget {minutes(limit)} wall, pyproject.toml [tool.scellis.test-budget])" if limit
               else " (no budget applies to this selection)"))
    lines = [head, "  the ten slowest files (test time: setup, call and teardown):"]
    lines += [f"  {s:8.1f} s  {f}" for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:10]]
    if limit and wall > limit:
        lines.append(f"!! OVER BUDGET: {minutes(wall)} against {minutes(limit)}: "
                     f"{wall - limit:.0f} s too slow; see docs/testing.md, 'Keeping inside the budget'")
    for nodeid, s in sorted(over.items(), key=lambda kv: -kv[1]):
        lines.append(f"!! a test over {limits['test_s']:.0f} s: {s:.1f} s  {nodeid}")
    return lines
