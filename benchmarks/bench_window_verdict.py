"""The progressive verdict in the window, for the story op: after an edit of its kernel (a changed
kernel, so nothing compiled is reused), Ctrl+Enter in the Conformance cell of a real Studio window
(offscreen, the real device worker, a fresh user folder) and the time to what the cell shows:

- forward verdict, engine → widget: from the moment the engine knew it (the worker's note carries
  the wall-clock second) to the moment the cell showed it (target 0.2 s);
- Ctrl+Enter → forward verdict shown (target 1.0 s on a quiet machine);
- Ctrl+Enter → the report with the receipt and its mutation score shown (target 3 s).

The peer, launched in the same run (the same child process): a bare PySide6 window whose label a
worker thread updates through a queued signal — what any Qt program pays to show a value another
thread knows. "Warm": the window has run conformance once on the op before the timed edits."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from .timing import row

LATENCY_S, FORWARD_S, RECEIPT_S = 0.2, 1.0, 3.0
BASELINE = 40.0          # --quick limit: this times the margin (only a regression of several times)

_CHILD = r"""
import json, statistics, sys, tempfile, threading, time
from pathlib import Path
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow
from PySide6.QtTest import QTest
from studio.figures import qt_app
app = qt_app()

def wait(cond, timeout):
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise RuntimeError("timed out")
        app.processEvents()
        time.sleep(0.002)

# the peer: a bare PySide6 window, a worker thread's value shown in a label
class Bridge(QObject):
    told = Signal(float)
bare = QMainWindow(); label = QLabel("-"); bare.setCentralWidget(label); bare.resize(400, 200); bare.show()
bridge = Bridge(); shown = []
bridge.told.connect(lambda at: (label.setText(f"{at:.6f}"), shown.append(time.time() - at)))
peer = []
for _ in range(int(sys.argv[1]) + 2):
    shown.clear()
    threading.Thread(target=lambda: bridge.told.emit(time.time())).start()
    wait(lambda: shown, 10)
    peer.append(shown[0])
bare.close()

from studio.app.shell.window import MainWindow
from studio.app.bridge.worker_bridge import DeviceWorkers
win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
win.resize(1600, 1000); win.show()
view = win.new_op("windowed_median", Path(tempfile.mkdtemp()), "windowed_median", "bench")
panel = view.conformance_panel
for lane in ("proof", "edit"):
    job = win.workers.submit(lane, "ping"); wait(lambda: not job.active, 120)

def once(k):
    ed = view.notebook.cell("kernel").editor
    ed.moveCursor(ed.textCursor().MoveOperation.End)
    ed.insertPlainText(f"\n// edit {k}\n")
    view.notebook.show_cell("conformance")
    panel.seed.setFocus()
    t0 = time.time()
    QTest.keyClick(panel.seed, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wait(lambda: panel.run_button.isEnabled(), 300)
    assert panel.chip.text() == "PASS", panel.summary.text()
    fwd = panel.shown["forward_verdict"]
    t = panel.report.get("timing") or {}
    return {"latency": fwd["shown"] - fwd["engine"], "forward": fwd["shown"] - t0,
            "receipt": panel.shown["report"]["shown"] - t0, "engine_forward": t.get("forward_verdict_s"),
            "mutation": panel.stage("mutation score")[0]}

once(0)                                     # warm: the worker, the reference host, the corpus
runs = [once(k) for k in range(1, 1 + int(sys.argv[1]))]
print("RESULT " + json.dumps({"runs": runs, "peer": peer[2:]}), flush=True)
for v in list(win.views):
    win.close_view(v, discard=True)
win.shutdown()
"""


def measure(repeats: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="scellis-verdict-") as home:
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "SCELLIS_HOME": home}
        p = subprocess.run([sys.executable, "-c", _CHILD, str(repeats)], capture_output=True, text=True, env=env,
                           timeout=600)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"the window benchmark reported nothing: {p.stderr[-3000:]}")


def rows(engine, quick: bool, margin: float) -> list[dict]:
    import statistics
    got = measure(1 if quick else 3)
    runs, peer = got["runs"], min(got["peer"])
    out = []
    for key, figure, target in (("latency", "window: forward verdict shown after the engine knew it (story op)",
                                 LATENCY_S),
                                ("forward", "window: Ctrl+Enter -> forward verdict shown (story op)", FORWARD_S),
                                ("receipt", "window: Ctrl+Enter -> receipt and mutation score shown (story op)",
                                 RECEIPT_S)):
        best = min(runs, key=lambda r: r[key])
        out.append(row(figure, "bare PySide6 window: a worker thread's value shown in a label", best[key], peer,
                       engine.adapter, limit=round(BASELINE * margin, 3), target_s=target,
                       median_s=round(statistics.median(r[key] for r in runs), 4),
                       engine_forward_s=best["engine_forward"], mutation=best["mutation"], repeats=len(runs),
                       **({"window_adds_s": round(best["forward"] - best["engine_forward"], 4)}
                          if key == "forward" and best["engine_forward"] is not None else {})))
    return out
