"""The lint (pyproject.toml [tool.ruff]): ruff over the whole tree finds nothing, and the check can
fail. Pyflakes, bugbear (a closure over a loop variable), pycodestyle's errors, a bare `except
Exception` without its reason, a `# noqa` that silences nothing, and each function's complexity (C901:
the size check of the code, with tests/suite/test_architecture.py's per-package line budgets)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess:
    """ruff from this interpreter's environment (the test extra installs it), no cache left in the tree."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_ruff_finds_nothing_in_the_tree():
    res = ruff()
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_lint_can_fail(tmp_path):
    bad = tmp_path / "capture.py"
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(21))
    bad.write_text("def later():\n    out = []\n    for i in range(3):\n        out.append(lambda: i)\n    return out\n\n\n"
                   f"def branchy(x):\n{branches}    return -1\n")
    res = ruff("--config", str(ROOT / "pyproject.toml"), str(bad))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "B023" in res.stdout and "C901 `branchy` is too complex (22 > 20)" in res.stdout, res.stdout
