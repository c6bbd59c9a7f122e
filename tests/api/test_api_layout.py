"""The public API is a front end: the import-linter contract in pyproject.toml ("The public API imports
no engine internals") holds scellis/ to the engine's use cases, contract types, errors, the ground
and a Context. Its control: a copy of the tree with a scellis module that imports a receipt reader."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTRACT = "The public API imports no engine internals"


@pytest.mark.slow
def test_the_public_api_importing_an_engine_internal_breaks_its_contract(tmp_path):
    for pkg in ("studio", "scellis"):
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text((REPO / "pyproject.toml").read_text())
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}

    def lint_copy() -> str:
        res = subprocess.run([str(lint), "--config", str(cfg), "--no-cache"], capture_output=True, text=True,
                             cwd=tmp_path, env=env)
        return " ".join((res.stdout + res.stderr).split())

    clean = lint_copy()
    assert re.search(r"Contracts: \d+ kept, 0 broken", clean) and CONTRACT in clean, clean
    (tmp_path / "scellis" / "sneaky.py").write_text("from studio.engine.proof import receipts  # noqa\n")
    out = lint_copy()
    assert re.search(r"Contracts: \d+ kept, 1 broken", out) and "scellis.sneaky -> studio.engine.proof.receipts" in out, out
