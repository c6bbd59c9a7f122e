"""Where a workflow run's outputs go (its data sinks, plots, provenance record, checkpoint).

Never into the install: the shipped examples (``resources/workflows/``) are package data, read
only in a system install and shared by every user in any install. The rules, one place for both
front ends:

- the Studio writes into the user's output folder, ``<Scellis folder>/outputs/<workflow name>/``;
- the CLI writes into the folder named with ``--out-dir``; else beside the ``--plot`` the user
  named; else into the current folder, and says so on its first line; a current folder inside
  the install is replaced by the user's output folder (also said).

A folder named explicitly that lies inside the install is refused with the way out."""
from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from ..errors import StudioError
from ..home import studio_home
from ..resources import ROOT, SHADERS


def user_outputs(workflow_name: str) -> Path:
    """The user's output folder for a workflow: ``<Scellis folder>/outputs/<name>`` (the name made
    safe for a file system: letters, digits, '-', '_' and '.')."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", str(workflow_name)).strip("._") or "workflow"
    return studio_home() / "outputs" / safe


def install_folders() -> list[Path]:
    """The folders of this install that a run must never write into: the package data (resources,
    shaders) and the package itself."""
    return [Path(p).resolve() for p in (ROOT, SHADERS, Path(str(files("studio"))))]


def in_install(path: str | Path) -> bool:
    p = Path(path).expanduser().resolve()
    return any(p == root or p.is_relative_to(root) for root in install_folders())


def refuse_install(path: str | Path, *, field: str = "out_dir") -> Path:
    """``path`` (resolved) unless it lies inside the install: then a StudioError naming the way out."""
    p = Path(path).expanduser().resolve()
    if in_install(p):
        raise StudioError(f"{p} is inside the Scellis Studio install: a run's outputs never go there",
                          field=field, hint="name a folder of your own (--out-dir DIR), e.g. "
                                            f"{user_outputs('my_workflow').parent}")
    return p


def choose_output_folder(workflow_name: str, *, out_dir: str | Path | None = None,
                         plot: str | Path | None = None) -> tuple[Path, str]:
    """(the folder, why it was chosen in words) by the CLI's rules (module docstring)."""
    if out_dir is not None:
        return refuse_install(out_dir, field="--out-dir"), "named with --out-dir"
    if plot is not None:
        return refuse_install(Path(plot).expanduser().resolve().parent, field="--plot"), "beside the --plot file"
    cwd = Path.cwd().resolve()
    if in_install(cwd):
        return user_outputs(workflow_name), ("your output folder (the current folder is inside the install; "
                                             "--out-dir names another)")
    return cwd, "the current folder (--out-dir names another)"
