"""A killed Studio (kill -9: no closeEvent) reopens its tabs and keeps its Recent list:
the open tabs are written as they change, not only at a clean exit."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from test_app_shell import dispose, make_window

REPO = Path(__file__).resolve().parents[2]

KILLED = r'''
import os, signal, sys
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv)
from studio.app.shell.window import MainWindow
win = MainWindow(offer_recovery=False, restore_session=False)
win.show()
win.open_path(sys.argv[1])
win.open_story()
for _ in range(20):
    app.processEvents()
win.background.wait(10)                       # (the Recent list is written in the background)
print("OPENED", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
'''


@pytest.mark.slow
def test_tabs_and_recent_survive_kill_9(qtbot, pkg_copy, _isolated_home):
    pkg = pkg_copy(name="mine")
    env = {**os.environ, "XDG_RUNTIME_DIR": "/tmp", "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", KILLED, str(pkg)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == -signal.SIGKILL and "OPENED" in out.stdout, out.stderr[-3000:]
    win = make_window(qtbot)                                   # restores the last session
    try:
        qtbot.waitUntil(lambda: not win.state.restoring, timeout=30_000)      # the tabs fill in behind placeholders
        paths = [v.doc.path.resolve() for v in win.views]
        assert pkg.resolve() in paths and len(paths) == 2, paths
        from studio.app.shell.paths import recent_packages
        from studio.app.notebook.shipped import original_of
        recent = [p.resolve() for p in recent_packages()]
        assert pkg.resolve() in recent
        assert any(original_of(p) is not None for p in recent)  # the story's op (the user's copy of it)
    finally:
        dispose(win)
