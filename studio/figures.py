"""Figures: pyqtgraph plots to PNG/SVG, written crash-safely (temp, fsync, rename). The one plot
export both front ends use: the Studio's plots and the headless `scellis demo`. Qt lives here, so
the engine never imports this module (pyproject.toml's import-linter contracts)."""
from __future__ import annotations

import os
import tempfile

import numpy as np


def qt_app():
    """The process's QApplication; offscreen when there is no display."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication
    return QApplication.instance() or QApplication([])


def signal_plot(series: list[tuple], title: str, *, x_label: str | None = None, y_label: str | None = None,
                width: int = 1400, height: int = 500, log_y: bool = False):
    """A pyqtgraph PlotWidget showing each (label, y, colour) or (label, y, colour, x0), where x0 is
    the x of y's first sample (series of different lengths aligned on one axis), peak-downsampled
    and clipped to view; axes labelled when x_label / y_label are given."""
    qt_app()
    import pyqtgraph as pg
    pg.setConfigOptions(antialias=False, background="w", foreground="k")
    w = pg.PlotWidget(title=title)
    w.resize(width, height)
    w.addLegend()
    w.showGrid(x=True, y=True, alpha=0.3)
    if x_label:
        w.setLabel("bottom", x_label)
    if y_label:
        w.setLabel("left", y_label)
    if log_y:
        w.setLogMode(x=False, y=True)
    for k, (label, y, colour, *rest) in enumerate(series):
        y = np.asarray(y, dtype=np.float32)
        x0 = rest[0] if rest else 0
        item = w.plot(np.arange(y.size, dtype=np.float64) + x0, y, name=label,
                      pen=pg.mkPen(colour, width=1 if k == 0 else 2))      # the first is the context
        item.setDownsampling(auto=True, method="peak")
        item.setClipToView(True)
    return w


COLOURS = ("#9aa5b1", "#d1495b", "#00798c", "#edae49", "#30638e", "#66a182")


def export_plot(widget, path: str) -> None:
    """PNG or SVG by extension, written crash-safely."""
    import pyqtgraph.exporters as ex

    from .engine.atomic import write_bytes
    svg = str(path).lower().endswith(".svg")
    item = widget.plotItem if hasattr(widget, "plotItem") else widget
    with tempfile.TemporaryDirectory() as d:
        tmp = os.path.join(d, "plot" + (".svg" if svg else ".png"))
        if svg:
            try:
                ex.SVGExporter(item).export(tmp)
            except (ValueError, IndexError):
                # pyqtgraph's SVG post-processing does not parse every Qt version's path syntax;
                # Qt's own SVG generator paints the same scene as vectors
                _qt_svg(widget, tmp)
        else:
            exporter = ex.ImageExporter(item)
            exporter.parameters()["width"] = max(int(widget.width()), 400)
            exporter.export(tmp)
        with open(tmp, "rb") as f:
            write_bytes(path, f.read())


def _qt_svg(widget, path: str) -> None:
    from PySide6.QtCore import QRect, QSize
    from PySide6.QtGui import QPainter
    from PySide6.QtSvg import QSvgGenerator
    gen = QSvgGenerator()
    gen.setFileName(path)
    size = QSize(max(widget.width(), 400), max(widget.height(), 300))
    gen.setSize(size)
    gen.setViewBox(QRect(0, 0, size.width(), size.height()))
    gen.setTitle("Scellis Studio plot")
    p = QPainter(gen)
    try:
        widget.render(p)
    finally:
        p.end()
