"""`scellis-studio`: the desktop Studio."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scellis-studio", description="Author GPU compute ops as content.")
    ap.add_argument("packages", nargs="*", help="op package folders to open")
    ap.add_argument("--no-recovery", action="store_true", help="do not offer to restore unsaved work")
    args = ap.parse_args(argv)
    name_the_application()
    from ..figures import qt_app
    app = qt_app()
    import pyqtgraph as pg
    pg.setConfigOptions(antialias=True)          # colours: the palette's (studio/app/widgets/theme.py)
    from .shell.window import MainWindow
    win = MainWindow(offer_recovery=not args.no_recovery)
    for p in args.packages:
        win.open_path(p)
    win.show()
    return app.exec()


APP_ID = "scellis-studio"          # packaging/scellis-studio.desktop: its file name and StartupWMClass


def name_the_application() -> None:
    """The names a desktop matches the window to its launcher by, set before the QApplication
    exists: X11's WM_CLASS (instance from RESOURCE_NAME, class from the application name) and
    Wayland's app id (the desktop file's name) are all ``scellis-studio``, whatever script started
    the process. (No display name: Qt would append it to every window title.)"""
    import os

    from PySide6.QtCore import QCoreApplication
    from PySide6.QtGui import QGuiApplication
    os.environ["RESOURCE_NAME"] = APP_ID
    QCoreApplication.setApplicationName(APP_ID)
    QCoreApplication.setOrganizationDomain("scellis.io")
    QGuiApplication.setDesktopFileName(APP_ID)


if __name__ == "__main__":
    sys.exit(main())
