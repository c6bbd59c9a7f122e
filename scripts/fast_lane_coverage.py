#!/usr/bin/env python
"""Check that the fast test lane (``pytest -m "not slow"``) still touches every module of studio/.

Runs the lane under coverage.py, worker subprocesses included, and fails naming each module of
the package none of whose function bodies ran: a module whose only executed lines are its
import-time lines (the ``def`` and ``class`` lines, constants) counts as untouched. A module with
no function at all (constants only) is touched when it was imported.

What counts. Coverage follows every Python process the lane starts with the environment it
inherits: the device worker (multiprocessing's spawn), the Dask workers of sharding, and the
``scellis`` commands the CLI tests run (``[run] patch = subprocess``, ``sigterm = true``). It
does not follow the confined reference hosts: the pool starts them with a scrubbed environment
and they may not write outside their temporary folder. The modules that run only there
(``HOST_ONLY``: ``studio/engine/trust/host.py``, ``seccomp.py``, ``namespaces.py``) count as touched
when the engine waited for a started host to answer that it is ready (``pool.py``'s ``_wait_ready`` ran).
Op packages under ``resources`` folders are data, not modules, and are not judged.

    .venv/bin/python scripts/fast_lane_coverage.py              # the fast lane, whole repository
    .venv/bin/python scripts/fast_lane_coverage.py -- -x         # extra arguments go to pytest
    .venv/bin/python scripts/fast_lane_coverage.py --result R.json -- -n 2   # ./test.sh's first lane

``./test.sh`` runs the whole suite as two lanes: this script (the fast lane under coverage, whose
data is this check) and then the slow lane, so no test runs twice. ``--result`` writes the
verdict as JSON, which the slow lane's ``test_the_fast_lane_touches_every_module_of_studio``
reads instead of running the lane a second time.

Exit status: 0 every module touched and the lane passed; 1 a module untouched or the lane
failed; 2 a usage error.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Modules that run only inside the confined reference host, where coverage cannot follow (see the
# docstring): each counts as touched when the function of its launcher that waits for the started
# host's "ready" ran, i.e. the host program, with its system-call filter, started and answered.
HOST_ONLY = {"studio/engine/trust/host.py": ("studio/engine/trust/pool.py", "_wait_ready"),
             "studio/engine/trust/seccomp.py": ("studio/engine/trust/pool.py", "_wait_ready"),
             "studio/engine/trust/namespaces.py": ("studio/engine/trust/pool.py", "_wait_ready")}


def modules(package: Path) -> list[Path]:
    """Every Python module of the package, op data under ``resources`` folders aside."""
    return sorted(p for p in package.rglob("*.py")
                  if "resources" not in p.relative_to(package).parts and "__pycache__" not in p.parts)


def body_lines(source: str, name: str | None = None) -> set[int] | None:
    """The lines inside function bodies (docstrings aside), or None for a module with no function;
    with a name, only the bodies of the functions (or methods) of that name."""
    lines: set[int] = set()
    found = False
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in (None, node.name):
            found = True
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]                  # the docstring is not code that ran
            for stmt in body:
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines if found else None


def untouched(package: Path, executed: dict[str, set[int]]) -> list[str]:
    """The modules (relative to the package's parent) with no executed function body; a module
    with no function is untouched only when not even its import ran."""
    out = []
    for path in modules(package):
        rel = str(path.relative_to(package.parent))
        if rel in HOST_ONLY:
            launcher, function = HOST_ONLY[rel]
            path = package.parent / launcher
            body = body_lines(path.read_text(encoding="utf-8"), function) or set()
        else:
            body = body_lines(path.read_text(encoding="utf-8"))
        ran = executed.get(str(path.resolve()), set())
        if not (ran & body if body is not None else ran):
            out.append(rel)
    return out


def measure(package: Path, cwd: Path, marker: str, pytest_args: list[str], workdir: Path) -> tuple[int, dict[str, set[int]]]:
    """Run ``pytest -m MARKER`` under coverage in cwd; return pytest's exit status and the lines
    executed per file (absolute paths) across every measured process."""
    rc_file = workdir / "coveragerc"
    rc_file.write_text("[run]\n"
                       f"source =\n    {package.resolve()}\n"
                       "omit =\n    */resources/*\n"
                       "parallel = true\n"
                       "patch =\n    subprocess\n"
                       "sigterm = true\n"
                       f"data_file = {workdir / '.coverage'}\n")
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
           "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}
    env.pop("COVERAGE_PROCESS_START", None)
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    cmd = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc_file}", "-m", "pytest",
           "-q", "-p", "no:cacheprovider", "-m", marker, *pytest_args]
    rc = subprocess.run(cmd, cwd=cwd, env=env).returncode
    _settle(workdir)
    import coverage
    out = workdir / "combined"                   # apart from the data folder a late process may still write to
    out.mkdir()
    cov = coverage.Coverage(config_file=str(rc_file), data_file=str(out / ".coverage"))
    with warnings.catch_warnings():     # a process killed while saving leaves no file: what it ran is lost, not an error
        warnings.simplefilter("ignore")
        cov.combine(data_paths=[str(workdir)], keep=True, strict=False)
    data = cov.get_data()
    return rc, {str(Path(f).resolve()): set(data.lines(f) or ()) for f in data.measured_files()}


def _settle(workdir: Path, quiet_s: float = 2.0, most_s: float = 60.0) -> None:
    """Wait until no process that outlived pytest (a worker or host still exiting) writes data."""
    def state():
        return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in workdir.glob(".coverage.*"))
    start, last, seen = time.monotonic(), time.monotonic(), state()
    while time.monotonic() - start < most_s and time.monotonic() - last < quiet_s:
        time.sleep(0.25)
        now = state()
        if now != seen:
            seen, last = now, time.monotonic()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default=str(REPO / "studio"), help="the package whose modules are judged")
    ap.add_argument("--cwd", default=str(REPO), help="where pytest runs (its configuration is read there)")
    ap.add_argument("-m", "--marker", default="not slow", help='the lane, as a pytest -m expression')
    ap.add_argument("--result", help="also write the verdict here as JSON (./test.sh's record)")
    ap.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = ap.parse_args(argv)
    package, cwd = Path(args.package), Path(args.cwd)
    for what, p in (("--package", package), ("--cwd", cwd)):
        if not p.is_dir():
            print(f"fast_lane_coverage: {what} {p}: no such folder", file=sys.stderr)
            return 2
    try:
        import coverage  # noqa: F401 (imported only to see that it is installed)
    except ImportError:
        print("fast_lane_coverage: coverage is not installed: install the test extras "
              "(.venv/bin/pip install -e '.[test]')", file=sys.stderr)
        return 2
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scellis-lane-coverage-", ignore_cleanup_errors=True) as tmp:
        rc, executed = measure(package, cwd, args.marker, args.pytest_args, Path(tmp))
    took = time.monotonic() - start
    missed = untouched(package, executed)
    total = len(modules(package))
    if missed:
        print(f"fast_lane_coverage: {len(missed)} of {total} modules have no function body that ran in "
              f'the lane -m "{args.marker}" (give each a fast test, or unmark one):', file=sys.stderr)
        for m in missed:
            print(f"  {m}", file=sys.stderr)
    if rc != 0:
        print(f"fast_lane_coverage: the lane failed under coverage (pytest exit status {rc})", file=sys.stderr)
    if args.result:
        verdict = {"marker": args.marker, "pytest_rc": rc, "modules": total, "untouched": missed,
                   "seconds": round(took, 1)}
        Path(args.result).write_text(json.dumps(verdict), encoding="utf-8")
    if missed or rc != 0:
        return 1
    print(f"fast_lane_coverage: all {total} modules touched by the lane -m \"{args.marker}\" "
          f"({took:.0f} s under coverage)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
