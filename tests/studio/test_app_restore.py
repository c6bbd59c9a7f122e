"""Restoring the last session's tabs never holds the window back (studio/app/shell/window_state.py): the
window comes up with one placeholder per tab and a progress bar in the status bar, and the tabs are
filled in one per turn of the event loop, in their order, the current one kept; a placeholder
closed before it is filled in is not restored, and the session remembers that. The control builds
the same tabs at once, as the window once did: its first turn of the event loop comes only after
every view is built. (The launch figure beside a bare PySide6 window: benchmarks/bench_restore.py.)"""
from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QProgressBar

from studio.app.shell.settings import settings_store
from studio.app.shell.window import MainWindow
from studio.app.shell.window_state import RestoringTab
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.services.outline import story_workflow


def remember(pkgs, current: int) -> list[str]:
    tabs = [f"package:{pkgs[0].resolve()}", f"workflow:{story_workflow()}", f"package:{pkgs[1].resolve()}"]
    s = settings_store()
    s.setValue("session/tabs", tabs)
    s.setValue("session/current", current)
    s.sync()
    return tabs


def first_turn(qtbot, make) -> tuple[MainWindow, float, list]:
    """A window made and shown, the seconds until its event loop first answers, and its tabs' kinds
    at that moment."""
    t = time.perf_counter()
    answered, made = [], []

    def answer():
        answered.append(time.perf_counter() - t)
        win = made[0]
        answered.append([type(win.tabs.widget(i)).__name__ for i in range(win.tabs.count())])
    QTimer.singleShot(0, answer)
    win = make()
    made.append(win)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: bool(answered), timeout=60_000)
    return win, answered[0], answered[1]


@pytest.mark.slow
def test_restored_tabs_fill_in_behind_a_progress_bar_with_the_window_up(qtbot, pkg_copy):
    pkgs = [pkg_copy(name="first"), pkg_copy(name="second")]
    tabs = remember(pkgs, current=1)
    win, quick, kinds = first_turn(qtbot, lambda: MainWindow(workers=DeviceWorkers(), offer_recovery=False))
    try:
        assert kinds == ["RestoringTab"] * 3, kinds                   # the window answers before any view is built
        if win.state.restoring:
            bar = win.statusBar().findChild(QProgressBar, "restore_progress")
            assert bar is not None and bar.maximum() == 3
            assert win.tabs.tabText(2) == "⏳ second" and win.tabs.currentIndex() == 1
        heard = []
        win.tabsRestored.connect(heard.append)
        qtbot.waitUntil(lambda: bool(heard), timeout=60_000)
        views = heard[0]
        assert len(views) == 3 and not win.state.restoring and views == win.state.restored_views
        assert [win.tabs.widget(i) for i in range(3)] == views                       # in their order
        assert views[0].doc.path.resolve() == pkgs[0].resolve() and views[1].path == story_workflow()
        assert win.tabs.currentIndex() == 1                                          # the current one kept
        qtbot.waitUntil(lambda: win.statusBar().findChild(QProgressBar, "restore_progress") is None)
        assert list(settings_store().value("session/tabs")) == tabs
    finally:
        win.shutdown()

    # the control, in the same run: every view built before the event loop's first turn
    slow, at_once, kinds = first_turn(qtbot, lambda: _built_at_once())
    try:
        assert kinds == ["DocumentView", "WorkflowView", "DocumentView"] and not slow.state.restoring
        assert at_once > 3 * quick, (at_once, quick)
    finally:
        slow.shutdown()


def _built_at_once() -> MainWindow:
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
    win.state.restore_tabs(at_once=True)
    return win


@pytest.mark.slow
def test_a_placeholder_closed_before_it_is_filled_in_is_not_restored(qtbot, pkg_copy):
    pkgs = [pkg_copy(name="first"), pkg_copy(name="second")]
    tabs = remember(pkgs, current=0)
    made = []

    def close_the_last():                       # the user's first act, before any tab is filled in
        assert isinstance(made[0].tabs.widget(2), RestoringTab)
        made[0].tabs.tabCloseRequested.emit(2)
    QTimer.singleShot(0, close_the_last)
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False)
    made.append(win)
    qtbot.addWidget(win)
    try:
        qtbot.waitUntil(lambda: not win.state.restoring, timeout=30_000)
        assert win.tabs.count() == 2 and len(win.state.restored_views) == 2
        assert [type(win.tabs.widget(i)).__name__ for i in range(2)] == ["DocumentView", "WorkflowView"]
        qtbot.waitUntil(lambda: list(settings_store().value("session/tabs") or []) == tabs[:2], timeout=5000)
    finally:
        win.shutdown()
