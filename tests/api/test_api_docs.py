"""docs/api.md stands: every public name of the API is on it, and its Python examples run as written
(one process, a fresh user folder: the first call proves its op here)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import scellis

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "api.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_every_public_name_is_documented():
    text = DOC.read_text()
    names = [f"scellis.{n}" for n in scellis.__all__] + ["scellis.torch.register", "scellis.jax.wrap"]
    assert [n for n in names if f"`{n}" not in text] == []


def test_the_block_extraction_finds_each_block():
    assert python_blocks("a\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny = 2\n```\n") == ["x = 1\n", "y = 2\n"]


@pytest.mark.slow
def test_the_examples_run(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 4
    script = tmp_path / "api_examples.py"
    script.write_text("\n".join(blocks))
    p = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "SCELLIS_HOME": str(tmp_path / "home")})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    assert "valid" in p.stdout and "SUCCESS" in p.stdout and "complex" in p.stdout
