"""Where the product's own files live: builtin ops, grammars, templates and the shipped examples
(``resources/`` at the top of the source tree) and the helper shaders (``shaders/``).

An installed wheel, ``pip install .`` and the PyInstaller bundle carry them as package data of
``studio`` (``site-packages/studio/resources``, the shaders in its ``shaders``), found
through importlib.resources; a source checkout (an editable install, or the tree on the path)
finds them at the top of the tree, beside ``studio/``."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .errors import StudioError


def resource_roots() -> tuple[Path, Path]:
    """(the resources folder, the shaders folder) of this install."""
    package = Path(str(files("studio")))
    packaged = package / "resources"                            # wheel, plain install, bundle
    if (packaged / "grammars").is_dir():
        return packaged, packaged / "shaders"
    tree = package.parent                                       # a source checkout
    if (tree / "resources" / "grammars").is_dir() and (tree / "pyproject.toml").is_file():
        return tree / "resources", tree / "shaders"
    raise StudioError(f"the product's resources are missing (looked in {packaged} and {tree / 'resources'})",
                      field="install",
                      hint="reinstall Scellis Studio (`pip install .` from its source, or the README's setup)")


ROOT, SHADERS = resource_roots()
GRAMMARS = ROOT / "grammars"
BUILTINS = ROOT / "ops"
EXAMPLES = ROOT / "examples"
TEMPLATES = ROOT / "templates"
ICON = ROOT / "io.scellis.Studio.svg"
