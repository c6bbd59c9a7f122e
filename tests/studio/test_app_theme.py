"""Light and dark: the Studio follows the application palette — a dark desktop
palette gives dark cells and cards with light text (the bug: hard-coded white backgrounds made them
unreadable), plots follow it too, and View ▸ Theme picks one. Measured on rendered pixels: a cell's
or card's effective background is the most common colour of its grab, and its text colour must
reach WCAG's 4.5:1 contrast against it. The old style sheet is kept as the failing control. So
are a code editor's gutter (line numbers), its syntax colours and a cell's status chip, message
and number after the palette turned dark, against the old fixed colours as their controls."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QLabel

from studio.app.widgets import style
from studio.app.widgets.theme import dark_palette, light_palette, refresh

OLD_CSS = "\n".join([                     # what style.py installed before: fixed white cards and cells
    'QFrame[cell="true"] { background: white; border: 1px solid #d6d6d6; border-radius: 6px; }',
    'QFrame[card="true"] { background: white; border: 1px solid #dddddd; border-radius: 6px; }',
    'QWidget#notebook_inner { background: #f4f5f7; }'])


def luminance(c: QColor) -> float:
    def ch(v):
        v = v / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    return 0.2126 * ch(c.red()) + 0.7152 * ch(c.green()) + 0.0722 * ch(c.blue())


def contrast(a: QColor, b: QColor) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def background_of(widget) -> QColor:
    """The effective background: the most common pixel colour of the widget as rendered."""
    img = widget.grab().toImage()
    counts = Counter()
    for y in range(2, img.height() - 2, 3):
        for x in range(2, img.width() - 2, 3):
            counts[img.pixel(x, y)] += 1
    return QColor.fromRgb(counts.most_common(1)[0][0])


def text_colour(widget) -> QColor:
    """The colour of the widget's main text: a cell's heading, a card's title."""
    label = next(w for w in (getattr(widget, "heading", None), getattr(widget, "title", None)) if isinstance(w, QLabel))
    return label.palette().color(label.foregroundRole())


def readability(widgets) -> list[tuple[str, float, float]]:
    """(name, background lightness, contrast) of each widget's background against its text."""
    out = []
    for w in widgets:
        bg = background_of(w)
        out.append((w.objectName(), bg.lightnessF(), contrast(bg, text_colour(w))))
    return out


@pytest.fixture
def window(qtbot):
    from studio.app.shell.window import MainWindow
    from studio.app.bridge.worker_bridge import DeviceWorkers
    app = QApplication.instance()
    palette, sheet, style_name = QPalette(app.palette()), app.styleSheet(), app.style().name()
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    win.show()
    yield win
    for v in list(win.views):
        win.close_view(v, discard=True)
    win.shutdown()
    win.close()
    win.deleteLater()
    app.setStyle(style_name)
    app.setPalette(palette)
    app.setStyleSheet(sheet)
    refresh(app)


def cells_and_cards(qtbot, win):
    view = win.current() or win.open_story()
    qtbot.waitUntil(lambda: len(win.catalog.cards) > 5, timeout=90_000)
    cells = [view.notebook.cell(k) for k in ("op", "tolerance", "conformance")]
    cards = list(win.catalog.cards.values())[:3]
    for w in cells + cards:
        w.setObjectName(w.objectName() or "card")
    return cells, cards


@pytest.mark.slow
def test_a_dark_system_palette_gives_dark_readable_cells_and_cards(qtbot, window):
    app = QApplication.instance()
    cells, cards = cells_and_cards(qtbot, window)
    app.setStyle("Fusion")
    app.setPalette(dark_palette())                 # the desktop turned dark: the window follows by itself
    qtbot.wait(50)
    for name, lightness, ratio in readability(cells + cards):
        assert lightness < 0.3, (name, lightness)
        assert ratio >= 4.5, (name, ratio)
    # the chips' colours switched to their dark variants too
    assert style.colour("error") == style.TEXT["error"][1] and style.CHIPS["ok"][1][1] in app.styleSheet()
    # failing control: the old fixed white backgrounds under the same dark palette are unreadable
    app.setStyleSheet(OLD_CSS)
    qtbot.wait(50)
    bad = readability(cells + cards)
    assert all(lightness > 0.9 and ratio < 4.5 for _n, lightness, ratio in bad), bad


@pytest.mark.slow
def test_the_light_palette_is_readable_too(qtbot, window):
    app = QApplication.instance()
    cells, cards = cells_and_cards(qtbot, window)
    window.state.set_theme("light")
    assert window.menus["view.theme.light"].isChecked() and not style.is_dark()
    for name, lightness, ratio in readability(cells + cards):
        assert lightness > 0.7 and ratio >= 4.5, (name, lightness, ratio)
    assert app.palette().color(QPalette.ColorRole.Base) == light_palette().color(QPalette.ColorRole.Base)


@pytest.mark.slow
def test_view_theme_switches_plots_and_is_remembered(qtbot, window):
    view = window.open_story()
    plot = view.run_panel.plot
    window.menus["view.theme.dark"].trigger()
    assert style.is_dark()
    assert plot.backgroundBrush().color().lightnessF() < 0.3
    assert plot.getAxis("bottom").textPen().color().lightnessF() > 0.7
    assert window.settings.value("theme") == "dark"
    window.menus["view.theme.light"].trigger()
    assert plot.backgroundBrush().color().lightnessF() > 0.9
    assert plot.getAxis("bottom").textPen().color().lightnessF() < 0.3
    window.menus["view.theme.system"].trigger()
    assert window.theme.choice == "system"


SHELL_FILES = ["shell/window.py", "main.py", "tools/catalog_panel.py", "bridge/session.py",
               "tools/workflow_view.py", "bridge/running.py", "bridge/proofs.py", "widgets/export.py",
               "shell/menus.py", "shell/welcome.py", "shell/settings.py", "shell/shell_menus.py",
               "shell/docks.py", "shell/window_state.py",
               "panels/conformance.py", "panels/gradcheck.py", "panels/run.py", "panels/job.py"]
NOTEBOOK_FILES = ["notebook/notebook.py", "notebook/new_op.py", "widgets/editors.py", "notebook/problems.py",
                  "tools/shard_view.py", "tools/learner_view.py",
                  *(f"cells/{p.name}" for p in sorted((Path(__file__).resolve().parents[2] / "studio" / "app" / "cells")
                                                      .glob("*.py")))]
FIXED_COLOUR = re.compile(r"(color|background)\s*:\s*(#[0-9a-fA-F]{3,8}|white|black)|background\s*=\s*\"[wk]\"|"
                          r"GlobalColor\.|setConfigOptions\([^)]*background|QColor\(\"#")


def fixed_colours(text: str) -> list[str]:
    return [m.group(0) for m in FIXED_COLOUR.finditer(text)]


def test_no_fixed_colours_in_the_shell():
    """Colours come from the palette (style.py, theme.py); plot series keep their hues on both. The
    notebook's files too: cells, editors (gutter, marks), problems, the new-op dialog."""
    root = Path(__file__).resolve().parents[2] / "studio" / "app"
    found = {f: fixed_colours((root / f).read_text()) for f in SHELL_FILES + NOTEBOOK_FILES}
    assert {f: v for f, v in found.items() if v} == {}
    assert fixed_colours(OLD_CSS) and fixed_colours('pg.PlotWidget(background="w")')     # controls
    assert fixed_colours('p.fillRect(r, QColor("#f3f3f3"))') and fixed_colours("Qt.GlobalColor.red")


# ----------------------------------------------------------------------------- editors and messages
OLD_GUTTER = ("#f3f3f3", "#888")                      # editors.py's fixed gutter colours before
OLD_OK = "<span style='color:#1e7b34'>✔ well-formed</span>"        # cells/base.py's fixed message colour


def crop(host, widget):
    """``widget`` as rendered inside ``host`` (a child label paints no background of its own)."""
    from PySide6.QtCore import QPoint, QRect
    return host.grab(QRect(widget.mapTo(host, QPoint(0, 0)), widget.size())).toImage()


def bg_and_ink(img) -> tuple[QColor, QColor]:
    """The most common pixel colour (the background) and the pixel farthest from it in contrast
    (the text's full ink: glyph stems are drawn at full coverage)."""
    counts = Counter(img.pixel(x, y) for y in range(img.height()) for x in range(img.width()))
    bg = QColor.fromRgb(counts.most_common(1)[0][0])
    ink = max((QColor.fromRgb(p) for p in counts), key=lambda c: contrast(c, bg))
    return bg, ink


def gutter_image(editor):
    from PySide6.QtCore import QRect
    g = editor._gutter
    editor.viewport().update()
    g.repaint()
    return editor.grab(QRect(g.pos(), g.size())).toImage()


def token_contrasts(editor, base: QColor) -> list[float]:
    """Contrast against ``base`` of every syntax colour the highlighter put into the editor."""
    from PySide6.QtGui import QTextFormat
    out, block = [], editor.document().begin()
    while block.isValid():
        out += [contrast(r.format.foreground().color(), base) for r in block.layout().formats()
                if r.format.hasProperty(QTextFormat.Property.ForegroundBrush)]
        block = block.next()
    assert out, "no highlighted token"
    return out


@pytest.mark.slow
def test_dark_gutters_and_status_labels_are_readable(qtbot, window):
    app = QApplication.instance()
    view = window.current() or window.open_story()
    editor = view.notebook.cell("kernel").editor
    sig = view.notebook.cell("signature")
    for source in ("check", "local"):
        editor.set_markers([], source)            # numbers only: no marker dot in the gutter
    assert sig.message.isVisible() and sig.chip.isVisible()
    light_ok = sig.message.text()
    app.setStyle("Fusion")
    app.setPalette(dark_palette())                # after the cells were made: they must follow
    qtbot.wait(50)
    bg, ink = bg_and_ink(gutter_image(editor))
    assert bg.lightnessF() < 0.3 and contrast(bg, ink) >= 4.5, (bg.name(), ink.name())
    base = dark_palette().color(QPalette.ColorRole.Base)
    assert bg != base                             # the gutter is set off from the text
    for label in (sig.chip, sig.message, sig.number):
        lbg, link = bg_and_ink(crop(sig, label))
        assert lbg.lightnessF() < 0.3 and contrast(lbg, link) >= 4.5, (label.text(), lbg.name(), link.name())
    assert sig.message.text() != light_ok and style.colour("ok") in sig.message.text()   # re-rendered for dark
    # the kernel's syntax colours switched to the dark style, each readable on the dark base
    assert editor.highlighter.style_name == "lightbulb" and min(token_contrasts(editor, base)) >= 4.5
    assert not view.doc.dirty                     # re-colouring is no edit
    # failing controls: the old fixed gutter and message colours under the same dark palette
    editor.gutter_background = lambda: QColor(OLD_GUTTER[0])
    editor.gutter_numbers = lambda: QColor(OLD_GUTTER[1])
    bg, ink = bg_and_ink(gutter_image(editor))
    assert bg.lightnessF() > 0.9 and contrast(bg, ink) < 4.5, (bg.name(), ink.name())
    editor.highlighter.set_palette(light_palette())      # the light style's tokens on the dark base
    assert min(token_contrasts(editor, base)) < 4.5
    sig.message.set_rendered(lambda: OLD_OK)
    qtbot.wait(10)
    lbg, link = bg_and_ink(crop(sig, sig.message))
    assert contrast(lbg, link) < 4.5, (lbg.name(), link.name())


# ----------------------------------------------------------------------------- legends and input frames
def legend_image(plot):
    """The text of ``plot``'s legend as rendered (its first label's rectangle in the view)."""
    _sample, label = plot.getPlotItem().legend.items[0]
    rect = plot.mapFromScene(label.sceneBoundingRect()).boundingRect()
    return plot.grab(rect.adjusted(1, 1, -1, -1)).toImage()


@pytest.mark.slow
def test_dark_theme_at_run_time_gives_readable_legends(qtbot, window):
    """View ▸ Theme ▸ Dark after the plots have their legends: the legend text is redrawn light
    (measured on the rendered legend); the control draws the same label in its old black."""
    view = window.open_story()
    plots = [view.run_panel.plot, view.gradcheck_panel.plot]
    for p in plots:
        p.plot([0, 1, 2], [0, 1, 0], name="output y (device)")
        p.getPlotItem().legend.setVisible(True)
    window.menus["view.theme.light"].trigger()
    qtbot.wait(20)
    window.menus["view.theme.dark"].trigger()
    qtbot.wait(50)
    for p in plots:
        bg, ink = bg_and_ink(legend_image(p))
        assert bg.lightnessF() < 0.3 and contrast(bg, ink) >= 4.5, (bg.name(), ink.name())
    # control: a label left in the light theme's colour (what pyqtgraph kept before) is unreadable
    for _sample, label in plots[0].getPlotItem().legend.items:
        label.setText(label.text, color="#000000")
    qtbot.wait(20)
    bg, ink = bg_and_ink(legend_image(plots[0]))
    assert contrast(bg, ink) < 4.5, (bg.name(), ink.name())


def frame_contrast(host, widget) -> tuple[float, float]:
    """(frame against the field's inside, frame against what surrounds the field): the frame is the
    pixel row at the widget's top edge, middle third; inside and outside are their most common colours."""
    from PySide6.QtCore import QPoint, QRect
    top_left = widget.mapTo(host, QPoint(0, 0))
    img = host.grab(QRect(top_left - QPoint(4, 4), widget.size() + __import__("PySide6.QtCore").QtCore.QSize(8, 8))) \
        .toImage()
    w, h = img.width(), img.height()
    outside = Counter(img.pixel(x, y) for y in (0, 1, h - 1, h - 2) for x in range(w)).most_common(1)[0][0]
    inside = Counter(img.pixel(x, h // 2) for x in range(w // 3, 2 * w // 3)).most_common(1)[0][0]
    edge = [QColor.fromRgb(img.pixel(x, y)) for y in range(3, 7) for x in range(w // 3, 2 * w // 3)]
    frame = max(edge, key=lambda c: contrast(c, QColor.fromRgb(inside)))
    return contrast(frame, QColor.fromRgb(inside)), contrast(frame, QColor.fromRgb(outside))


def test_dark_theme_input_fields_keep_their_frames(qtbot, window):
    """A text field, a spin box and a check box under the dark theme chosen at run time: each one's
    frame stands 3:1 against its inside and its surroundings (WCAG's bar for a control's boundary).
    The control: plain Fusion under the same palette (the frames vanish)."""
    from PySide6.QtWidgets import QCheckBox, QLineEdit, QSpinBox
    view = window.open_story()
    meta = view.notebook.cell("op")
    run = view.notebook.cell("run")
    conf = view.notebook.cell("conformance")
    field = next(w for w in meta.findChildren(QLineEdit) if w.isVisible())
    spin = next(w for w in run.findChildren(QSpinBox) if w.isVisible())
    check = next(w for w in conf.findChildren(QCheckBox) if w.isVisible())
    window.menus["view.theme.dark"].trigger()
    qtbot.wait(50)
    window.setFocus()                                     # (a focused field is framed in the highlight)
    checks = [(meta, field), (run, spin)]
    for host, w in checks:
        inside, outside = frame_contrast(host, w)
        assert inside >= 3 and outside >= 3, (type(w).__name__, inside, outside)
    style_ = QApplication.instance().style()
    from PySide6.QtWidgets import QStyle, QStyleOptionButton
    opt = QStyleOptionButton()
    opt.initFrom(check)
    box = style_.subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, check)
    img = check.grab(box.adjusted(-2, -2, 2, 2)).toImage()
    ring = QColor.fromRgb(img.pixel(2, img.height() // 2))
    assert contrast(ring, dark_palette().color(QPalette.ColorRole.Window)) >= 3, ring.name()
    # control: Fusion's own frames under the same palette
    QApplication.instance().setStyle("Fusion")
    QApplication.instance().setPalette(dark_palette())
    qtbot.wait(50)
    inside, outside = frame_contrast(meta, field)
    assert inside < 3 or outside < 3, (inside, outside)
