"""The Studio fits the screen (and scrolls sideways where it must): with the Learner,
the Sharding report and the Ring panel all open — their tables full of 64-digit hashes — the
window's minimum width stays within a 1280×800 and a 1024×700 screen and every dock lies inside the
window (the Learner's Stop button included); with the catalog beside it, the notebook does not
scroll sideways, and a long invalid signature does not widen it.

Each screen is a process of its own (the screen size is fixed when Qt starts): offscreen with a
screen of that size, and — where Xvfb is installed — a real X11 window (xcb) on an Xvfb screen
of that size. The probe prints what it measured as JSON; the tests judge it."""
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
win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
win.show()
def settle(n=20):
    for _ in range(n):
        app.processEvents()
settle()
view = win.open_story()
screen = app.primaryScreen().availableGeometry()
win.resize(screen.width(), screen.height())
settle(40)
if os.environ.get("PROBE_LONG_SIGNATURE"):
    sig = view.notebook.cells["signature"].text
    long = "wm(x: f32[n], " + ", ".join(f"p{i}: f32[n{i}]" for i in range(40)) + ") -> y: f32[n] where bogus" * 3
    sig.setText(long)
    sig.textEdited.emit(long)                                  # as typed
    view.checker.check_now()
    for _ in range(100):
        settle(); time.sleep(0.05)
hbar = view.notebook.scroll.horizontalScrollBar()
caret = view.notebook.cells["signature"].caret
alone = {"caret_shown": caret.isVisible() and len(caret.text()) > 0,"notebook_sideways": hbar.maximum(), "inner_min": view.notebook.scroll.widget().minimumSizeHint().width(),
         "viewport": view.notebook.scroll.viewport().width()}
for a in win.menus.menu("tools").actions():                       # Tools ▸ Learner…, Tools ▸ Sharding report…
    a.trigger()
next(a for a in win.menus.menu("view.panels").actions() if a is win.ring_dock.toggleViewAction()).trigger()
HASH = "0123456789abcdef" * 4
lp = win.learner_dock.panel                               # what a finished run leaves in it
lp.steps_table.setRowCount(3)
from PySide6.QtWidgets import QTableWidgetItem
for r in range(3):
    for c, t in enumerate((str(r), "1.234567e-03", "✓ 4 owners agree", HASH)):
        lp.steps_table.setItem(r, c, QTableWidgetItem(t))
lp.status.setText(f"done: 3 steps on 4 owner(s); final parameter hash {HASH}")
settle(40)
win.resize(screen.width(), screen.height())
settle(40)
if os.environ.get("QT_QPA_PLATFORM") == "xcb":
    for _ in range(30):
        settle(); time.sleep(0.05)
def inside(w):
    w.raise_()                      # a dock tabbed beside the catalog is measured on its own tab
    settle(5)
    top_left = w.mapTo(win, QPoint(0, 0))
    r = QRect(top_left, w.size())
    return [r.left(), r.right(), r.top(), r.bottom()]
docks = {d.objectName(): inside(d) for d in (win.learner_dock, win.shard_dock, win.ring_dock, win.catalog_dock)
         if d.isVisible() and not d.isFloating()}
print("PROBE " + json.dumps({**alone,
    "screen": [screen.width(), screen.height()],
    "min_width": win.minimumSizeHint().width(), "min_set": win.minimumWidth(),
    "window": [win.width(), win.height()],
    "frame": [win.frameGeometry().width(), win.frameGeometry().height()],
    "docks": docks,
    "visible": {n: d.isVisible() for n, d in (("learner", win.learner_dock), ("shard", win.shard_dock),
                                            ("ring", win.ring_dock))},
    "stop": inside(lp.stop_button), "stop_dock": win.learner_dock.isAncestorOf(lp.stop_button),
}), flush=True)
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


def judge(m: dict, w: int, h: int) -> None:
    assert m["screen"] == [w, h]
    assert m["visible"] == {"learner": True, "shard": True, "ring": True}
    assert m["min_width"] <= w and m["min_set"] <= w, m
    assert m["window"][0] <= w, m                                  # the window fits, its right edge reachable
    for name, (left, right, _top, _bottom) in m["docks"].items():
        assert 0 <= left and right < m["window"][0], (name, m)
    assert m["stop_dock"] and m["docks"]["learner_dock"][1] < w
    assert m["notebook_sideways"] == 0 and m["inner_min"] <= m["viewport"], m


@pytest.mark.slow
@pytest.mark.parametrize("size", [(1280, 800), (1024, 700)])
def test_every_dock_fits_an_offscreen_screen(tmp_path, size):
    judge(probe(offscreen(tmp_path, *size)), *size)


@pytest.mark.slow
def test_a_long_invalid_signature_does_not_widen_the_notebook(tmp_path):
    m = probe({**offscreen(tmp_path, 1024, 700), "PROBE_LONG_SIGNATURE": "1"})
    assert m["caret_shown"]                                      # the error is on screen, with its caret
    judge(m, 1024, 700)
    from studio.app.cells.signature import CARET_SPAN, caret_html
    long = "x" * 500
    html = caret_html(long, 400)
    assert "…" in html and len(html) < CARET_SPAN * 3                # the stretch around column 400 only


@pytest.mark.slow
def test_the_probe_sees_a_panel_that_does_not_fit(tmp_path):
    """The negative control: a screen narrower than the window's true minimum (the catalog,
    the notebook and three docks side by side) is reported as not fitting."""
    m = probe(offscreen(tmp_path, 400, 700))
    with pytest.raises(AssertionError):
        judge(m, 400, 700)


@pytest.fixture
def xvfb(request):
    """A real X server of the size asked for (skipped without Xvfb)."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    w, h = request.param
    display = f":{90 + (w % 7)}"
    proc = subprocess.Popen([exe, display, "-screen", "0", f"{w}x{h}x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lock = Path(f"/tmp/.X11-unix/X{display[1:]}")
    for _ in range(100):
        if lock.exists():
            break
        time.sleep(0.05)
    yield {"QT_QPA_PLATFORM": "xcb", "DISPLAY": display}, (w, h)
    proc.terminate()
    proc.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("xvfb", [(1280, 800), (1024, 700)], indirect=True)
def test_every_dock_fits_a_real_x11_screen(xvfb):
    env, (w, h) = xvfb
    m = probe(env)
    judge(m, w, h)
    assert m["frame"][0] <= w                                       # the frame too (no window manager here)


WM_CLASS = r'''
import subprocess, sys, os
from studio.app.main import name_the_application
if sys.argv[1] == "named":
    name_the_application()
from studio.figures import qt_app
app = qt_app()
from PySide6.QtWidgets import QMainWindow
w = QMainWindow()
w.setWindowTitle("Scellis Studio")
w.show()
for _ in range(50):
    app.processEvents()
print(subprocess.run(["xprop", "-id", str(int(w.winId())), "WM_CLASS"], capture_output=True, text=True).stdout,
      flush=True)
os._exit(0)
'''


@pytest.mark.slow
@pytest.mark.parametrize("xvfb", [(1024, 700)], indirect=True)
def test_wm_class_matches_the_desktop_file(xvfb, tmp_path):
    """X11's WM_CLASS is what the .desktop file's StartupWMClass expects, however
    the process was started; the control is a QApplication left unnamed (it takes its script's name)."""
    if shutil.which("xprop") is None:
        pytest.skip("xprop is not installed (apt-get install x11-utils)")
    env, _ = xvfb
    desktop = (REPO / "packaging" / "scellis-studio.desktop").read_text()
    assert "StartupWMClass=scellis-studio" in desktop
    script = tmp_path / "figures.py"                      # started through some other script
    script.write_text(WM_CLASS)

    def wm_class(mode):
        out = subprocess.run([sys.executable, str(script), mode], cwd=REPO, capture_output=True, text=True,
                             timeout=120, env={**os.environ, **env, "XDG_RUNTIME_DIR": "/tmp"})
        return out.stdout.strip()
    assert wm_class("named") == 'WM_CLASS(STRING) = "scellis-studio", "scellis-studio"'
    assert "scellis-studio" not in wm_class("unnamed")
