"""Qt's object-lifetime warnings fail a Studio test (tests/conftest.py ``_qt_lifetime_warnings``):
here is the check's own control — the warnings it catches, provoked on purpose —
and the warning it caught in the Studio itself: the open-tabs timer was connected to the tab bar's
``currentChanged(int)``, so ``QTimer.start(int)`` took the tab index (−1 when the last tab closed)
as its interval. Below them, the GC segfault: the Qt objects that were left to Python's cyclic
collector, the teardown check that now fails on any, and the crash itself with and without the fix."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import lifetime_warnings
from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QTabWidget, QWidget


@pytest.mark.lifetime_warnings_expected
def test_the_check_catches_a_bogus_timer_and_a_cross_thread_object(qtbot, qtlog):
    t = QTimer()
    t.start(-1)                                      # "QTimer::start: negative intervals aren't allowed"
    t.stop()
    parent = QObject()

    def elsewhere():
        child = QObject()
        child.setParent(parent)                      # "QObject::setParent: Cannot set parent, … different thread"
    th = threading.Thread(target=elsewhere)
    th.start()
    th.join()
    found = lifetime_warnings(r.message for r in qtlog.records)
    assert any("QTimer::start" in m for m in found), found
    assert any("different thread" in m for m in found), found
    assert lifetime_warnings(["QWidget::setMinimumSize: (…) Negative sizes", "plain"]) == []


@pytest.mark.lifetime_warnings_expected
def test_the_old_tabs_timer_wiring_warns(qtbot, qtlog):
    """The control for the window's wiring: the same connection the window had."""
    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    timer = QTimer(tabs, singleShot=True, interval=0)
    tabs.currentChanged.connect(timer.start)         # the old wiring: start(index)
    tabs.addTab(QWidget(), "a")
    tabs.removeTab(0)                                # currentChanged(-1)
    assert any("negative intervals" in m for m in lifetime_warnings(r.message for r in qtlog.records))


@pytest.mark.slow
def test_opening_and_closing_tabs_is_quiet(qtbot):
    """The window's own tabs (the autouse check fails this test on any lifetime warning)."""
    from test_app_shell import dispose, make_window
    win = make_window(qtbot, restore_session=False)
    try:
        view = win.open_story()
        win.close_view(view, discard=True)          # the last tab: currentChanged(-1) once
        qtbot.wait(20)
    finally:
        dispose(win)


def test_a_catalog_scan_that_lands_after_its_window_closed_is_dropped(qtbot):
    """The worker's catalog reply arrived after the window (and its catalog's chips) were deleted:
    'Internal C++ object (Chip) already deleted' in a later test. The panel now drops it."""
    import msgspec
    import shiboken6

    from studio.app.tools.catalog_panel import CatalogPanel
    from studio.engine.services.catalog_scan import scan
    cards = scan([], "p")                                        # the real scan's cards (no device needed)
    panel = CatalogPanel()
    panel.set_cards(cards, "p")
    shiboken6.delete(panel)
    valid = msgspec.structs.replace(cards, cards=[msgspec.structs.replace(c, receipt="valid") for c in cards.cards])
    panel.set_cards(valid, "p")                                  # dropped, no RuntimeError
    panel.scan_failed("late")
    assert not shiboken6.isValid(panel)


# ------------------------------------------------------------------ the GC segfault
# pyqtgraph makes a plot's context menus and the widget groups behind them without a Qt parent, so
# their Python wrappers own them. Once the plot's window was deleted, those wrappers sat in reference
# cycles (the old Export button held its plot, which held the button), and the menus lived on until
# Python's cyclic collector ran — wherever that was. Qt walks every widget when the style or the
# theme changes, calling into Python on the way; a collection there deleted menus still on Qt's
# list, and Qt went on into freed memory. studio/figures.py ``plot_widget`` parents them to the plot.

def test_a_studio_plot_owns_every_qt_object_pyqtgraph_makes_for_it(qtbot):
    import pyqtgraph as pg

    from studio.figures import orphans, plot_widget
    plot = plot_widget(title="t")
    qtbot.addWidget(plot)
    assert orphans(plot) == []
    assert plot.scene().contextMenu == []                    # no "Export…": a parentless dialog
    menu = plot.getPlotItem().getViewBox().menu
    assert menu.isWindow() and menu.parent() is plot         # still a pop-up, now in the plot's tree
    plain = pg.PlotWidget()                                  # control: as pyqtgraph makes it
    qtbot.addWidget(plain)
    names = sorted(type(o).__name__ for o in orphans(plain))
    assert names == ["QMenu", "ViewBoxMenu", "WidgetGroup", "WidgetGroup", "WidgetGroup"], names
    for o in orphans(plain):                                 # (not left to the collector by this test)
        o.setParent(plain)


def _plot_in_a_deleted_window(make_plot) -> None:
    """A window holding a plot that sits in a reference cycle; the window is deleted by Qt."""
    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtWidgets import QVBoxLayout, QWidget
    top = QWidget()
    plot = make_plot()
    plot.cycle = plot                                        # any cycle through the plot's wrapper
    QVBoxLayout(top).addWidget(plot)
    top.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def test_the_teardown_check_names_qt_objects_left_to_the_collector(qtbot):
    import pyqtgraph as pg
    from conftest import qt_objects_left_to_the_collector

    from studio.figures import plot_widget
    qt_objects_left_to_the_collector()                       # (whatever earlier tests left)
    _plot_in_a_deleted_window(plot_widget)
    assert qt_objects_left_to_the_collector() == []
    _plot_in_a_deleted_window(pg.PlotWidget)                 # control: the plot before the fix
    left = qt_objects_left_to_the_collector()                # (and this collection deletes them)
    assert sum("ViewBoxMenu" in x for x in left) == 1 and sum("QMenu" in x for x in left) == 1, left
    assert sum("WidgetGroup" in x for x in left) == 3, left


def test_closing_a_studio_plot_leaves_nothing_to_the_collector(qtbot):
    """pyqtgraph's own ``close()`` (pytest-qt calls it on a plot it was given) takes the view box
    and the axes out of the scene before clearing it; the Studio's plot deletes them."""
    import pyqtgraph as pg
    from conftest import qt_objects_left_to_the_collector

    from studio.figures import plot_widget
    qt_objects_left_to_the_collector()

    def shown_then_closed(make):
        plot = make(title="sine")
        plot.addLegend()
        plot.plot(np.sin(np.arange(200) / 10), name="input")
        plot.setLabel("bottom", "sample")
        plot.show()
        qtbot.waitExposed(plot)
        plot.close()
        plot.deleteLater()
        qtbot.wait(1)
    shown_then_closed(plot_widget)
    assert qt_objects_left_to_the_collector() == []
    shown_then_closed(pg.PlotWidget)                         # control
    left = qt_objects_left_to_the_collector()
    assert any("ViewBox " in x for x in left) and any("QGraphicsTextItem" in x for x in left), left


def test_a_document_with_a_bad_manifest_goes_when_dropped(qtbot):
    """Its kept problem held a traceback, whose frames held the Qt document being built, and the
    model held the document's signals: both cycles left the QObject to the collector."""
    import gc
    import weakref

    from studio.app.notebook.model import OpDocument
    gc.disable()
    try:
        doc = OpDocument({"op.toml": 'id = "user/me/x@1"\n'})          # not a whole contract
        assert doc.toml_problem is not None and doc.toml_problem.__traceback__ is None
        gone = weakref.ref(doc)
        del doc
        assert gone() is None                                        # by reference count, at once
    finally:
        gc.enable()


def test_a_bad_workflow_file_makes_no_widget(qtbot, tmp_path):
    """The file is read before the tab's widget is made: raised out of a half-made widget, an
    error that is kept (here, as a test keeps it) held that widget and its worker through its
    traceback, and the test's frame and the error hold each other: left to the collector."""
    import gc

    from PySide6.QtWidgets import QApplication

    from studio.app.bridge.worker_bridge import DeviceWorkers
    from studio.app.tools.workflow_view import WorkflowView
    from studio.engine.errors import StudioError
    bad = tmp_path / "bad.toml"
    bad.write_text('[workflow]\nname = "b"\n[steps.a]\nop = "core/signal/clip@1"\ninputs = { x = "nowhere" }\n')
    workers = DeviceWorkers()
    gc.disable()
    try:
        before = len(QApplication.allWidgets())
        with pytest.raises(StudioError) as kept:
            WorkflowView(bad, workers)
        assert len(QApplication.allWidgets()) == before and "dangling" in kept.value.format()
    finally:
        gc.enable()
        workers.deleteLater()


# The crash itself, in a process of its own: the Studio's window with the story's workflow (five
# plots) is disposed as the tests dispose theirs, then the next window switches to the dark theme
# and Python's collector runs at the first widget Qt restyles (an application event filter stands
# for the allocation that would trigger it there). Every plot is put in a reference cycle; the
# control builds them as before the fix, plain pyqtgraph plots.
CRASH = r'''
import gc, sys
from PySide6.QtCore import QCoreApplication, QEvent, QObject
from PySide6.QtWidgets import QApplication, QWidget
app = QApplication([])
import pyqtgraph as pg
import studio.figures
from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.resources import ROOT

make = pg.PlotWidget if sys.argv[1] == "before-the-fix" else studio.figures.plot_widget


def plot_widget(*args, **kw):
    plot = make(*args, **kw)
    plot.cycle = plot                        # (as the old Export button and its plot held each other)
    return plot


studio.figures.plot_widget = plot_widget


class CollectOnce(QObject):
    armed = False
    def eventFilter(self, obj, ev):
        if CollectOnce.armed and isinstance(obj, QWidget):
            CollectOnce.armed = False
            gc.collect()
        return False


def settle():
    app.processEvents()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    app.processEvents()


def window():
    w = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
    w.show()
    settle()
    return w


def dispose(w):
    for v in list(w.views):
        w.close_view(v, discard=True)
    w.shutdown(); w.close(); w.deleteLater()
    settle()


gc.disable()                                 # the collector runs only where this script says
collect = CollectOnce()
app.installEventFilter(collect)
first = window()
first.open_workflow(ROOT / "workflows" / "spike_removal.toml")
settle()
dispose(first)
del first
second = window()
CollectOnce.armed = True
second.theme.apply("dark")
print("the theme changed", CollectOnce.armed, flush=True)
dispose(second)
'''


def _crash_run(mode: str, tmp_path):
    import os
    import subprocess
    import sys
    env = dict(os.environ, SCELLIS_HOME=str(tmp_path / mode), QT_QPA_PLATFORM="offscreen")
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", CRASH, mode], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.slow
def test_a_theme_change_while_the_collector_runs_does_not_crash(tmp_path):
    fixed = _crash_run("fixed", tmp_path)
    assert fixed.returncode == 0 and "the theme changed False" in fixed.stdout, fixed.stderr[-3000:]
    before = _crash_run("before-the-fix", tmp_path)          # control: freed memory reached
    assert before.returncode != 0 and "the theme changed" not in before.stdout, (before.returncode, before.stdout)
    # faulthandler's report: "Segmentation fault" (SIGBUS, "Bus error", once in a full run), in the theme change
    assert "Fatal Python error" in before.stderr and "theme.py" in before.stderr, before.stderr[-3000:]
