#!/usr/bin/env python
"""Write the Studio's screenshots to docs/screenshots/ (the README's and docs/tutorial.md's), each
in the light theme (NAME.png) and the dark one (NAME-dark.png).

Follows docs/tutorial.md through the real window and the real device worker, in a clean user data
folder: the New op dialog, the story's op from its template and its cells, a WGSL error marked in
the kernel and listed in the problems panel, the first draft run before proof ("not proven"), its
conformance failure at n = w, the fix with its receipt, gradcheck, the proven run on a million
samples, Publish and its confirmation, and the tutorial's spike-removal workflow (its own TOML block,
with your median) after Run all. The whole window is shot at 1600 × 1000 and at 1024 × 700
(`studio-window`, `studio-window-1024`, `workflow`, `workflow-1024`).

Run it in a real X11 window (xcb), under Xvfb on a machine with no display:

    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python scripts/screenshots.py

(QT_QPA_PLATFORM defaults to xcb when a DISPLAY is set; offscreen works too, as a fallback.)
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TUTORIAL = REPO / "docs" / "tutorial.md"
GOOD = "if (i >= p.n - p.w + 1u) { return; }"
FIRST_DRAFT = "if (i >= p.n - p.w) { return; }"
BIG, SMALL = (1600, 1000), (1024, 700)
MAX_BYTES = 300_000


def tutorial_workflow() -> str:
    """The spike-removal workflow as the tutorial gives it (its median step is the reader's op)."""
    return re.findall(r"```toml\n(.*?)```", TUTORIAL.read_text(), re.S)[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    ap.add_argument("--n", type=int, default=1_000_000, help="samples of the spiky signal")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="scellis-tutorial-"))
    os.environ["SCELLIS_HOME"] = tempfile.mkdtemp(prefix="scellis-home-")   # a clean user data folder, not yours
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    if os.environ.get("DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "xcb")

    from studio.figures import qt_app
    app = qt_app()
    print(f"screenshots: Qt platform {app.platformName()}")
    import pyqtgraph as pg
    pg.setConfigOptions(antialias=True)
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtGui import QImage, QTextCursor
    from PySide6.QtWidgets import QApplication, QMessageBox

    from studio.app.notebook.new_op import NewOpDialog
    from studio.app.publish.dialogs import open_publish_dialog
    from studio.app.shell.window import MainWindow

    def pump(seconds: float = 0.05) -> None:
        loop = QEventLoop()
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        loop.exec()

    def wait(cond, timeout: float = 300.0, what: str = "the Studio") -> None:
        t0 = time.monotonic()
        while not cond():
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"screenshots: timed out waiting for {what}")
            pump(0.05)

    def save(image: QImage, path: Path) -> None:
        """A PNG; if the full-colour one is over MAX_BYTES, in 15 then 12 bits a pixel (no dithering:
        a flat UI compresses well in fewer colours; a 256-colour palette bands its gradients)."""
        image.save(str(path))
        for fewer in (QImage.Format.Format_RGB555, QImage.Format.Format_RGB444):
            if path.stat().st_size <= MAX_BYTES:
                break
            image.convertToFormat(fewer).convertToFormat(QImage.Format.Format_RGB888).save(str(path))
        rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        print(f"wrote {rel} ({image.width()}×{image.height()}, {path.stat().st_size // 1024} KB)")

    def shot(widget, name: str) -> None:
        """The widget in the light theme, then in the dark one (the same state, re-rendered)."""
        for theme, suffix in (("light", ""), ("dark", "-dark")):
            win.state.set_theme(theme)
            pump(0.3)
            save(widget.grab().toImage(), out / f"{name}{suffix}.png")
        win.state.set_theme("light")
        pump(0.1)

    def size(wh) -> None:
        win.resize(*wh)
        pump(0.4)

    def replace(editor, old: str, new: str) -> None:
        text = editor.toPlainText()
        at = text.index(old)
        c = editor.textCursor()
        c.setPosition(at)
        c.setPosition(at + len(old), QTextCursor.MoveMode.KeepAnchor)
        editor.setTextCursor(c)
        editor.insertPlainText(new)

    def checked(view) -> None:
        start = view.checker.checks_done
        view.checker.check_now()
        wait(lambda: view.checker.checks_done > start and not view.checker.timer.isActive(), what="the check")

    win = MainWindow(offer_recovery=False, restore_session=False)
    win.resize(*BIG)
    win.show()
    try:
        wait(lambda: win.profile is not None and len(win.catalog.cards) > 0, what="the GPU profile and catalog")
        size(BIG)
        shot(win, "welcome")

        # 1. File ▸ New op from template…: the dialog as the tutorial fills it
        dlg = NewOpDialog(win, folder=str(work))
        dlg.name.setText("windowed_median")
        dlg.author.setText("me")
        dlg.show()
        pump(0.5)
        wait(lambda: dlg.buttons.button(dlg.buttons.StandardButton.Ok).isEnabled(), what="the New op dialog")
        shot(dlg, "tutorial-new-op")
        options = dlg.options() if hasattr(dlg, "options") else {}
        dlg.close()
        view = win.new_op("windowed_median", work, "windowed_median", "me", **options)
        nb = view.notebook
        wait(lambda: win.catalog.cards.get("user/me/windowed_median@1") is not None, what="the catalog card")
        # 2. the forms, and a summary of your own
        nb.cell("op").summary.setText("Median of each odd window: removes single-sample spikes")
        checked(view)
        nb.show_cell("signature")
        pump(0.3)
        shot(win, "studio-window")
        shot(win.catalog, "catalog")
        for key in ("op", "signature", "bindings", "tolerance", "backward", "reference", "kernel"):
            shot(nb.cell(key), f"cell-{key}")

        # 3. a compile error, marked in the kernel and listed in the problems panel
        kernel = nb.cell("kernel").editor
        replace(kernel, "var win: array<f32, 31>;", "var win: array<f32, 31>")
        start = view.checker.checks_done
        wait(lambda: view.checker.checks_done > start and not view.checker.timer.isActive(), what="the check")
        nb.show_cell("kernel")
        errs = [p for p in view.problems if p.file == "forward.wgsl"]
        if errs:
            nb.jump(errs[0])
        pump(0.3)
        shot(nb.cell("kernel"), "kernel-compile-error")
        shot(win.problems_dock, "problems")
        replace(kernel, "var win: array<f32, 31>\n", "var win: array<f32, 31>;\n")

        # 4. the first draft, run before any proof: not proven
        replace(kernel, GOOD, FIRST_DRAFT)
        rp = view.run_panel
        rp.n.setValue(args.n)
        nb.show_cell("run")
        rp.run_button.click()
        wait(lambda: rp.run_button.isEnabled() and rp.chip.text() in ("done", "error"), what="the run")
        rp.plot.setXRange(0, 1500, padding=0)
        pump(0.3)
        shot(rp, "run-not-proven")

        # 5. the first draft fails at n = w; the mismatch with its bit patterns
        cp = view.conformance_panel
        nb.show_cell("conformance")
        cp.run_button.click()
        wait(lambda: cp.run_button.isEnabled(), what="conformance")
        shot(cp, "conformance-fail")

        # 6. the fix, saved; the pass with its receipt
        replace(kernel, FIRST_DRAFT, GOOD)
        win.save_current()
        cp.run_button.click()
        wait(lambda: cp.run_button.isEnabled(), what="conformance")
        shot(cp, "conformance-pass")

        # 7. gradcheck
        gp = view.gradcheck_panel
        nb.show_cell("gradcheck")
        gp.run_button.click()
        wait(lambda: gp.run_button.isEnabled(), what="gradcheck")
        shot(gp, "gradcheck")

        # the proven run on a million samples
        nb.show_cell("run")
        rp.run_button.click()
        wait(lambda: rp.run_button.isEnabled() and rp.chip.text() in ("done", "error"), what="the run")
        rp.plot.setXRange(0, 1500, padding=0)
        pump(0.3)
        shot(rp, "run")
        nb.show_cell("reference")
        nb.cell("reference").editor.setFocus()
        pump(0.1)
        win.cells.find_bar_open()
        win.find_bar.text.setText("median")
        shot(win, "studio-window-find")
        win.find_bar.close_bar()
        nb.manifest.set_expanded(True)
        shot(nb.manifest, "manifest-text")
        nb.manifest.set_expanded(False)
        nb.show_cell("run")
        pump(0.3)
        shot(win, "studio-window-run")

        # 8. Publish ▸ Publish…: workspace; the confirmation
        pub = open_publish_dialog(win)
        pub.visibility.setCurrentText("workspace")
        wait(lambda: not pub.checker.pending and pub.publish_button.isEnabled(), what="the Publish dialog's check")
        pump(0.3)
        shot(pub, "publish-dialog")
        pub.publish_button.click()
        wait(lambda: not pub.isVisible(), what="publishing")

        def confirmation():
            return next((w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox)
                         and w.objectName() == "published_confirmation" and w.isVisible()), None)
        wait(lambda: confirmation() is not None, what="the confirmation")
        pump(0.3)
        shot(confirmation(), "publish-confirmation")
        confirmation().close()

        # 9. the tutorial's spike-removal workflow, with your median, after Run all
        wf = work / "spike_removal.toml"
        wf.write_text(tutorial_workflow())
        wv = win.open_workflow(wf)
        wv.run()
        wait(lambda: wv.result is not None or not wv.job.active, timeout=900, what="the workflow")
        if wv.result is None:
            raise SystemExit(f"screenshots: the workflow failed: {wv.status.text()}")
        # the median's cell at the top, every step's plot zoomed to its first 2,000 samples (as a
        # user would drag it): the raw spikes, then none after the median
        from PySide6.QtWidgets import QScrollArea
        for c in wv.cells:
            c.plot.setXRange(0, 2000, padding=0.02)
        scroll = next(a for a in wv.findChildren(QScrollArea) if a.widget() is not None
                      and a.widget().isAncestorOf(wv.cell("median")))
        pump(0.5)
        scroll.verticalScrollBar().setValue(wv.cell("median").y())
        pump(0.5)
        shot(win, "workflow")
        size(SMALL)
        scroll.verticalScrollBar().setValue(wv.cell("median").y())
        pump(0.3)
        shot(win, "workflow-1024")

        # a small screen: 1024 × 700, the op's notebook (its verdict and receipt) beside the catalog
        win.tabs.setCurrentWidget(view)
        nb.show_cell("conformance")
        pump(0.4)
        shot(win, "studio-window-1024")
        size(BIG)
        # a shipped example opens as the user's own copy, and says so
        from studio.engine.resources import EXAMPLES
        win.open_path(EXAMPLES / "windowed_median_first_draft")
        pump(0.4)
        shot(win, "studio-window-copy")
    finally:
        for v in list(win.views):
            win.close_view(v, discard=True)
        win.shutdown()
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
