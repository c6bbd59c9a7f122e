"""The tool docks open at a readable width and never grow the window (studio/app/shell/docks.py,
``show_tool_dock``): Tools ▸ Learner…, Tools ▸ Sharding report… and Publish ▸ Card, each opened
from its menu in a 1024×700 window, come up a third of the window wide or so (never the 200 px
floor, never the card's 55 px), the window stays 1024 px wide, and the op's notebook keeps its
width (where a third column would squeeze it, the dock opens as a tab beside the catalog; the
control shows the third column scrolling the notebook sideways). In the same window, the
workflow notebook's step cells (studio/app/tools/workflow_view.py) fit beside the catalog: none is cut
on the right, nothing scrolls sideways.

As in tests/studio/test_app_fit.py, each screen is a process of its own: offscreen with a screen of that
size, and a real X11 window (xcb) on an Xvfb screen of that size. The control, in the same probe,
shows a dock whose panel asks for 900 px the plain way (``dock.show()``): the probe sees the
window grow."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = r'''
import json, os, sys, time
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv)
from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.app.publish.dialogs import show_card
from studio.engine.contract.package import load_package
win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
win.show()
def settle(n=30):
    for _ in range(n):
        app.processEvents()
        time.sleep(0.005)
settle()
view = win.open_story()
screen = app.primaryScreen().availableGeometry()
win.resize(screen.width(), screen.height())
settle(40)
out = {"screen": [screen.width(), screen.height()], "start": win.width(), "docks": {}}
# the workflow notebook at this size: every step's cell (its Run to here button too) inside the view
from PySide6.QtWidgets import QScrollArea
from studio.engine.services.outline import story_workflow
wf = win.open_workflow(story_workflow())
settle(60)
scroll = next(a for a in wf.findChildren(QScrollArea) if a.widget() is not None and a.widget().isAncestorOf(wf.cells[0]))
vp = scroll.viewport()
out["workflow"] = {"viewport": vp.width(), "sideways": scroll.horizontalScrollBar().maximum(),
                   "rights": [max(c.mapTo(vp, QPoint(0, 0)).x() + c.width(),
                                  c.run_here.mapTo(vp, QPoint(0, 0)).x() + c.run_here.width()) for c in wf.cells]}
win.tabs.setCurrentWidget(view)
settle(20)
for name in ("learner", "sharding", "card"):
    if name == "card":
        show_card(win, load_package(view.doc.path))           # Publish ▸ Card
        dock = win.card_dock
    else:
        next(a for a in win.menus.menu("tools").actions() if name in a.text().lower()).trigger()
        dock = win.learner_dock if name == "learner" else win.shard_dock
    settle(60)
    top_left = dock.mapTo(win, QPoint(0, 0))
    notebook = view.findChild(QScrollArea, "notebook_scroll")
    out["docks"][name] = {"width": dock.width(), "left": top_left.x(), "right": top_left.x() + dock.width() - 1,
                          "window": win.width(), "floating": dock.isFloating(), "visible": dock.isVisible(),
                          "notebook_sideways": notebook.horizontalScrollBar().maximum()}
# the controls: the learner as a third column beside the catalog (the notebook scrolls sideways at
# 1024), then a panel that asks for 900 px, its dock shown the plain way (dock.show())
from PySide6.QtCore import Qt
for d in (win.learner_dock, win.shard_dock, win.card_dock):
    d.hide()
settle(20)
win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, win.learner_dock)
win.learner_dock.show()
win.resizeDocks([win.learner_dock], [win.docks.tool_dock_width()[0]], Qt.Orientation.Horizontal)
settle(60)
out["control_sideways"] = view.findChild(QScrollArea, "notebook_scroll").horizontalScrollBar().maximum()
win.learner_dock.hide()
settle(20)
win.learner_dock.widget().setMinimumWidth(900)
win.learner_dock.show()
settle(60)
out["control_window"] = win.width()
print("PROBE " + json.dumps(out), flush=True)
win.shutdown()
os._exit(0)
'''


def probe(env_extra: dict, timeout=240) -> dict:
    env = {**os.environ, "XDG_RUNTIME_DIR": "/tmp", **env_extra}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=timeout)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line is not None, out.stdout[-2000:] + out.stderr[-4000:]
    return json.loads(line[len("PROBE "):])


def offscreen(tmp_path, w: int, h: int) -> dict:
    cfg = tmp_path / "screen.json"
    cfg.write_text(json.dumps({"screens": [{"name": "probe", "x": 0, "y": 0, "width": w, "height": h,
                                            "logicalDpiX": 96, "logicalDpiY": 96, "dpr": 1}]}))
    return {"QT_QPA_PLATFORM": f"offscreen:configfile={cfg}"}


def judge(m: dict, w: int) -> None:
    assert m["start"] == w, m
    wf = m["workflow"]
    assert wf["sideways"] == 0 and max(wf["rights"]) <= wf["viewport"], wf      # no step cut on the right
    assert set(m["docks"]) == {"learner", "sharding", "card"}, m
    for name, d in m["docks"].items():
        assert d["visible"] and not d["floating"], (name, m)
        assert d["window"] == w, (name, m)                                # the window did not grow
        assert 0.3 * w <= d["width"] <= 0.55 * w, (name, m)              # readable, the notebook beside it
        assert 0 <= d["left"] and d["right"] < w, (name, m)              # inside the window
        assert d["notebook_sideways"] == 0, (name, m)                    # the notebook beside it, whole


@pytest.mark.slow
def test_tool_docks_open_readable_in_a_1024_offscreen_window(tmp_path):
    m = probe(offscreen(tmp_path, 1024, 700))
    judge(m, 1024)
    assert m["control_window"] > 1024, m             # the probe sees a dock that grows the window
    assert m["control_sideways"] > 0, m              # and a third column that squeezes the notebook


@pytest.fixture
def xvfb():
    """A real X server, 1024×700 (skipped without Xvfb)."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    display = f":{150 + os.getpid() % 50}"
    proc = subprocess.Popen([exe, display, "-screen", "0", "1024x700x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lock = Path(f"/tmp/.X11-unix/X{display[1:]}")
    for _ in range(100):
        if lock.exists():
            break
        time.sleep(0.05)
    yield {"QT_QPA_PLATFORM": "xcb", "DISPLAY": display}
    proc.terminate()
    proc.wait(10)


@pytest.mark.slow
def test_tool_docks_open_readable_in_a_real_x11_window(xvfb):
    m = probe(xvfb)
    judge(m, 1024)
    assert m["control_window"] > 1024, m
