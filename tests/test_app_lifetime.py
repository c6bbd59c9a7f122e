"""Qt's object-lifetime warnings fail a Studio test (tests/conftest.py ``_qt_lifetime_warnings``),
issue 28 point 9: here is the check's own control — the warnings it catches, provoked on purpose —
and the warning it caught in the Studio itself: the open-tabs timer was connected to the tab bar's
``currentChanged(int)``, so ``QTimer.start(int)`` took the tab index (−1 when the last tab closed)
as its interval."""
from __future__ import annotations

import threading

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
    import shiboken6

    from studio.app.catalog_panel import CatalogPanel
    from studio.app.catalog_scan import scan
    cards = scan([], "p")                                        # the real scan's cards (no device needed)
    panel = CatalogPanel()
    panel.set_cards(cards, "p")
    shiboken6.delete(panel)
    panel.set_cards([dict(c, receipt="valid") for c in cards], "p")     # dropped, no RuntimeError
    panel.scan_failed("late")
    assert not shiboken6.isValid(panel)
