"""Figures: pyqtgraph plots to PNG, SVG (through pyqtgraph's own exporters) and CSV (every plotted
series, with a header), written crash-safely (temp, fsync, rename). The one plot export both front
ends use: the Studio's plots and the headless `scellis demo`. Qt lives here, so the engine never
imports this module (pyproject.toml's import-linter contracts)."""
from __future__ import annotations

import functools
import io
import os
import tempfile
import threading

import numpy as np

FORMATS = ("png", "svg", "csv")


def qt_app():
    """The process's QApplication; offscreen when there is no display."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication
    return QApplication.instance() or QApplication([])


def plot_widget(*args, **kw):
    """A ``pg.PlotWidget`` (same arguments) that owns every Qt object pyqtgraph makes for it.

    pyqtgraph makes the view box's context menu, the "Plot Options" menu and the widget groups
    behind them without a Qt parent. A Qt object made from Python without a parent belongs to its
    Python wrapper: Qt deletes it only when Python frees the wrapper. Once the plot's window is
    deleted those wrappers sit in reference cycles, so the menus live on until Python's cyclic
    collector happens to run, and are deleted wherever that is. When the style or the theme
    changes, Qt walks every widget of the application and calls into Python on the way; a
    collection there deletes menus still on Qt's list, and Qt goes on into freed memory: a
    segmentation fault (tests/studio/test_app_lifetime.py). Parented to the plot, they go with it, in Qt.

    pyqtgraph's own "Export…" entry is left out of the context menu: its dialog would be one more
    parentless window, and the Studio's Export ▾ button writes the same formats."""
    from PySide6.QtWidgets import QWidget
    plot = _plot_class()(*args, **kw)
    for obj, parent in _parentless(plot):
        if isinstance(obj, QWidget):
            obj.setParent(parent, obj.windowFlags())      # (the flags keep a menu a pop-up)
        else:
            obj.setParent(parent)
    plot.scene().contextMenu = []
    return plot


def _parentless(plot) -> list[tuple]:
    """Each Qt object pyqtgraph makes for ``plot`` without a parent, with the parent it gets here."""
    item = plot.getPlotItem()
    view_menu = item.getViewBox().menu
    return [(view_menu, plot), (item.ctrlMenu, plot), (item.stateGroup, plot),
            *((group, view_menu) for group in view_menu.widgetGroups)]


@functools.cache
def _plot_class():
    import pyqtgraph as pg
    import shiboken6

    class Plot(pg.PlotWidget):
        def close(self):
            """pyqtgraph's ``close`` takes the view box and the axes (with their labels) out of
            the scene before it clears the scene, so they outlive it, parentless; deleted here."""
            item = self.plotItem
            if item is None:                                  # (closed before)
                return super().close()
            axes = [a["item"] for a in item.axes.values()]
            loose = [item.getViewBox(), *axes, *(a.label for a in axes)]
            super().close()
            for o in loose:
                if shiboken6.isValid(o) and o.scene() is None and o.parentItem() is None:
                    shiboken6.delete(o)
            return True
    return Plot


def orphans(plot) -> list:
    """The Qt objects pyqtgraph made for ``plot`` that have no Qt parent (none from ``plot_widget``)."""
    return [obj for obj, _ in _parentless(plot) if obj.parent() is None]


def signal_plot(series: list[tuple], title: str, *, x_label: str | None = "sample", y_label: str | None = "value",
                x_units: str | None = None, y_units: str | None = None, width: int = 1400, height: int = 500,
                log_y: bool = False):
    """A pyqtgraph PlotWidget showing each (label, y, colour) or (label, y, colour, x0), where x0 is
    the x of y's first sample (series of different lengths aligned on one axis), peak-downsampled
    and clipped to view; both axes labelled (a sample index and a value unless told otherwise)."""
    qt_app()
    import pyqtgraph as pg
    w = plot_widget(background="w")
    w.setTitle(title, color="k")
    for ax in ("left", "bottom", "top", "right"):
        w.getAxis(ax).setPen("k")
        w.getAxis(ax).setTextPen("k")
    w.resize(width, height)
    w.addLegend(labelTextColor="k")
    w.showGrid(x=True, y=True, alpha=0.3)
    label_axes(w, x_label, y_label, x_units=x_units, y_units=y_units)
    if log_y:
        w.setLogMode(x=False, y=True)
    longest = 0
    for k, (label, y, colour, *rest) in enumerate(series):
        item = w.plot([], [], name=label, pen=pg.mkPen(colour, width=1 if k == 0 else 2))   # the first: context
        draw_whole(item, y, rest[0] if rest else 0)
        longest = max(longest, int(np.size(y)))
    if whole_note(longest):
        w.setTitle(note_title(title, whole_note(longest)), color="k")
    return w


ENVELOPE_FROM = 20_000      # a series longer than this is drawn as its min/max envelope


def whole_note(n: int) -> str:
    """What a plot of ``n`` samples says about itself: every sample is plotted, a long series drawn
    as its min/max envelope (pyqtgraph's "peak" downsampling: the least and the greatest sample of
    each pixel column, so a single-sample spike stays visible at any zoom); "" for short series."""
    if n <= ENVELOPE_FROM:
        return ""
    return f"all {n:,} samples shown, drawn as a min/max envelope (spikes kept); CSV export: every sample"


def draw_whole(item, y, x0: int = 0) -> str:
    """Give the curve ``item`` the whole of ``y`` (never a prefix: the CSV export reads every sample
    back), drawn as its min/max envelope when long; returns ``whole_note`` for it."""
    y = np.asarray(y, dtype=np.float32).reshape(-1)
    item.setData(np.arange(y.size, dtype=np.float64) + x0, y)
    item.setDownsampling(auto=True, method="peak")
    item.setClipToView(True)
    return whole_note(int(y.size))


def note_title(title: str, note: str) -> str:
    """A plot title with ``whole_note``'s line under it (HTML for pyqtgraph's title label)."""
    if not note:
        return title
    return f"{title}<br><span style='font-size:8pt'>{note}</span>" if title else \
        f"<span style='font-size:8pt'>{note}</span>"


COLOURS = ("#9aa5b1", "#d1495b", "#00798c", "#edae49", "#30638e", "#66a182")


def label_axes(plot, x_label: str | None, y_label: str | None, *, x_units: str | None = None,
               y_units: str | None = None) -> None:
    """Name both axes (and their units, shown in brackets; pyqtgraph's SI prefixes are turned off so
    a sample index never reads "k samples")."""
    for side, text, units in (("bottom", x_label, x_units), ("left", y_label, y_units)):
        if text:
            ax = plot.getAxis(side)
            ax.enableAutoSIPrefix(False)
            plot.setLabel(side, text, units=units)


def axis_title(plot, side: str) -> str:
    """The axis's label as written on the plot, units included ("sample [index]")."""
    ax = plot.getAxis(side)
    text = str(ax.labelText or "")
    return f"{text} [{ax.labelUnits}]" if ax.labelUnits else text


# ---------------------------------------------------------------------------------------- data
def plotted_series(plot) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, x, y) of every data item on the plot, in full (not the downsampled view), in the order
    they were added; unnamed items are called "series k"."""
    item = plot.getPlotItem() if hasattr(plot, "getPlotItem") else plot
    out = []
    for k, it in enumerate(item.listDataItems()):
        if hasattr(it, "getOriginalDataset"):
            x, y = it.getOriginalDataset()
        else:
            x, y = it.getData()
        if x is None or y is None:
            continue
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if not x.size:
            continue
        name = it.name() if hasattr(it, "name") else None
        out.append((str(name or f"series {k + 1}"), x, y))
    return out


def series_table(plot) -> tuple[str, str, list[tuple[str, np.ndarray, np.ndarray]]]:
    """What a CSV of the plot holds, read from the plot (GUI thread): the axes' titles and every series."""
    return axis_title(plot, "bottom") or "x", axis_title(plot, "left") or "y", plotted_series(plot)


def series_csv(plot) -> str:
    """Every plotted series as CSV with a header (``table_csv`` of ``series_table``)."""
    return table_csv(*series_table(plot))


def table_csv(x_name: str, y_name: str, series: list[tuple[str, np.ndarray, np.ndarray]]) -> str:
    """CSV text with a header (any thread: numpy only). Series on a shared integer axis (sample
    indices: the run plot's input and output, a workflow step) become one table — the x column,
    then one column per series, blank where a series has no sample; other plots (a scatter of
    analytic against numeric) are written long: one row per point, ``series, x, y``."""
    buf = io.StringIO()
    if not series:
        buf.write(f"{_csv_cell(x_name)},{_csv_cell(y_name)}\n")
        return buf.getvalue()
    integral = all(np.all(np.isfinite(x)) and np.array_equal(x, np.round(x)) for _, x, _ in series)
    if integral:
        xs = np.unique(np.concatenate([x for _, x, _ in series]))
        cols = np.full((xs.size, len(series)), np.nan)
        for j, (_, x, y) in enumerate(series):
            cols[np.searchsorted(xs, x), j] = y
        buf.write(",".join(_csv_cell(h) for h in [x_name, *[n for n, _, _ in series]]) + "\n")
        text = io.StringIO()
        np.savetxt(text, np.column_stack([xs, cols]), delimiter=",", fmt="%.9g")
        buf.write(text.getvalue().replace("nan", ""))
    else:
        buf.write(f"series,{_csv_cell(x_name)},{_csv_cell(y_name)}\n")
        for name, x, y in series:
            cell = _csv_cell(name)
            for a, b in zip(x, y):
                buf.write(f"{cell},{a:.9g},{b:.9g}\n")
    return buf.getvalue()


def _csv_cell(s: str) -> str:
    s = str(s)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\n') else s


# ---------------------------------------------------------------------------------------- export
def export_plot(widget, path: str) -> None:
    """PNG, SVG or CSV by extension, written crash-safely. SVG goes through pyqtgraph's own
    SVGExporter, which maps each item's coordinates into the plot's — the axes and the data share
    one scale (rendering the widget into Qt's SVG generator does not: the curves come out under
    another transform than the axes)."""
    from .engine.atomic import write_bytes
    ext = str(path).lower().rsplit(".", 1)[-1]
    if ext == "csv":
        write_bytes(path, series_csv(widget).encode("utf-8"))
        return
    item = widget.plotItem if hasattr(widget, "plotItem") else widget
    if item is widget:
        with tempfile.TemporaryDirectory() as d:
            tmp = os.path.join(d, "plot." + ("svg" if ext == "svg" else "png"))
            svg_export(item, tmp) if ext == "svg" else _png(item, tmp, 1200)
            with open(tmp, "rb") as f:
                write_bytes(path, f.read())
        return
    # a plot squeezed into a notebook cell (607 × 160) exports at a readable size: laid out afresh
    # at least EXPORT_SIZE, so the axis labels fit, then put back as it was on screen
    size = export_size(widget)
    shown = widget.isVisible()
    moved = not shown or size != (int(widget.width()), int(widget.height()))
    if moved:
        lay_out(widget, size)
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = os.path.join(d, "plot." + ("svg" if ext == "svg" else "png"))
            svg_export(item, tmp) if ext == "svg" else _png(item, tmp, size[0])
            with open(tmp, "rb") as f:
                write_bytes(path, f.read())
    finally:
        if shown and moved:
            lay_out(widget)


EXPORT_SIZE = (1200, 500)      # the size a small plot is exported at, in pixels
READABLE = (800, 300)          # a plot at least this big exports at its own size


def export_size(widget) -> tuple[int, int]:
    w, h = int(widget.width()), int(widget.height())
    if w >= READABLE[0] and h >= READABLE[1]:
        return w, h
    return max(w, EXPORT_SIZE[0]), max(h, EXPORT_SIZE[1])


def _png(item, path: str, width: int) -> None:
    import pyqtgraph.exporters as ex
    exporter = ex.ImageExporter(item)
    exporter.parameters()["width"] = int(width)
    export_once(exporter, path)


def export_once(exporter, path: str) -> None:
    """Run a pyqtgraph exporter, then delete the Qt objects of its options: pyqtgraph's Parameters
    are parentless QObjects that hold each other (parent ↔ child), which only Python's cyclic
    collector would delete, at whatever moment it ran (see ``plot_widget``)."""
    import shiboken6
    try:
        exporter.export(path)
    finally:
        tree = [exporter.params]
        for param in tree:
            tree.extend(param.childs)
        for param in reversed(tree):
            shiboken6.delete(param)


def lay_out(widget, size: tuple[int, int] | None = None) -> None:
    """Lay a plot widget's scene out at ``size`` (default: the widget's own size). A widget never
    shown keeps the 640 × 480 of its construction until a show (a headless export never shows it),
    so the exporter would scale that layout up: the title's row left at zero height (clipped at the
    top) and the x-axis label drawn over the tick labels. An export lays a small shown plot out at
    its export size, then back at its own."""
    from PySide6.QtCore import QRectF
    w, h = size or (widget.width(), widget.height())
    rect = QRectF(0, 0, w, h)
    widget.setSceneRect(rect)
    widget.plotItem.setGeometry(rect)
    widget.plotItem.layout.activate()
    if size is None:                            # back on screen: as the view's own resizeEvent does
        from pyqtgraph import GraphicsView
        widget.range = rect
        GraphicsView.setRange(widget, rect, padding=0, disableAutoPixel=False)
        widget.updateMatrix()


_SVG_LOCK = threading.Lock()


def svg_export(item, path: str) -> None:
    """pyqtgraph's SVGExporter, made to accept the closed paths Qt 6 writes.

    pyqtgraph 0.14's coordinate fix-up (``correctCoordinates``) splits every token of a path's ``d``
    on a comma and fails on Qt's close-path token ``Z`` (pyqtgraph issue #3495: a ViewBox
    background, a legend frame or a scatter symbol is such a path). For the length of this export
    the exporter's fix-up is wrapped: the ``Z`` tokens are taken out of each path, pyqtgraph maps
    the coordinates, and they are put back. The exporter's module attribute is restored at once."""
    import importlib
    svgmod = importlib.import_module("pyqtgraph.exporters.SVGExporter")     # the module, not its class
    original = svgmod.correctCoordinates

    def tolerant(node, defs, item, options):
        closed = []
        for el in node.getElementsByTagName("path"):
            d = el.getAttribute("d")
            if "Z" in d or "z" in d:
                tokens = d.replace("z", "Z").replace("Z", " Z ").split()
                ends = [i for i, t in enumerate(tokens) if t == "Z"]
                el.setAttribute("d", " ".join(t for t in tokens if t != "Z"))
                closed.append((el, ends))
        original(node, defs, item, options)
        for el, ends in closed:
            tokens = el.getAttribute("d").split()
            for k, i in enumerate(ends):            # a Z closes the subpath made of the tokens before it
                tokens.insert(i, "Z") if i - k <= len(tokens) else tokens.append("Z")
            el.setAttribute("d", " ".join(tokens))

    with _SVG_LOCK:
        svgmod.correctCoordinates = tolerant
        try:
            export_once(svgmod.SVGExporter(item), path)
        finally:
            svgmod.correctCoordinates = original
