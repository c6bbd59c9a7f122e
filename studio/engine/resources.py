"""Where the product's own files live: builtin ops, grammars, templates, shaders and the shipped
examples are package data of ``studio``, found through importlib.resources, so an editable
install, ``pip install .``, a wheel and the PyInstaller bundle all find the same files."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .errors import StudioError


def resource_root() -> Path:
    root = Path(str(files("studio") / "resources"))
    if not (root / "grammars").is_dir():
        raise StudioError(f"the product's resources are missing (looked in {root})", field="install",
                          hint="reinstall Scellis Studio (`pip install .` from its source, or the README's setup)")
    return root


ROOT = resource_root()
GRAMMARS = ROOT / "grammars"
BUILTINS = ROOT / "ops"
EXAMPLES = ROOT / "examples"
TEMPLATES = ROOT / "templates"
SHADERS = ROOT / "shaders"
ICON = ROOT / "io.scellis.Studio.svg"
