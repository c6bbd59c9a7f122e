"""The Studio's remembered settings (window geometry, dock state, open tabs, theme) — a QSettings
INI file in the user data folder (``$SCELLIS_HOME/studio.ini``), never the platform's registry or
``~/.config``: a test's isolated home isolates its settings too, and deleting the data folder
forgets everything at once."""
from __future__ import annotations

from PySide6.QtCore import QSettings

from ...engine.home import studio_home

FILE = "studio.ini"


def settings_store() -> QSettings:
    home = studio_home()
    home.mkdir(parents=True, exist_ok=True)
    return QSettings(str(home / FILE), QSettings.Format.IniFormat)
