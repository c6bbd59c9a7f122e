"""`scellis-studio`: the desktop Studio."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from .plot_export import qt_app
    app = qt_app()
    from .window import MainWindow
    win = MainWindow()
    win.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
