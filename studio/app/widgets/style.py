"""The Studio's one style sheet, installed on the application once (per-widget style sheets are
slow to apply: a catalog of cards or a notebook of cells would re-polish on every refresh).

No colour is fixed here: cells, cards and the notebook take the application palette's roles
(base, window, mid, text), so a dark desktop palette gives dark cells with light text; the rules are
derived again whenever the palette changes (theme.py, the main window's palette-change handler). The few colours that carry a meaning (ok, error, warning, busy) have a
light and a dark variant, chosen by the palette's lightness (``is_dark``); ``colour(name)`` gives
the one that reads on the current palette, for the rich-text spans the panels write."""
from __future__ import annotations

# (foreground, background) of the status chips, on a light and on a dark palette
CHIPS = {
    "ok": (("#1e7b34", "#e3f4e7"), ("#7fd49a", "#173a22")),
    "error": (("#b3261e", "#fbe4e2"), ("#ff8a80", "#4a1a17")),
    "warn": (("#8a5a00", "#fff2d6"), ("#ffcc66", "#40300a")),
    "busy": (("#1f5fa8", "#e2ecf8"), ("#8cbcf5", "#16304f")),
    "idle": (("#555555", "#eeeeee"), ("#c4c4c4", "#3a3a3a")),
}
# text colours with a meaning: (on light, on dark) — each keeps ≥ 4.5:1 against the palette's base
TEXT = {
    "error": ("#b3261e", "#ff8a80"),
    "ok": ("#1e7b34", "#7fd49a"),
    "warn": ("#8a5a00", "#ffcc66"),
    "muted": ("#5f5f5f", "#b0b0b0"),
    "mark": ("#fff3b0", "#5c4d00"),         # a highlighted row's background (the n = w case)
    "frame": ("#767676", "#858a91"),        # an input field's frame: ≥ 3:1 against base and window
}
BEGIN, END = "/* scellis-studio: begin */", "/* scellis-studio: end */"


def _palette(palette=None):
    if palette is not None:
        return palette
    from PySide6.QtWidgets import QApplication
    app = QApplication.instance()
    if app is None:
        from PySide6.QtGui import QPalette
        return QPalette()
    return app.palette()


def is_dark(palette=None) -> bool:
    """A dark palette: its window colour is darker than mid-grey."""
    from PySide6.QtGui import QPalette
    return _palette(palette).color(QPalette.ColorRole.Window).lightnessF() < 0.5


def colour(name: str, palette=None) -> str:
    """The meaning-carrying colour ``name`` (``error``, ``ok``, ``warn``, ``muted``, ``mark``) that
    reads on the palette."""
    return TEXT[name][1 if is_dark(palette) else 0]


def app_css(palette=None) -> str:
    """The rules for this palette. Colours are the palette's own, written out (not ``palette(base)``):
    the text then differs between palettes, so installing it again really re-polishes the widgets."""
    from PySide6.QtGui import QPalette
    pal = _palette(palette)
    role = QPalette.ColorRole
    base, window, mid, text = (pal.color(r).name() for r in (role.Base, role.Window, role.Mid, role.Text))
    dark = is_dark(pal)
    rules = [f'QLabel[chip="{k}"] {{ color: {v[dark][0]}; background: {v[dark][1]}; border: 1px solid {v[dark][0]};'
             f' border-radius: 8px; padding: 1px 8px; font-size: 11px; }}' for k, v in CHIPS.items()]
    rules += [
        f'QFrame[cell="true"] {{ background: {base}; color: {text}; border: 1px solid {mid}; border-radius: 6px; }}',
        f'QFrame[cell="true"][running="true"] {{ border: 2px solid {CHIPS["busy"][dark][0]}; }}',
        f'QFrame[card="true"] {{ background: {base}; color: {text}; border: 1px solid {mid}; border-radius: 6px; }}',
        f'QWidget#notebook_inner {{ background: {window}; }}',
        f'QTreeWidget#catalog_tree {{ background: {window}; border: none; }}',
        f'QLabel[note="true"] {{ color: {colour("muted", pal)}; }}',
        f'QLabel[error="true"] {{ color: {colour("error", pal)}; font-weight: bold; }}',
        f'QLabel[warn="true"] {{ color: {colour("warn", pal)}; }}',
        f'QLabel[banner="true"] {{ color: {CHIPS["busy"][dark][0]}; background: {CHIPS["busy"][dark][1]}; '
        f'border-bottom: 1px solid {mid}; padding: 4px 8px; }}',
    ]
    return "\n".join([BEGIN, *rules, END])


def install(app=None, *, force: bool = False) -> None:
    """Put the Studio's rules into the application's style sheet for its current palette
    (idempotent; ``force`` re-derives them after the palette changed)."""
    from PySide6.QtWidgets import QApplication
    app = app or QApplication.instance()
    if app is None:
        return
    sheet = app.styleSheet()
    css = app_css(app.palette())
    if BEGIN in sheet:
        if not force and css in sheet:
            return
        head, rest = sheet.split(BEGIN, 1)
        tail = rest.split(END, 1)[1] if END in rest else ""
        sheet = head + css + tail
    else:
        sheet = sheet + ("\n" if sheet else "") + css
    app.setStyleSheet(sheet)
