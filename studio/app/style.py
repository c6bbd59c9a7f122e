"""The Studio's one style sheet, installed on the application once (per-widget style sheets are
slow to apply: a catalog of cards or a notebook of cells would re-polish on every refresh)."""
from __future__ import annotations

CHIPS = {
    "ok": ("#1e7b34", "#e3f4e7"),
    "error": ("#b3261e", "#fbe4e2"),
    "warn": ("#8a5a00", "#fff2d6"),
    "busy": ("#1f5fa8", "#e2ecf8"),
    "idle": ("#555555", "#eeeeee"),
}

APP_CSS = "\n".join(
    [f'QLabel[chip="{k}"] {{ color: {fg}; background: {bg}; border: 1px solid {fg}; border-radius: 8px;'
     f' padding: 1px 8px; font-size: 11px; }}' for k, (fg, bg) in CHIPS.items()] + [
        'QFrame[cell="true"] { background: white; border: 1px solid #d6d6d6; border-radius: 6px; }',
        'QFrame[card="true"] { background: white; border: 1px solid #dddddd; border-radius: 6px; }',
        'QWidget#notebook_inner { background: #f4f5f7; }',
        'QLabel[note="true"] { color: #555555; }',
    ])


def install(app=None) -> None:
    """Add the Studio's rules to the application's style sheet (idempotent)."""
    from PySide6.QtWidgets import QApplication
    app = app or QApplication.instance()
    if app is not None and APP_CSS not in app.styleSheet():
        app.setStyleSheet(app.styleSheet() + "\n" + APP_CSS)
