"""Figures: every plot has labelled axes with units and an Export button (PNG,
SVG, CSV); SVG goes through pyqtgraph's own exporter and puts the data inside the axes, on the
axes' scale (the bug: rendering the widget into Qt's SVG generator put the curves under another
transform than the axes — kept here as the failing control); CSV has a header and every plotted
series, the input included."""
from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtCore import QPointF, QRect, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator

from studio.engine.services.trial import RunProof
from studio.figures import export_plot, plotted_series, series_csv, signal_plot

# ----------------------------------------------------------------------------- reading an SVG


def _matrix(attr: str) -> np.ndarray:
    m = np.eye(3)
    for kind, args in re.findall(r"(matrix|translate|scale)\(([^)]*)\)", attr or ""):
        v = [float(a) for a in re.split(r"[ ,]+", args.strip()) if a]
        t = np.eye(3)
        if kind == "matrix":
            t[:2, :] = [[v[0], v[2], v[4]], [v[1], v[3], v[5]]]
        elif kind == "translate":
            t[0, 2], t[1, 2] = v[0], (v[1] if len(v) > 1 else 0)
        else:
            t[0, 0], t[1, 1] = v[0], (v[1] if len(v) > 1 else v[0])
        m = m @ t
    return m


def _points(el) -> list[tuple[float, float]]:
    if el.tag.endswith("polyline"):
        text = el.get("points", "")
    else:
        text = re.sub(r"[A-Za-z]", " ", el.get("d", ""))
    nums = [float(a) for a in re.split(r"[ ,]+", text.strip()) if a]
    return list(zip(nums[0::2], nums[1::2]))


def svg_strokes(path) -> dict[str, np.ndarray]:
    """Every polyline/path point in SVG user coordinates (group transforms applied), by the stroke
    colour in effect on the element."""
    root = ET.parse(path).getroot()
    out: dict[str, list] = {}

    def walk(el, m, stroke):
        if el.tag.endswith("clipPath") or el.tag.endswith("defs"):
            return
        m = m @ _matrix(el.get("transform"))
        stroke = el.get("stroke", stroke)
        if el.tag.endswith("polyline") or el.tag.endswith("path"):
            pts = _points(el)
            if pts:
                p = np.c_[np.asarray(pts), np.ones(len(pts))] @ m.T
                out.setdefault(str(stroke).lower(), []).extend(p[:, :2].tolist())
        for ch in el:
            walk(ch, m, stroke)
    walk(root, np.eye(3), None)
    return {k: np.asarray(v) for k, v in out.items()}


def data_placement_errors(svg_path, plot, colour: str, x, y) -> list[str]:
    """Why the SVG does not show the plot's data on the plot's axes: the axes (spines, ticks and grid,
    drawn in the axis pen's colour) not spanning the axes rectangle (the ViewBox, in scene = SVG
    coordinates); curve points of ``colour`` outside it, or not where the axes put (x, y)."""
    vb = plot.getPlotItem().vb
    rect = vb.sceneBoundingRect()
    strokes = svg_strokes(svg_path)
    errors = []
    axis = strokes.get(plot.getAxis("bottom").pen().color().name().lower())
    if axis is None or not len(axis):
        errors.append("no axis lines in the SVG")
    else:
        (x0, y0), (x1, y1) = axis.min(0), axis.max(0)
        if not (rect.left() - 20 <= x0 <= rect.left() + 2 and rect.right() - 2 <= x1 <= rect.right() + 2 and
                rect.top() - 2 <= y0 <= rect.top() + 2 and rect.bottom() - 2 <= y1 <= rect.bottom() + 20):
            errors.append(f"the axes span ({x0:.1f}, {y0:.1f})–({x1:.1f}, {y1:.1f}), not the axes rectangle {rect}")
    pts = strokes.get(colour.lower())
    if pts is None or not len(pts):
        return [f"no stroke {colour} in the SVG"]
    legend = plot.getPlotItem().legend
    if legend is not None:                  # the legend's sample line has the curve's colour too
        lr = legend.sceneBoundingRect()
        pts = pts[~((pts[:, 0] >= lr.left()) & (pts[:, 0] <= lr.right()) &
                    (pts[:, 1] >= lr.top()) & (pts[:, 1] <= lr.bottom()))]
    outside = [(px, py) for px, py in pts if not (rect.left() - 1 <= px <= rect.right() + 1 and
                                                  rect.top() - 1 <= py <= rect.bottom() + 1)]
    if outside:
        errors.append(f"{len(outside)} of {len(pts)} points outside the axes {rect}: e.g. {outside[:3]}")
    want = np.array([[p.x(), p.y()] for p in (vb.mapViewToScene(QPointF(float(a), float(b))) for a, b in zip(x, y))])
    # every drawn point lies on a data point, on the axes' scale
    d = np.min(np.hypot(pts[:, None, 0] - want[None, :, 0], pts[:, None, 1] - want[None, :, 1]), axis=1)
    if d.max() > 1.5:
        errors.append(f"points off the data by up to {d.max():.1f} px (axes and data under different scales)")
    return errors


def qt_generator_svg(widget, path) -> None:
    """The old export, kept as the control: the whole widget rendered into Qt's SVG generator."""
    gen = QSvgGenerator()
    gen.setFileName(str(path))
    size = QSize(max(widget.width(), 400), max(widget.height(), 300))
    gen.setSize(size)
    gen.setViewBox(QRect(0, 0, size.width(), size.height()))
    p = QPainter(gen)
    try:
        widget.render(p)
    finally:
        p.end()


@pytest.fixture
def sine_plot(qtbot):
    x = np.arange(200, dtype=np.float64)
    y = 5 * np.sin(x / 10)
    w = signal_plot([("input", y, "#ff0000")], "sine", x_label="sample", y_label="value", x_units="index",
                    width=900, height=400)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    return w, x, y


def test_svg_export_puts_the_data_inside_the_axes_on_their_scale(sine_plot, tmp_path):
    w, x, y = sine_plot
    export_plot(w, str(tmp_path / "plot.svg"))
    assert data_placement_errors(tmp_path / "plot.svg", w, "#ff0000", x, y) == []
    # pyqtgraph's own exporter: its markers are there, and the closed paths Qt writes survived
    text = (tmp_path / "plot.svg").read_text()
    assert "pyqtgraph SVG export" in text and 'id="ViewBox_1"' in text
    assert re.search(r'd="M[^"]*Z"', text), "the ViewBox frame (a closed path) kept its Z"


def test_the_old_widget_render_svg_is_caught_by_the_same_check(sine_plot, tmp_path):
    """Failing control: the previous export (QSvgGenerator over the widget) draws the curve under
    another transform than the axes; the check must see it."""
    w, x, y = sine_plot
    qt_generator_svg(w, tmp_path / "old.svg")
    assert data_placement_errors(tmp_path / "old.svg", w, "#ff0000", x, y) != []


def test_svg_export_of_the_gradcheck_scatter(qtbot, tmp_path):
    """Scatter symbols (closed paths, the skipped probes' hollow rings too) export, inside the axes."""
    from studio.app.panels.gradcheck import GradcheckPanel
    p = GradcheckPanel(9)
    qtbot.addWidget(p)
    p.resize(1000, 700)
    p.show()
    probes = [{"analytic": a, "numeric": a * 1.0001} for a in np.linspace(-2, 3, 12)] + \
             [{"analytic": 0.5, "skipped": True}, {"analytic": -1.0, "skipped": True}]
    p.show_report({"verdict": "pass", "probes": probes, "negative_controls": [
        {"name": "scale", "description": "x2", "fate": "REJECTED", "max_error": 1.0}]})
    qtbot.wait(50)
    p.plot.export_button.export(str(tmp_path / "g.svg"))
    rect = p.plot.getPlotItem().vb.sceneBoundingRect()
    strokes = svg_strokes(tmp_path / "g.svg")
    from studio.app.widgets.style import colour
    rings = strokes.get(colour("muted").lower())        # skipped: the muted colour, not a failure's red
    assert rings is not None and len(rings) > 0 and "#d1495b" not in strokes
    assert all(rect.left() - 12 <= cx <= rect.right() + 12 and rect.top() - 12 <= cy <= rect.bottom() + 12
               for cx, cy in rings)


def _plots_of(qtbot, widgets: list) -> list:
    """Every plot inside ``widgets`` (handed to qtbot, which closes them; the caller's list keeps
    them alive: qtbot holds them weakly)."""
    import pyqtgraph as pg
    plots = []
    for w in widgets:
        qtbot.addWidget(w)
        plots += w.findChildren(pg.PlotWidget)
    return plots


def test_every_plot_has_labelled_axes_with_units_and_an_export_button(qtbot, tmp_path):
    from studio.app.panels.gradcheck import GradcheckPanel
    from studio.app.panels.run import RunPanel
    from studio.app.tools.workflow_view import WorkflowView
    from studio.engine.resources import ROOT
    widgets = [RunPanel(10), GradcheckPanel(9), WorkflowView(ROOT / "workflows" / "spike_removal.toml", workers=None)]
    plots = _plots_of(qtbot, widgets)
    assert len(plots) >= 4
    for plot in plots:
        for side in ("bottom", "left"):
            ax = plot.getAxis(side)
            assert ax.labelText and ax.labelUnits, (plot.objectName(), side, ax.labelText, ax.labelUnits)
        button = plot.export_button
        assert set(button.actions_by_format) == {"png", "svg", "csv"} and button.toolTip()


def test_every_studio_plot_owns_its_menus(qtbot):
    """Every plot the Studio makes comes from ``figures.plot_widget``: pyqtgraph's menus and widget
    groups have the plot as their Qt parent (test_app_lifetime.py: what happened without)."""
    from studio.app.tools.learner_view import LearnerPanel
    from studio.app.panels.gradcheck import GradcheckPanel
    from studio.app.panels.run import RunPanel
    from studio.app.panels.tune import TunePanel
    from studio.app.tools.workflow_view import WorkflowView
    from studio.engine.resources import ROOT
    from studio.figures import orphans
    widgets = [RunPanel(10), GradcheckPanel(9), TunePanel(), LearnerPanel(),
               WorkflowView(ROOT / "workflows" / "spike_removal.toml", workers=None)]
    plots = _plots_of(qtbot, widgets)
    assert len(plots) >= 9
    assert [(p.objectName(), [type(o).__name__ for o in orphans(p)]) for p in plots if orphans(p)] == []


def test_run_plot_exports_png_svg_and_csv_with_a_header_and_every_series(qtbot, tmp_path):
    from studio.app.panels.run import RunPanel
    p = RunPanel(10)
    qtbot.addWidget(p)
    p.resize(1100, 600)
    p.show()
    x = np.random.default_rng(3).normal(size=500).astype(np.float32)
    y = np.convolve(x, np.ones(7) / 7, mode="valid").astype(np.float32)          # 494 outputs, centred +3
    p.show_result(x, y, "user/me/box@1", 0.01, proof=RunProof(proven=True, why="a valid conformance receipt covers this run"))
    qtbot.waitUntil(lambda: p.chip.text() == "done", timeout=5000)
    assert p.export_plot.isEnabled()
    for name in ("run.png", "run.svg", "run.csv"):
        p.export_plot.export(str(tmp_path / name))
    img = QImage(str(tmp_path / "run.png"))
    assert img.width() >= 400 and img.height() > 100
    assert data_placement_errors(tmp_path / "run.svg", p.plot, "#9aa5b1", np.arange(x.size), x) == []
    rows = list(csv.reader(io.StringIO((tmp_path / "run.csv").read_text())))
    header, body = rows[0], rows[1:]
    assert header == ["sample [index]", "input", "user/me/box@1 (centred, +3)"]
    assert len(body) == x.size
    assert np.allclose([float(r[1]) for r in body], x, rtol=1e-6)
    out = [r[2] for r in body]
    assert out[:3] == ["", "", ""] and out[-3:] == ["", "", ""]
    assert np.allclose([float(v) for v in out[3:-3]], y, rtol=1e-6)
    assert csv_has_every_series(tmp_path / "run.csv", p.plot)


def csv_has_every_series(path, plot) -> bool:
    rows = list(csv.reader(io.StringIO(open(path).read())))
    names = [n for n, _, _ in plotted_series(plot)]
    return bool(rows) and all(n in rows[0] for n in names) and len(rows[0]) == len(names) + 1


def test_the_old_output_only_csv_fails_the_series_check(qtbot, tmp_path):
    """Failing control: the previous data export (the output only, no header) is not every series."""
    from studio.engine.arrays import save_array
    w = signal_plot([("input", np.arange(20.0), "#000000"), ("output", np.arange(14.0), "#ff0000", 3)], "t")
    qtbot.addWidget(w)
    save_array(str(tmp_path / "old.csv"), np.arange(14.0))
    assert not csv_has_every_series(tmp_path / "old.csv", w)
    export_plot(w, str(tmp_path / "new.csv"))
    assert csv_has_every_series(tmp_path / "new.csv", w)


def test_scatter_csv_is_long_with_the_axes_titles(qtbot):
    import pyqtgraph as pg
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    w.setLabel("bottom", "analytic", units="∂L/∂x")
    w.setLabel("left", "numeric", units="∂L/∂x")
    w.addItem(pg.ScatterPlotItem([0.5, 1.25], [0.5, 1.5], name="probes"))
    rows = list(csv.reader(io.StringIO(series_csv(w))))
    assert rows == [["series", "analytic [∂L/∂x]", "numeric [∂L/∂x]"], ["probes", "0.5", "0.5"],
                    ["probes", "1.25", "1.5"]]


def test_the_run_cells_data_export_writes_input_and_output_with_a_header(qtbot, tmp_path):
    """Export data… (.csv) through the run controller, off the GUI thread."""
    from studio.app.bridge.background import Background
    from studio.app.panels.run import RunPanel
    from studio.app.bridge.running import RunController

    class _Doc:
        def field(self, _k):
            return "f(x: f32[n]) -> (y: f32[n])"

        class changed:
            @staticmethod
            def connect(_f):
                return None

    class _Session:
        doc = _Doc()

    bg = Background()
    p = RunPanel(10)
    qtbot.addWidget(p)
    rc = RunController(_Session(), None, bg, p)
    x = np.linspace(0, 1, 50).astype(np.float32)
    p.show_result(x, x[:46] * 2, "out", 0.0)
    qtbot.waitUntil(lambda: p.chip.text() == "done", timeout=5000)
    rc.export_data(str(tmp_path / "d.csv")).result(30)
    rc.export_data(str(tmp_path / "d.npy")).result(30)
    rows = list(csv.reader(io.StringIO((tmp_path / "d.csv").read_text())))
    assert rows[0] == ["sample [index]", "input", "out (not proven) (centred, +2)"] and len(rows) == 51   # no receipt said
    assert np.array_equal(np.load(tmp_path / "d.npy"), x[:46] * 2)
    bg.close()
