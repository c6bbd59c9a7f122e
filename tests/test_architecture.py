"""The engine stays headless: no Qt (or app) import anywhere below studio/engine."""
import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "studio" / "engine"
FORBIDDEN = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "studio.app", "shiboken6")


def imported_modules(path: Path, root: Path, package: str) -> set[str]:
    """Absolute names of every module a file imports (relative imports resolved)."""
    pkg = ".".join([package, *path.relative_to(root).parent.parts])
    mods = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mods.add(importlib.util.resolve_name("." * node.level + (node.module or ""), pkg)
                     if node.level else node.module)
    return mods


def offenders(root: Path, package: str = "studio.engine") -> list[str]:
    bad = []
    for py in sorted(root.rglob("*.py")):
        for m in sorted(imported_modules(py, root, package)):
            if any(m == f or m.startswith(f + ".") for f in FORBIDDEN):
                bad.append(f"{py.name}: {m}")
    return bad


def test_engine_imports_no_qt():
    assert offenders(ENGINE) == []


def test_the_check_can_fail(tmp_path):
    (tmp_path / "bad.py").write_text("from PySide6.QtWidgets import QWidget\nimport pyqtgraph as pg\n"
                                     "from ..app import window\n")
    assert offenders(tmp_path) == ["bad.py: PySide6.QtWidgets", "bad.py: pyqtgraph", "bad.py: studio.app"]


def test_importing_the_engine_loads_no_qt():
    code = ("import sys, studio.engine.proof.conformance, studio.engine.contract.catalog, studio.engine.proof.checker;"
            "print([m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_import_linter_contract():
    lint = Path(sys.executable).with_name("lint-imports")
    res = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ENGINE.parents[1])
    assert res.returncode == 0, res.stdout + res.stderr
