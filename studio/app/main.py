"""`scellis-studio`: the desktop Studio."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scellis-studio", description="Author GPU compute ops as content.")
    ap.add_argument("packages", nargs="*", help="op package folders to open")
    ap.add_argument("--no-recovery", action="store_true", help="do not offer to restore unsaved work")
    args = ap.parse_args(argv)
    from ..figures import qt_app
    app = qt_app()
    app.setApplicationName("Scellis Studio")
    app.setOrganizationDomain("scellis.io")
    app.setDesktopFileName("io.scellis.Studio")
    import pyqtgraph as pg
    pg.setConfigOptions(antialias=True)          # colours: the palette's (studio/app/theme.py)
    from .window import MainWindow
    win = MainWindow(offer_recovery=not args.no_recovery)
    for p in args.packages:
        win.open_path(p)
    win.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
