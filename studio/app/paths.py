"""Where the Studio keeps its own files: ``$SCELLIS_HOME`` if set, else the platform's user data dir
(the same root the engine's catalog uses for ``ops/``)."""
from __future__ import annotations

import os
from pathlib import Path


def studio_home() -> Path:
    env = os.environ.get("SCELLIS_HOME")
    if env:
        return Path(env)
    from platformdirs import user_data_dir
    return Path(user_data_dir("scellis-studio"))


def autosave_dir() -> Path:
    return studio_home() / "autosave"


def snapshots_dir() -> Path:
    return studio_home() / "snapshots"
