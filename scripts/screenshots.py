#!/usr/bin/env python
"""Write a PNG screenshot of each Studio panel to docs/screenshots/ (used by the README), in the
light theme (NAME.png) and the dark one (NAME-dark.png).

Drives the user's story through the real GUI and the real device worker: a new op from the
template, the first-draft guard failing conformance at n = w, a compile error in the problems
panel, the fix with its receipt, gradcheck, and a run on a million-sample spiky signal; then the
window at 1024 × 700 with the Learner open, and a shipped example opened as the user's copy.

    .venv/bin/python scripts/screenshots.py            # offscreen (no display needed)
    xvfb-run -a .venv/bin/python scripts/screenshots.py  # on a real X server
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
GOOD = "if (i >= p.n - p.w + 1u) { return; }"
FIRST_DRAFT = "if (i >= p.n - p.w) { return; }"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    ap.add_argument("--n", type=int, default=1_000_000, help="samples of the spiky signal")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="scellis-shots-"))
    os.environ["SCELLIS_HOME"] = tempfile.mkdtemp(prefix="scellis-home-")   # a clean user data folder, not yours
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

    from studio.figures import qt_app
    app = qt_app()
    import pyqtgraph as pg
    pg.setConfigOptions(antialias=True)
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtGui import QTextCursor

    from studio.app.window import MainWindow

    def pump(seconds: float = 0.05) -> None:
        loop = QEventLoop()
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        loop.exec()

    def wait(cond, timeout: float = 120.0) -> None:
        t0 = time.monotonic()
        while not cond():
            if time.monotonic() - t0 > timeout:
                raise SystemExit("screenshots: timed out waiting for the Studio")
            pump(0.05)

    def shot(widget, name: str) -> None:
        """The widget in the light theme, then in the dark one (the same state, re-rendered)."""
        for theme, suffix in (("light", ""), ("dark", "-dark")):
            win.set_theme(theme)
            pump(0.25)
            path = out / f"{name}{suffix}.png"
            widget.grab().save(str(path))
            print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
        win.set_theme("light")

    def replace(editor, old: str, new: str) -> None:
        text = editor.toPlainText()
        at = text.index(old)
        c = editor.textCursor()
        c.setPosition(at)
        c.setPosition(at + len(old), QTextCursor.MoveMode.KeepAnchor)
        editor.setTextCursor(c)
        editor.insertPlainText(new)

    win = MainWindow(offer_recovery=False, restore_session=False)
    win.resize(1500, 980)
    win.show()
    try:
        wait(lambda: win.profile is not None and len(win.catalog.cards) > 0)
        shot(win, "welcome")
        view = win.new_op("windowed_median", work, "windowed_median", "me")
        nb = view.notebook
        wait(lambda: win.profile is not None and len(win.catalog.cards) > 0)
        wait(lambda: win.catalog.cards.get("user/me/windowed_median@1") is not None)
        nb.show_cell("signature")
        shot(win, "studio-window")
        shot(win.catalog, "catalog")
        for key in ("op", "signature", "bindings", "tolerance", "backward", "reference", "kernel"):
            shot(nb.cell(key), f"cell-{key}")

        # a compile error, marked in the kernel and listed in the problems panel
        kernel = nb.cell("kernel").editor
        replace(kernel, "var win: array<f32, 31>;", "var win: array<f32, 31>")
        start = view.checker.checks_done
        wait(lambda: view.checker.checks_done > start and not view.checker.timer.isActive())
        nb.show_cell("kernel")
        errs = [p for p in view.problems if p.file == "forward.wgsl"]
        if errs:
            nb.jump(errs[0])
        shot(nb.cell("kernel"), "kernel-compile-error")
        shot(win.problems_dock, "problems")
        replace(kernel, "var win: array<f32, 31>\n", "var win: array<f32, 31>;\n")

        # the first draft fails at n = w; the mismatch with its bit patterns
        replace(kernel, GOOD, FIRST_DRAFT)
        cp = view.conformance_panel
        cp.run_button.click()
        wait(lambda: cp.run_button.isEnabled())
        nb.show_cell("conformance")
        shot(cp, "conformance-fail")

        # the fix, saved; the pass with its receipt
        replace(kernel, FIRST_DRAFT, GOOD)
        win.save_current()
        cp.run_button.click()
        wait(lambda: cp.run_button.isEnabled())
        shot(cp, "conformance-pass")

        gp = view.gradcheck_panel
        gp.run_button.click()
        wait(lambda: gp.run_button.isEnabled())
        shot(gp, "gradcheck")

        rp = view.run_panel
        rp.n.setValue(args.n)
        rp.run_button.click()
        wait(lambda: rp.chip.text() in ("done", "error"))
        rp.plot.setXRange(0, 1500, padding=0)
        shot(rp, "run")
        nb.show_cell("reference")
        nb.cell("reference").editor.setFocus()
        pump(0.1)
        win.find_bar_open()
        win.find_bar.text.setText("median")
        shot(win, "studio-window-find")
        win.find_bar.close_bar()
        nb.manifest.set_expanded(True)
        shot(nb.manifest, "manifest-text")
        nb.show_cell("run")
        shot(win, "studio-window-run")

        # a small screen: 1024 × 700 with the Learner open beside the notebook (it scrolls in its dock)
        win.resize(1024, 700)
        win.learner_dock.show()
        pump(0.3)
        shot(win, "studio-window-1024")
        win.learner_dock.hide()
        win.resize(1500, 980)
        # a shipped example opens as the user's own copy, and says so
        from studio.engine.resources import EXAMPLES
        win.open_path(EXAMPLES / "windowed_median_first_draft")
        pump(0.3)
        shot(win, "studio-window-copy")
    finally:
        for v in list(win.views):
            win.close_view(v, discard=True)
        win.shutdown()
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
