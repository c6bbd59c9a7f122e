"""Never loses work: every dirty document — untitled included — is autosaved; after a crash the
next start offers to restore it; a declined restore is set aside, not deleted."""
from __future__ import annotations

import json
import multiprocessing as mp
import os

import pytest

from studio.app.shell.autosave import AutosaveStore
from studio.app.notebook.documents import read_folder
from studio.app.notebook.model import OpDocument
from studio.app.shell.paths import autosave_dir
from studio.app.shell.recovery import Recovery
from studio.app.shell.window import MainWindow
from studio.engine.resources import EXAMPLES

GUARD = "if (i >= p.n - p.w + 1u) { return; }"


def _dead_pid() -> int:
    p = mp.get_context("spawn").Process(target=os.getpid)
    p.start()
    p.join()
    return p.pid


def _crash(store_dir) -> None:
    """What a crash leaves behind: autosaves owned by a process that no longer runs."""
    pid = _dead_pid()
    for f in store_dir.glob("*.json"):
        d = json.loads(f.read_text())
        d["pid"], d["started"] = pid, "0"
        f.write_text(json.dumps(d))


@pytest.mark.slow
def test_autosave_and_recovery_after_a_crash(qtbot, tmp_path, monkeypatch):
    win = MainWindow(offer_recovery=False)
    qtbot.addWidget(win)
    try:
        view = win.new_op("windowed_median", tmp_path, "wm", "me")
        kernel = view.notebook.cell("kernel").editor
        kernel.selectAll()
        kernel.insertPlainText(view.doc.text("forward.wgsl").replace(GUARD, "if (i >= p.n - p.w) { return; }"))
        files, _ = read_folder(EXAMPLES / "windowed_median")
        untitled = win.add_document(OpDocument(files))                 # never saved anywhere
        assert untitled.doc.path is None and untitled.doc.dirty
        store = autosave_dir()
        qtbot.waitUntil(lambda: len(list(store.glob("*.json"))) == 2, timeout=10_000)
        win.background.wait()
        saved = {json.loads(f.read_text())["doc_id"]: json.loads(f.read_text()) for f in store.glob("*.json")}
        assert "i >= p.n - p.w)" in saved[view.doc.doc_id]["files"]["forward.wgsl"]
        assert saved[untitled.doc.doc_id]["package"] is None
        # a clean document is not autosaved: saving removes its entry
        win.tabs.setCurrentWidget(untitled)
        assert win.save_current(folder=tmp_path / "rescued") == tmp_path / "rescued"
        win.background.wait()
        assert not store.joinpath(f"{untitled.doc.doc_id}.json").exists()
        untitled.doc.set("field:summary", "typed after the save", None)
        qtbot.waitUntil(lambda: store.joinpath(f"{untitled.doc.doc_id}.json").exists(), timeout=10_000)
        win.background.wait()
    finally:
        win.workers.close()               # the "crash": no close, no discard …
        for v in win.views:
            v.session._timer.stop()
            v.checker.timer.stop()
        win.views.clear()                 # … and nobody is asked to save when the widget goes

    _crash(store)
    assert len(AutosaveStore().orphans()) == 2
    monkeypatch.setattr(Recovery, "ask", lambda self, entries: True)
    win2 = MainWindow(offer_recovery=False)
    qtbot.addWidget(win2)
    try:
        restored = win2.recovery.offer()
        assert len(restored) == 2
        by_id = {v.doc.doc_id: v.doc for v in restored}
        wm = by_id[view.doc.doc_id]
        assert wm.path == tmp_path / "wm" and wm.dirty
        assert "i >= p.n - p.w)" in wm.text("forward.wgsl")              # the unsaved edit is back
        assert "i >= p.n - p.w + 1u)" in (tmp_path / "wm" / "forward.wgsl").read_text()   # disk untouched
        rescued = by_id[untitled.doc.doc_id]
        assert rescued.field("summary") == "typed after the save" and rescued.path == tmp_path / "rescued"
        for v in list(win2.views):
            win2.close_view(v, discard=True)
        win2.background.wait()
        assert list(store.glob("*.json")) == []
    finally:
        win2.shutdown()


def test_declined_recovery_is_set_aside_not_deleted(qtbot, tmp_path, monkeypatch):
    store = AutosaveStore()
    files, _ = read_folder(EXAMPLES / "windowed_median")
    doc = OpDocument(files)
    store.write(store.state(doc))
    _crash(store.root)
    monkeypatch.setattr(Recovery, "ask", lambda self, entries: False)
    win = MainWindow(offer_recovery=False)
    qtbot.addWidget(win)
    try:
        assert win.recovery.offer() == []
        assert not list(store.root.glob("*.json"))
        kept = store.root / "declined" / f"{doc.doc_id}.json"
        assert json.loads(kept.read_text())["files"]["op.toml"] == files["op.toml"]
    finally:
        win.shutdown()


def test_autosaves_of_a_running_studio_are_not_offered(tmp_path):
    store = AutosaveStore()
    doc = OpDocument({"op.toml": 'id = "user/me/x@1"\n'})
    store.write(store.state(doc))
    assert AutosaveStore().orphans() == []          # this process is alive: not a crash
