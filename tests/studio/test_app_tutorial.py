"""docs/tutorial.md, followed step by step through the real window (pytest-qt, offscreen, the real
device worker on lavapipe, a fresh user data folder): a new op from the template through File ▸ New
op from template…, the forms, a WGSL error marked inline, the first draft run before proof ("not
proven"), Conformance by Ctrl+Enter failing at n = w, the fix earning a receipt, Gradcheck, Publish
with its confirmation, and the op in the spike-removal workflow (File ▸ Open workflow…, Run all) with
its plot. This is the Studio's story test: what the story test of old checked is checked here.

The tutorial cannot drift from the product: the test reads it. Every step's section is performed by
the function of its number, and

- every "quoted" text of a step is on screen during that step (labels, buttons, chips, fields,
  tables, plot titles and legends, dialogs, message boxes, the status bar);
- every **bold** text is a control the reader can press at that step — a menu path (`File ▸ …`),
  found in the menu bar, or a button, check box or cell name on screen;
- every shortcut it names (Ctrl+…, F5…) is bound to a menu item;
- the code it asks the reader to type (the first draft's guard, the fix, the workflow file) is
  what the test types;
- every screenshot it shows exists in docs/screenshots/.

The steps are split across four tests, each starting where the one before left off, set up the
short way (the template's op, the first draft typed in, a conformance run), so no test runs past a
minute."""
from __future__ import annotations

import html
import json
import os
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeySequence, QTextCursor
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QGroupBox,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QTabBar,
    QTableWidget,
    QTextEdit,
    QTreeWidget,
    QWidget,
)

from studio.app.notebook.freshness import STALE_NOTE
from studio.app.notebook.new_op import NewOpDialog
from studio.app.publish import PublishDialog
from studio.app.widgets.style import colour
from studio.engine.contract.package import load_package
from studio.engine.proof.receipts import gradcheck_receipt_path, receipt_dir
from studio.engine.services.outline import story_workflow

from test_app_shell import dispose, give_focus, make_window, wait_checked
from test_app_story import type_replace

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "tutorial.md"
OP_ID = "user/me/windowed_median@1"


# ----------------------------------------------------------------------------- reading the tutorial
def sections(text: str) -> dict[int, str]:
    """The numbered steps: "## N. Title" up to the next heading of that level."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"## (\d+)\. ", line)
        if m:
            cur = int(m[1])
            out[cur] = line + "\n"
        elif line.startswith("## "):
            cur = None
        elif cur is not None:
            out[cur] += line + "\n"
    return out


def code_blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def prose(section: str) -> str:
    """A section without its code blocks, inline code and image links."""
    s = re.sub(r"```.*?```", " ", section, flags=re.S)
    s = re.sub(r"`[^`]*`", " ", s)
    return re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", s)


def quotes(section: str) -> list[str]:
    """ "quoted" text: what the reader will see on screen."""
    return [norm(q) for q in re.findall(r'"([^"]+)"', prose(section))]


def bolds(section: str) -> list[str]:
    """**bold** text: a control to press (a menu path, a button, a check box, a cell)."""
    return [norm(b) for b in re.findall(r"\*\*([^*]+)\*\*", prose(section))]


def keys(section: str) -> list[str]:
    return re.findall(r"\b(Ctrl\+(?:Shift\+)?(?:Enter|[A-Z0-9])|F\d{1,2})\b", prose(section))


def norm(s: str) -> str:
    return " ".join(s.split())


def test_the_tutorial_reads_as_numbered_steps_with_checks():
    """The checks below have something to check: each step quotes the screen and names what to press."""
    text = TUTORIAL.read_text()
    steps = sections(text)
    assert sorted(steps) == list(range(1, len(STEPS) + 1)) == sorted(STEPS), sorted(steps)
    for n, body in steps.items():
        assert quotes(body) or bolds(body), f"step {n} quotes nothing the test could check"
    for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (TUTORIAL.parent / img).is_file(), f"docs/tutorial.md shows {img}, which does not exist"
    assert len(re.findall(r"!\[", text)) >= len(steps)          # a screenshot at each step, at least
    assert "../shared" not in text and not re.search(r"\bissue \d", text)
    # the readers' parsers, against a known text (the control)
    sample = '## 1. A\nPress **Run ▸ Run cell** (Ctrl+Enter); it says "ok" `"not this"`.\n```wgsl\nx\n```\n## B\n'
    s = sections(sample)
    assert list(s) == [1] and quotes(s[1]) == ["ok"] and bolds(s[1]) == ["Run ▸ Run cell"]
    assert keys(s[1]) == ["Ctrl+Enter"] and code_blocks(s[1], "wgsl") == ["x\n"]


# ----------------------------------------------------------------------------- what is on screen
def plain(text: str) -> str:
    if "<" in text and ">" in text:
        text = re.sub(r"<br\s*/?>", "\n", text)
        text = re.sub(r"<[^>]+>", "", text)
    return html.unescape(text)


def screen_text() -> str:
    """Every text on screen now, in every visible window, dialog and message box."""
    parts: list[str] = []
    for top in QApplication.topLevelWidgets():
        if not top.isVisible():
            continue
        parts.append(top.windowTitle())
        for w in [top, *top.findChildren(QWidget)]:
            if not w.isVisible():
                continue
            if isinstance(w, QMessageBox):
                parts += [w.text(), w.informativeText()]
            elif isinstance(w, QLabel):
                parts.append(plain(w.text()))
            elif isinstance(w, QAbstractButton):
                parts.append(w.text().replace("&", ""))
            elif isinstance(w, QLineEdit):
                parts.append(w.text())
            elif isinstance(w, (QPlainTextEdit, QTextEdit)):
                parts.append(w.toPlainText())
            elif isinstance(w, QComboBox):
                parts.append(w.currentText())
            elif isinstance(w, QGroupBox):
                parts.append(w.title())
            elif isinstance(w, QDockWidget):
                parts.append(w.windowTitle())
            elif isinstance(w, QTabBar):
                parts += [w.tabText(i) for i in range(w.count())]
            elif isinstance(w, QTableWidget):
                parts += [w.horizontalHeaderItem(c).text() for c in range(w.columnCount()) if w.horizontalHeaderItem(c)]
                parts += [w.item(r, c).text() for r in range(w.rowCount()) for c in range(w.columnCount())
                          if w.item(r, c)]
            elif isinstance(w, QTreeWidget):
                stack = [w.topLevelItem(i) for i in range(w.topLevelItemCount())]
                while stack:
                    it = stack.pop()
                    parts.append(it.text(0))
                    stack += [it.child(i) for i in range(it.childCount())]
            elif isinstance(w, pg.PlotWidget):
                item = w.getPlotItem()
                parts.append(plain(item.titleLabel.text))
                if item.legend is not None:
                    parts += [label.text for _sample, label in item.legend.items]
                parts += [plain(item.getAxis(a).labelText) for a in ("left", "bottom")]
        if hasattr(top, "statusBar"):
            parts.append(top.statusBar().currentMessage())
    return norm("\n".join(p for p in parts if p))


def menu_paths(win) -> set[str]:
    out = set()

    def walk(menu, prefix):
        for a in menu.actions():
            if a.isSeparator():
                continue
            name = a.text().replace("&", "")
            if a.menu() is not None:
                walk(a.menu(), f"{prefix}{name} ▸ ")
            else:
                out.add(f"{prefix}{name}")
    for a in win.menuBar().actions():
        if a.menu() is not None:
            walk(a.menu(), a.text().replace("&", "") + " ▸ ")
    return out


def bound_keys(win) -> set[str]:
    return {s.toString(QKeySequence.SequenceFormat.PortableText) for a in win.findChildren(type(win.menus["file.new"]))
            for s in a.shortcuts()}


class Follow:
    """Performs the tutorial's steps and checks each against its section."""

    def __init__(self, qtbot, win, folder: Path):
        self.qtbot, self.win, self.folder = qtbot, win, folder
        self.steps = sections(TUTORIAL.read_text())
        self.seen: dict[int, list[str]] = {}
        self.view = None

    def look(self, n: int) -> None:
        """What is on screen now counts for step ``n``."""
        self.seen.setdefault(n, []).append(screen_text())
        if os.environ.get("SCELLIS_TUTORIAL_DUMP"):            # (for writing the tutorial: what was seen)
            with open(os.environ["SCELLIS_TUTORIAL_DUMP"], "a") as out:
                out.write(f"\n===== step {n}\n{self.seen[n][-1]}\n")

    def check(self, n: int) -> None:
        body = self.steps[n]
        seen = "\n".join(self.seen.get(n, [])) + "\n" + screen_text()
        missing = [q for q in quotes(body) if q not in seen]
        assert not missing, f"docs/tutorial.md step {n} quotes text the Studio did not show: {missing}"
        paths = menu_paths(self.win)
        for b in bolds(body):
            if "▸" in b:
                assert b in paths, f"step {n}: no menu item {b!r} (menus: {sorted(paths)})"
            else:
                assert b in seen, f"step {n}: nothing called {b!r} on screen"
        have = bound_keys(self.win)
        for k in keys(body):
            assert k in have, f"step {n}: {k} is not bound to any menu item ({sorted(have)})"

    def code(self, n: int, lang: str) -> list[str]:
        blocks = code_blocks(self.steps[n], lang)
        assert blocks, f"docs/tutorial.md step {n} has no {lang} block"
        return blocks


def guard(block: str) -> str:
    """The guard line of a kernel excerpt."""
    return next(ln.strip() for ln in block.splitlines() if ln.strip().startswith("if (i >="))


def ctrl_enter(f: Follow, cell: str, focus) -> None:
    """Ctrl+Enter with the keyboard focus in a cell: the window runs that cell."""
    f.view.notebook.show_cell(cell)
    give_focus(f.qtbot, f.win, focus)
    f.qtbot.keyClick(focus, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


# ----------------------------------------------------------------------------- the steps
def step_1(f: Follow) -> None:
    """File ▸ New op from template…: the story's template, name, author, folder; OK."""
    qtbot, win = f.qtbot, f.win

    def fill():
        dlg = next((w for w in QApplication.topLevelWidgets() if isinstance(w, NewOpDialog) and w.isVisible()), None)
        if dlg is None:
            QTimer.singleShot(20, fill)
            return
        assert dlg.template.currentData() == "windowed_median"          # the story's template is the default
        inline = re.findall(r"`([^`]+)`", f.steps[1])
        assert "windowed_median" in inline and "me" in inline and OP_ID in inline
        dlg.name.setText("windowed_median")
        dlg.author.setText("me")
        dlg.folder.setText(str(f.folder))
        qtbot.waitUntil(lambda: dlg.buttons.button(dlg.buttons.StandardButton.Ok).isEnabled(), timeout=10_000)
        f.look(1)
        qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Ok), Qt.MouseButton.LeftButton)
    QTimer.singleShot(0, fill)
    win.menus["file.new"].trigger()
    view = f.view = win.current()
    assert view is not None and view.doc.field("id") == OP_ID
    assert (f.folder / "windowed_median" / "op.toml").is_file()
    wait_checked(qtbot, view)
    assert view.problems == [], view.problems
    f.look(1)


def step_2(f: Follow) -> None:
    """The contract's forms: signature, bindings, tolerance & category — and a summary typed in."""
    nb = f.view.notebook
    sig, tol, bnd = nb.cell("signature"), nb.cell("tolerance"), nb.cell("bindings")
    inline = re.findall(r"`([^`]+)`", f.steps[2])
    assert next(c for c in inline if c.startswith("windowed_median(")) == sig.text.text()   # as the tutorial shows it
    assert tol.kind.currentText() == "exact" and tol.category.currentText() == "selection"
    assert "compares and selects" in tol.justification.toPlainText()         # why no rounding happens
    assert "y : storage read_write f32[n - w + 1]" in " ".join(bnd.editor.toPlainText().split())
    summary = nb.cell("op").summary
    summary.setFocus()
    summary.selectAll()
    typed = next(c for c in inline if c.startswith("Median of"))             # what the tutorial asks to type
    f.qtbot.keyClicks(summary, typed)
    f.qtbot.waitUntil(lambda: f.view.doc.field("summary") == typed, timeout=5_000)
    wait_checked(f.qtbot, f.view)
    assert f.view.problems == [], f.view.problems
    assert bnd.isVisible()
    nb.show_cell("signature")
    f.look(2)


def step_3(f: Follow) -> None:
    """A WGSL error, marked inline and in the Problems panel within a second; a click goes there."""
    qtbot, view = f.qtbot, f.view
    kernel = view.notebook.cell("kernel").editor
    broken, = f.code(3, "wgsl")
    good = "var win: array<f32, 31>;"
    assert broken.strip() == good.rstrip(";")
    view.notebook.show_cell("kernel")
    type_replace(kernel, good, broken.strip())
    wait_checked(qtbot, view)
    errs = [p for p in view.problems if p.file == "forward.wgsl"]
    assert errs and errs[0].line is not None, view.problems
    p = errs[0]
    assert kernel.markers and kernel.markers[0].line == p.line
    panel = f.win.problems
    qtbot.waitUntil(lambda: panel.row_of(p) is not None, timeout=5_000)
    kernel.moveCursor(QTextCursor.MoveOperation.Start)
    panel.itemClicked.emit(panel.row_of(p), 0)
    assert kernel.cursor_line_col() == (p.line, p.col)
    f.look(3)
    type_replace(kernel, broken.strip() + "\n", good + "\n")
    wait_checked(qtbot, view)
    assert [p for p in view.problems if p.file == "forward.wgsl"] == []


def step_4(f: Follow) -> None:
    """The first draft's guard typed in; the Run cell runs it before any proof: "not proven"."""
    qtbot, view = f.qtbot, f.view
    draft = guard(f.code(4, "wgsl")[0])
    good = guard(f.code(6, "wgsl")[0])
    kernel = view.notebook.cell("kernel").editor
    type_replace(kernel, good, draft)
    assert draft in view.doc.text("forward.wgsl") and view.doc.dirty
    rp = view.run_panel
    assert rp.n.value() == 1_000_000 and rp.param_spins["w"].value() == 7
    view.notebook.show_cell("run")
    f.win.menus["run.device"].trigger()                                          # Run ▸ Run on device (F7)
    qtbot.waitUntil(lambda: rp.run_button.isEnabled() and rp.chip.text() in ("done", "error"), timeout=50_000)
    assert rp.chip.text() == "done", rp.info.text()
    x, y = rp.data["input"], rp.data["output"]
    assert x.size == 1_000_000 and y.size == 1_000_000 - 7 + 1
    assert np.abs(np.diff(y[:-1])).max() < np.abs(np.diff(x)).max()       # the spikes are gone …
    assert rp.proven is False and rp.chip.kind == "warn"                  # … but nothing vouches for it yet
    curves = rp.plot.getPlotItem().listDataItems()
    assert len(curves) == 2 and all(c.opts["autoDownsample"] and c.opts["clipToView"] for c in curves)
    f.look(4)
    # (beyond the tutorial) the plot and the data exported; the same op on a signal from a .csv file
    tmp = f.folder
    for name in ("run.png", "run.svg"):
        view.runner.export_plot(str(tmp / name))
        assert (tmp / name).stat().st_size > 1000
    view.runner.export_data(str(tmp / "y.npy")).result(10)
    view.runner.export_data(str(tmp / "y.csv")).result(30)
    assert np.array_equal(np.load(tmp / "y.npy"), y)
    assert (tmp / "y.csv").read_text().splitlines()[0].startswith("sample [index],input,")   # every series
    assert np.loadtxt(tmp / "y.csv", delimiter=",", skiprows=1, usecols=(0, 1)).shape == (x.size, 2)
    np.savetxt(tmp / "signal.csv", x[:5000], delimiter=",")
    rp.source.setCurrentIndex(1)
    rp.file.setText(str(tmp / "signal.csv"))
    qtbot.mouseClick(rp.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: rp.chip.text() in ("done", "error") and rp.data["input"].size == 5000, timeout=50_000)
    assert rp.chip.text() == "done" and rp.data["output"].size == 5000 - 6
    assert np.array_equal(rp.data["output"][:-1], y[:5000 - 7])       # (the first draft never writes the last)
    rp.source.setCurrentIndex(0)


def step_5(f: Follow) -> None:
    """Ctrl+Enter in the Conformance cell: FAIL at n = w, the first mismatch never written."""
    qtbot, view = f.qtbot, f.view
    panel = view.conformance_panel
    ctrl_enter(f, "conformance", panel.seed)
    assert view.conformance.job is not None
    qtbot.waitUntil(lambda: panel.run_button.isEnabled() and panel.chip.text() in ("PASS", "FAIL", "error"),
                    timeout=50_000)
    assert panel.chip.text() == "FAIL", panel.summary.text()
    rep = panel.report
    minimum = [c for c in rep["failures"] if c["shape_kind"] == "minimum"]
    assert minimum and all(c["dims"]["n"] == c["params"]["w"] for c in minimum)
    assert any(c["dims"]["n"] == 7 and c["params"]["w"] == 7 for c in rep["failures"])
    assert panel.mismatch_box.isVisible() and "n = w" in panel.mm_case.text()
    assert "0x7fbadbad" in panel.mm_got.text() and "bits 0x" in panel.mm_expected.text()
    assert panel.table.rowCount() == min(rep["failed"], 50)
    assert panel.receipt_chip.text() == "no receipt"
    assert not list(receipt_dir(load_package(f.folder / "windowed_median")).glob("*.json"))
    f.look(5)


def step_6(f: Follow) -> None:
    """The fix typed in and saved (Ctrl+S); Ctrl+Enter again: PASS, and the receipt."""
    qtbot, view, win = f.qtbot, f.view, f.win
    pkg_dir = f.folder / "windowed_median"
    good = guard(f.code(6, "wgsl")[0])
    draft = guard(f.code(4, "wgsl")[0])
    kernel = view.notebook.cell("kernel").editor
    type_replace(kernel, draft, good)
    win.menus["file.save"].trigger()                                           # File ▸ Save (Ctrl+S)
    assert not view.doc.dirty and good in (pkg_dir / "forward.wgsl").read_text()
    panel = view.conformance_panel
    ctrl_enter(f, "conformance", panel.seed)
    qtbot.waitUntil(lambda: panel.run_button.isEnabled() and panel.chip.text() in ("PASS", "FAIL", "error"),
                    timeout=50_000)
    assert panel.chip.text() == "PASS", panel.summary.text()
    assert "killed by the corpus" in panel.summary.text()          # the mutation score, as the engine words it
    assert panel.receipt_chip.text() == "receipt ✔"
    receipts = list(receipt_dir(load_package(pkg_dir)).glob("*.json"))
    assert len(receipts) == 1
    receipt = json.loads(receipts[0].read_text())
    assert receipt["verdict"] == "pass" and receipt["op"] == OP_ID
    assert receipt["hashes"]["package"] == view.doc.content_hash()
    qtbot.waitUntil(lambda: OP_ID in win.catalog.cards and win.catalog.cards[OP_ID].receipt.text() == "receipt ✔",
                    timeout=30_000)
    card = win.catalog.cards[OP_ID]
    assert [c.text() for c in card.findChildren(type(card.receipt))][:3] == ["user", "exact", "selection"]
    # the Run cell no longer speaks of a missing receipt
    assert "has a valid conformance receipt" in view.run_panel.info.text()
    f.look(6)
    # (beyond the tutorial) the catalog opens ops by double-click; an open one is brought to the front
    item = next(g.child(i) for g in win.catalog.groups.values() for i in range(g.childCount())
                if win.catalog.tree.itemWidget(g.child(i), 0) is card)
    win.catalog.tree.itemDoubleClicked.emit(item, 0)
    assert win.current() is view and len(win.views) == 1


def step_7(f: Follow) -> None:
    """Gradcheck (F6): analytic against numeric, kinks skipped, the mutants rejected."""
    qtbot, view = f.qtbot, f.view
    gp = view.gradcheck_panel
    view.notebook.show_cell("gradcheck")
    f.win.menus["run.gradcheck"].trigger()
    qtbot.waitUntil(lambda: gp.run_button.isEnabled() and gp.chip.text() not in ("", "running"), timeout=50_000)
    assert gp.chip.text() == "PASS", gp.verdict.text()
    xs, ys = gp.scatter.getData()
    assert len(xs) > 0 and np.allclose(xs, ys, atol=1e-6)
    assert len(gp.skipped.getData()[0]) == gp.report["skipped"] > 0
    assert gp.skipped.opts["symbol"] == "o" and gp.skipped.opts["pen"].color().name() == colour("muted")
    fates = [m["fate"] for m in gp.report["negative_controls"]]
    assert "REJECTED" in fates and "passed" not in fates
    shown = [gp.mutants.item(r, 2).text() for r in range(gp.mutants.rowCount())]
    assert len(shown) == len(fates) and any(t.startswith("REJECTED") for t in shown)
    assert any("negative control" in ln for ln in gp.text.toPlainText().splitlines())
    assert gradcheck_receipt_path(load_package(f.folder / "windowed_median")).is_file()
    f.look(7)


def step_8(f: Follow) -> None:
    """Publish ▸ Publish…: workspace, the license; Publish; the confirmation."""
    qtbot, win, view = f.qtbot, f.win, f.view
    action = next(a for a in win.publish_menu.actions() if a.text() == "Publish…")
    action.trigger()
    dlg = next(w for w in QApplication.topLevelWidgets() if isinstance(w, PublishDialog) and w.isVisible())
    dlg.visibility.setCurrentText("workspace")
    assert dlg.license.text() == "Apache-2.0"
    qtbot.waitUntil(lambda: not dlg.checker.pending and dlg.publish_button.isEnabled(), timeout=10_000)
    f.look(8)
    before = view.doc.content_hash()
    with qtbot.waitSignal(dlg.accepted, timeout=50_000):
        qtbot.mouseClick(dlg.publish_button, Qt.MouseButton.LeftButton)
    box = next(w for w in QApplication.topLevelWidgets()
               if isinstance(w, QMessageBox) and w.objectName() == "published_confirmation" and w.isVisible())
    assert "Published" in box.text() and "workspace" in box.text() and "receipt is valid" in box.text(), box.text()
    assert "Published" in win.statusBar().currentMessage()
    assert 'visibility = "workspace"' in view.doc.text("op.toml") and not view.doc.dirty
    assert view.doc.content_hash() != before
    # publishing wrote a new op.toml (a new content hash) and earned the receipts again: nothing is stale
    qtbot.waitUntil(lambda: view.freshness.proven_hash("conformance") == view.doc.content_hash(), timeout=10_000)
    if view.gradcheck_panel.chip.text() == "PASS":
        qtbot.waitUntil(lambda: view.freshness.proven_hash("gradcheck") == view.doc.content_hash(), timeout=10_000)
    assert not view.freshness.stale("conformance") and not view.freshness.stale("gradcheck")
    panel = view.conformance_panel
    assert panel.chip.text() == "PASS" and STALE_NOTE not in panel.receipt_chip.text()
    f.look(8)
    box.close()


def step_9(f: Follow) -> None:
    """The op in the spike-removal workflow: the file saved beside it, File ▸ Open workflow…, Run all."""
    qtbot, win = f.qtbot, f.win
    block, = f.code(9, "toml")
    mine, shipped = tomllib.loads(block), tomllib.loads(story_workflow().read_text())
    assert mine["steps"]["median"]["op"] == "./windowed_median"
    mine["steps"]["median"]["op"] = shipped["steps"]["median"]["op"]
    assert mine == shipped, "the tutorial's workflow is the shipped spike removal with the median step's op changed"
    wf = f.folder / "spike_removal.toml"
    wf.write_text(block)

    def pick():
        dlg = next((w for w in QApplication.topLevelWidgets() if isinstance(w, QFileDialog) and w.isVisible()), None)
        if dlg is None:
            QTimer.singleShot(20, pick)
            return
        dlg.selectFile(str(wf))
        dlg.accept()
    QTimer.singleShot(0, pick)
    win.menus["file.open_workflow"].trigger()
    view = win.tabs.currentWidget()
    assert getattr(view, "path", None) == wf.resolve(), view
    assert [c.name for c in view.cells] == ["signal", "limit", "median", "smooth"]
    assert view.prove_box.isChecked() and not view.allow_box.isChecked()
    f.look(9)
    qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None or not view.job.active, timeout=55_000)
    assert view.result is not None, view.status.text()
    steps = {s["name"]: s for s in view.result.record["steps"]}
    assert steps["median"]["op"] == OP_ID and steps["median"]["ref"] == "./windowed_median"      # yours
    assert steps["median"]["package_hash"] == load_package(f.folder / "windowed_median").hash
    med = view.cell("median")
    assert med.badge["receipt"], med.badge
    assert all(c.badge["receipt"] for c in view.cells), [c.badge for c in view.cells]   # every op proven first
    _xs, ys = med.curve.getOriginalDataset()
    assert ys is not None and len(ys) == 1_000_000 - 6
    f.look(9)


STEPS = {1: step_1, 2: step_2, 3: step_3, 4: step_4, 5: step_5, 6: step_6, 7: step_7, 8: step_8, 9: step_9}


def follow(f: Follow, numbers) -> None:
    for n in numbers:
        STEPS[n](f)
        f.check(n)


def start_at_the_first_draft(f: Follow) -> None:
    """Where step 5 leaves the reader: the story's op with the first draft's guard, unsaved."""
    f.view = f.win.new_op("windowed_median", f.folder, "windowed_median", "me")
    draft = guard(f.code(4, "wgsl")[0])
    good = guard(f.code(6, "wgsl")[0])
    type_replace(f.view.notebook.cell("kernel").editor, good, draft)


# ----------------------------------------------------------------------------- the tests
@pytest.mark.slow
def test_tutorial_steps_1_to_5_template_forms_error_unproven_run_and_the_failure(qtbot, tmp_path):
    win = make_window(qtbot, restore_session=False)
    try:
        f = Follow(qtbot, win, tmp_path)
        follow(f, [1, 2, 3, 4, 5])
        # the control: a quote, a menu item, a button or a key the Studio does not have fails the check
        for wrong, says in (('"a message the Studio never shows"', "did not show"),
                            ("**Run ▸ Prove everything**", "no menu item"), ("**▶ Prove it**", "nothing called"),
                            ("(F12)", "not bound")):
            f.steps[99] = f"## 99. A step the Studio does not have\nThen {wrong}.\n"
            with pytest.raises(AssertionError, match=re.escape(says)):
                f.check(99)
    finally:
        dispose(win)


@pytest.mark.slow
def test_tutorial_steps_6_to_8_the_fix_earns_a_receipt_gradcheck_then_publish(qtbot, tmp_path):
    """Steps 6 and 7 earn both receipts, which step 8's publishing must keep fresh (one window, so
    the op is proven once)."""
    win = make_window(qtbot, restore_session=False)
    try:
        f = Follow(qtbot, win, tmp_path)
        start_at_the_first_draft(f)
        follow(f, [6, 7, 8])
        # an edit after publishing is stale as before
        panel = f.view.conformance_panel
        f.view.doc.set("field:summary", str(f.view.doc.field("summary")) + " (edited)")
        qtbot.waitUntil(lambda: f.view.freshness.stale("conformance"), timeout=3000)
        assert STALE_NOTE in panel.chip.text()
    finally:
        dispose(win)
        win.publish_workers.close()


@pytest.mark.slow
def test_tutorial_step_9_your_op_in_the_spike_removal_workflow(qtbot, tmp_path):
    """Starts from the fixed op without its receipts (this test's user folder is fresh, and proving
    it here is cheaper than publishing it again): Run all proves it first, with the builtins."""
    win = make_window(qtbot, restore_session=False)
    try:
        f = Follow(qtbot, win, tmp_path)
        f.view = win.new_op("windowed_median", f.folder, "windowed_median", "me")
        follow(f, [9])
    finally:
        dispose(win)
