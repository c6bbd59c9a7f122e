#!/usr/bin/env python
"""Check that the fast test lane (``pytest -m "not slow"``) still touches every module of studio/.

Runs the lane under coverage.py, worker subprocesses included, and fails naming each module of
the package none of whose function bodies ran: a module whose only executed lines are its
import-time lines (the ``def`` and ``class`` lines, constants) counts as untouched. A module with
no function at all (constants only) is touched when it was imported.

What counts. Coverage follows every Python process the lane starts with the environment it
inherits: the device worker (multiprocessing's spawn), the Dask workers of sharding, and the
``scellis`` commands the CLI tests run (``[run] patch = subprocess``, ``sigterm = true``). It
does not follow the confined reference hosts (``studio/engine/trust/host.py`` runs there): the
pool starts them with a scrubbed environment and they may not write outside their temporary
folder, so only what the engine side runs of those modules is seen. Op packages under
``resources`` folders are data, not modules, and are not judged.

    .venv/bin/python scripts/fast_lane_coverage.py              # the fast lane, whole repository
    .venv/bin/python scripts/fast_lane_coverage.py -- -x         # extra arguments go to pytest

Exit status: 0 every module touched and the lane passed; 1 a module untouched or the lane
failed; 2 a usage error.
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def modules(package: Path) -> list[Path]:
    """Every Python module of the package, op data under ``resources`` folders aside."""
    return sorted(p for p in package.rglob("*.py")
                  if "resources" not in p.relative_to(package).parts and "__pycache__" not in p.parts)


def body_lines(source: str) -> set[int] | None:
    """The lines inside function bodies (docstrings aside), or None for a module with no function."""
    lines: set[int] = set()
    found = False
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
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
        ran = executed.get(str(path.resolve()), set())
        body = body_lines(path.read_text(encoding="utf-8"))
        if not (ran & body if body is not None else ran):
            out.append(str(path.relative_to(package.parent)))
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
    import coverage
    cov = coverage.Coverage(config_file=str(rc_file))
    cov.combine(data_paths=[str(workdir)], keep=False, strict=False)
    data = cov.get_data()
    return rc, {str(Path(f).resolve()): set(data.lines(f) or ()) for f in data.measured_files()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default=str(REPO / "studio"), help="the package whose modules are judged")
    ap.add_argument("--cwd", default=str(REPO), help="where pytest runs (its configuration is read there)")
    ap.add_argument("-m", "--marker", default="not slow", help='the lane, as a pytest -m expression')
    ap.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = ap.parse_args(argv)
    package, cwd = Path(args.package), Path(args.cwd)
    for what, p in (("--package", package), ("--cwd", cwd)):
        if not p.is_dir():
            print(f"fast_lane_coverage: {what} {p}: no such folder", file=sys.stderr)
            return 2
    try:
        import coverage  # noqa: F401
    except ImportError:
        print("fast_lane_coverage: coverage is not installed: install the test extras "
              "(.venv/bin/pip install -e '.[test]')", file=sys.stderr)
        return 2
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scellis-lane-coverage-") as tmp:
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
    if missed or rc != 0:
        return 1
    print(f"fast_lane_coverage: all {total} modules touched by the lane -m \"{args.marker}\" "
          f"({took:.0f} s under coverage)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
