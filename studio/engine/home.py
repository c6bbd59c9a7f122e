"""The user's Scellis folder: ``$SCELLIS_HOME`` if set, else the platform's user data dir.
Holds ops/ (the catalog's user ops), trust.json, and the Studio's autosave and snapshots."""
from __future__ import annotations

import os
from pathlib import Path


def studio_home() -> Path:
    env = os.environ.get("SCELLIS_HOME")
    if env:
        return Path(env)
    from platformdirs import user_data_dir
    return Path(user_data_dir("scellis-studio"))
