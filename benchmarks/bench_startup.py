"""Studio cold start: from starting a fresh Python process to the main window shown and its event
loop answering (a zero-delay timer queued before the window exists fires only once the loop
runs after show()), offscreen (QT_QPA_PLATFORM=offscreen), with a fresh user folder. The peer is
the same measurement for a bare PySide6 QMainWindow: what any Qt program pays on this machine.
The child also reports whether wgpu was imported (no device work before it is needed)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from .timing import row

TARGET_S = 1.0
BASELINE = 6.0

_CHILD = r"""
import sys, time
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
def report():
    app = QApplication.instance()
    shown = [w for w in app.topLevelWidgets() if w.isVisible()]
    print("SHOWN " + str(len(shown)) + " " + str(int("wgpu" in sys.modules)), flush=True)
    app.quit()
if sys.argv[1] == "studio":
    from studio.figures import qt_app
    qt_app()
    QTimer.singleShot(0, report)
    from studio.app.main import main
    main(["--no-recovery"])
else:
    from PySide6.QtWidgets import QMainWindow
    app = QApplication([])
    QTimer.singleShot(0, report)
    w = QMainWindow(); w.resize(1200, 800); w.setWindowTitle("bare"); w.show()
    app.exec()
"""


def cold_start(which: str) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="scellis-start-") as home:
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "SCELLIS_HOME": home}
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-c", _CHILD, which], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
        shown_at, info = None, {}
        for line in p.stdout:
            if line.startswith("SHOWN"):
                shown_at = time.perf_counter() - t
                _, n, wgpu = line.split()
                info = {"windows_shown": int(n), "wgpu_imported": bool(int(wgpu))}
                break
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
        if shown_at is None:
            raise RuntimeError(f"{which} never showed a window: {p.stderr.read()[-2000:]}")
        return shown_at, info


def rows(engine, quick: bool, margin: float) -> list[dict]:
    runs = 2 if quick else 5
    if not quick:
        cold_start("studio")                              # the first start fills the OS page cache
    studio = [cold_start("studio") for _ in range(runs)]
    bare = [cold_start("bare") for _ in range(1 if quick else runs)]
    t, info = min(studio, key=lambda r: r[0])
    tb = min(b[0] for b in bare)
    assert info["windows_shown"] >= 1, info
    return [row("Studio cold start to a shown, responsive window", "bare PySide6 QMainWindow", t, tb, engine.adapter,
                limit=round(BASELINE * margin, 3), target_s=TARGET_S, **info)]
