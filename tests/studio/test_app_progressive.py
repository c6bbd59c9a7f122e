"""The progressive verdict in the window, through the real window and worker: Ctrl+Enter in the
Conformance cell clears the last result at once (the first draft's FAIL details do not stay under
"running"); the first failure, then the forward PASS after the fix, show the moment the engine
tells them, while the mutation score and the receipt are still marked pending; the report fills
every stage in. And the engine's side of it: ``progressive.Stream`` tells the forward verdict when
the corpus is judged and the backward verdict when it is known."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QObject, Qt, Slot

from studio.app.panels.conformance import RUNNING
from studio.engine.proof import progressive

from test_app_shell import dispose, give_focus, make_window, wait_checked
from test_app_story import FIRST_DRAFT, GOOD_GUARD, type_replace


class Seen(QObject):
    """What the panel shows at each moment of a run: when it started, and right after each of the
    worker's notes has been handled (connected after the panel, so the panel's slot ran first)."""

    def __init__(self, panel, controller):
        super().__init__()
        self.panel, self.at = panel, []
        controller.started.connect(self.started)

    def snapshot(self, kind: str) -> dict:
        p = self.panel
        return {"kind": kind, "chip": p.chip.text(), "summary": p.summary.text(), "report": p.report,
                "mismatch_hidden": p.mismatch_box.isHidden(), "table_hidden": p.table.isHidden(),
                "receipt_hidden": p.receipt_box.isHidden(), "forward": p.stage("forward"),
                "mutation": p.stage("mutation score"), "receipt": p.stage("receipt")}

    @Slot(object)
    def started(self, job) -> None:
        self.at.append(self.snapshot("started"))
        job.note.connect(self.note)

    @Slot(object)
    def note(self, event) -> None:
        self.at.append(self.snapshot(event.get("kind")))

    def first(self, kind: str) -> dict:
        return next(s for s in self.at if s["kind"] == kind)


def ctrl_enter_in_conformance(qtbot, win, view) -> None:
    panel = view.conformance_panel
    view.notebook.show_cell("conformance")
    give_focus(qtbot, win, panel.seed)
    qtbot.keyClick(panel.seed, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert view.conformance.job is not None and not panel.run_button.isEnabled()


@pytest.mark.slow
def test_ctrl_enter_clears_the_old_result_and_shows_each_verdict_as_it_lands(qtbot, tmp_path):
    win = make_window(qtbot, restore_session=False)
    try:
        view = win.new_op("windowed_median", tmp_path, "windowed_median", "me")
        wait_checked(qtbot, view)
        panel = view.conformance_panel
        seen = Seen(panel, view.conformance)
        # the first draft: FAIL, its first mismatch and failing cases on screen
        type_replace(view.notebook.cell("kernel").editor, GOOD_GUARD, FIRST_DRAFT)
        ctrl_enter_in_conformance(qtbot, win, view)
        qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=50_000)
        assert panel.chip.text() == "FAIL", panel.summary.text()
        assert not panel.mismatch_box.isHidden() and not panel.table.isHidden()
        fail = seen.first("first_failure")            # told before the report, the rest still running
        assert fail["chip"] == "FAIL…" and fail["report"] is None and fail["forward"] == ("FAIL", "error")
        assert fail["receipt"] == ("pending", "busy")
        assert panel.stage("receipt")[0].startswith("none") and panel.stage("forward")[1] == "error"

        # the fix, and Ctrl+Enter again: the FAIL details go at once
        type_replace(view.notebook.cell("kernel").editor, FIRST_DRAFT, GOOD_GUARD)
        seen.at.clear()
        ctrl_enter_in_conformance(qtbot, win, view)
        start = seen.first("started")
        assert start["mismatch_hidden"] and start["table_hidden"] and start["receipt_hidden"], start
        assert start["summary"] == RUNNING and start["chip"] == "running" and start["report"] is None
        qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=50_000)
        assert panel.chip.text() == "PASS", panel.summary.text()
        fwd = seen.first("forward_verdict")           # the forward PASS, before the mutants and the receipt
        assert fwd["chip"] == "forward PASS" and fwd["report"] is None, fwd
        assert fwd["forward"][1] == "ok" and fwd["mutation"] == ("pending", "busy") and fwd["receipt"] == ("pending", "busy")
        assert fwd["summary"] != RUNNING and "PASS" in fwd["summary"]      # "running the corpus…" does not linger
        assert panel.shown["forward_verdict"]["engine"] is not None
        # the report: every stage in
        assert panel.stage("receipt") == ("issued", "ok") and panel.receipt_chip.text() == "receipt ✔"
        assert "killed" in panel.stage("mutation score")[0] and panel.stage("backward")[1] == "ok"
        assert panel.mismatch_box.isHidden() and panel.table.isHidden()
        # gradcheck: the Gradcheck cell's verdict on this content, once it has one
        assert panel.stage("gradcheck") == ("not run on this content (F6)", "idle")
        gp = view.gradcheck_panel
        qtbot.mouseClick(gp.run_button, Qt.MouseButton.LeftButton)
        assert panel.stage("gradcheck") == ("running", "busy")
        qtbot.waitUntil(lambda: gp.run_button.isEnabled(), timeout=50_000)
        assert gp.chip.text() == "PASS" and panel.stage("gradcheck") == ("PASS", "ok"), gp.verdict.text()
    finally:
        dispose(win)


class _Case:
    def __init__(self, i):
        self.index, self.inputs, self.params = i, {}, {}


class _Failure:
    def describe(self):
        return "case 3: the story's failure"


class _Backward:
    ok = False


def test_the_stream_tells_each_verdict_once_when_it_is_known():
    notes, beats = [], []
    stream = progressive.Stream(notes.append, lambda d, t: beats.append((d, t)))
    with stream:
        stream.progress(16, 64)
        assert notes == [] and beats == [(16, 64)]          # the corpus is not judged yet
        stream.on_failure(_Failure())
        stream.progress(64, 64)
        ctx = type("Ctx", (), {"references": type("R", (), {"results": _Cache()})()})()
        progressive.remembered(ctx, ("k",), _Backward, timing=progressive.Timing(), phase="backward")
        stream.progress(64, 64)                              # told once
    progressive.remembered(ctx, ("j",), _Backward, timing=progressive.Timing(), phase="backward")  # no listener now
    assert [n["kind"] for n in notes] == ["first_failure", "forward_verdict", "backward_verdict"]
    assert notes[1]["verdict"] == "fail" and notes[1]["cases"] == 64 and notes[2]["verdict"] == "fail"
    assert all(isinstance(n["at"], float) for n in notes)


class _Cache:
    def __init__(self):
        self.d = {}

    def recall(self, key):
        return self.d.get(key)

    def remember(self, key, value):
        self.d[key] = value
