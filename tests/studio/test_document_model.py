"""The document model without Qt (studio/document/model.py): one setter, dirty state, change
notification by plain callbacks, saving through the engine's crash-safe writer, reloading. Plain
pytest: no qtbot, no QApplication."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from studio.document.model import FIELD, FILE, Document
from studio.engine.contract.package import MANIFEST, load_package
from studio.engine.errors import StudioError
from studio.engine.resources import ROOT

MEDIAN = ROOT / "examples" / "windowed_median"


@pytest.fixture
def folder(tmp_path):
    return shutil.copytree(MEDIAN, tmp_path / "wm")


@pytest.fixture
def doc(folder):
    return Document.open(folder)


def record(doc: Document) -> list:
    events = []
    for name in ("changed", "dirty", "path", "edited"):
        doc.subscribe(name, lambda *args, name=name: events.append((name, *args)))
    return events


def test_the_model_loads_without_qt():
    """Importing and using the model loads no Qt module, and it works with Qt made unimportable."""
    code = ("import sys\n"
            "for m in ('PySide6', 'shiboken6', 'pyqtgraph'):\n"
            "    sys.modules[m] = None                      # any import of them now fails\n"
            "from studio.document.model import Document\n"
            f"d = Document.open({str(MEDIAN)!r})\n"
            "d.set('field:summary', 'no Qt here')\n"
            "assert d.dirty and 'no Qt here' in d.manifest_text\n"
            "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'pyqtgraph'))"
            " and sys.modules[m] is not None))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_the_check_fails_when_the_model_imports_qt(tmp_path):
    """The same blocking makes a module that imports Qt fail: the check above can fail."""
    (tmp_path / "qt_model.py").write_text("from PySide6.QtCore import QObject\n")
    code = "import sys\nsys.modules['PySide6'] = None\nsys.path.insert(0, sys.argv[1])\nimport qt_model\n"
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert res.returncode != 0 and "PySide6" in res.stderr


def test_a_field_edit_rewrites_op_toml_marks_dirty_and_notifies(doc):
    events = record(doc)
    assert not doc.dirty
    doc.set(FIELD + "tolerance.class", "ulp(2)", origin="form")
    assert 'class = "ulp(2)"' in doc.manifest_text and doc.field("tolerance.class") == "ulp(2)"
    assert ("changed", FIELD + "tolerance.class", "form") in events
    assert ("changed", FILE + MANIFEST, "form") in events
    assert ("dirty", True) in events
    edited = [e for e in events if e[0] == "edited"]
    assert len(edited) == 1 and edited[0][1] == FIELD + "tolerance.class"
    assert 'class = "exact"' in edited[0][2][MANIFEST]             # the files before the edit (undo)
    events.clear()
    doc.set(FIELD + "tolerance.class", "ulp(2)", origin="form")     # no change: nothing said
    assert events == []


def test_a_text_edit_of_op_toml_notifies_each_field_that_changed(doc):
    events = record(doc)
    doc.set(FILE + MANIFEST, doc.manifest_text.replace('category = "selection"', 'category = "elementwise"'), "text")
    changed = [e[1] for e in events if e[0] == "changed"]
    assert changed == [FILE + MANIFEST, FIELD + "tolerance.category"]
    events.clear()
    doc.set(FILE + "forward.wgsl", doc.text("forward.wgsl") + "// note\n", "editor")
    assert [e for e in events if e[0] == "changed"] == [("changed", FILE + "forward.wgsl", "editor")]


def test_unsubscribe_and_unknown_events(doc):
    seen = []
    stop = doc.subscribe("changed", lambda key, origin: seen.append(key))
    doc.set(FIELD + "summary", "one", None)
    stop()
    doc.set(FIELD + "summary", "two", None)
    assert seen == [FIELD + "summary", FILE + MANIFEST]
    with pytest.raises(KeyError, match="no document event"):
        doc.subscribe("saved", print)


def test_edits_are_refused_when_read_only_or_while_the_toml_is_broken(folder):
    ro = Document(Document.open(folder).files(), folder, read_only=True)
    with pytest.raises(StudioError, match="read-only"):
        ro.set(FIELD + "summary", "x")
    doc = Document.open(folder)
    doc.set(FILE + MANIFEST, doc.manifest_text.replace('summary = "', 'summary = '))
    assert doc.toml_problem is not None and doc.toml_problem.line == 2
    with pytest.raises(StudioError, match="syntax error") as e:
        doc.set(FIELD + "summary", "x")
    assert e.value.line == 2
    with pytest.raises(StudioError, match="needs op.toml"):
        Document({"forward.wgsl": ""})


def test_undo_restores_files_without_being_an_edit(doc):
    before = doc.files()
    doc.set(FIELD + "summary", "changed")
    events = record(doc)
    doc.restore(before, origin="undo")
    assert doc.files() == before and not doc.dirty
    assert ("changed", FIELD + "summary", "undo") in events and ("dirty", False) in events
    assert not [e for e in events if e[0] == "edited"]


def test_save_writes_crash_safely_and_loads_back(doc, tmp_path):
    doc.set(FIELD + "summary", "Edited summary")
    events = record(doc)
    dest = doc.save(tmp_path / "copy")
    assert dest == tmp_path / "copy" and doc.path == dest and not doc.dirty
    assert ("path", dest) in events and ("dirty", False) in events
    pkg = load_package(dest)                           # the engine reads what the model wrote
    assert pkg.contract.summary == "Edited summary" and pkg.hash == doc.content_hash()
    assert not [p for p in dest.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_save_leaves_the_document_unsaved_and_no_temp_files(doc, tmp_path):
    dest = shutil.copytree(doc.path, tmp_path / "blocked")
    (dest / "forward.wgsl").unlink()
    (dest / "forward.wgsl").mkdir()                   # a file cannot be renamed over a folder
    doc.set(FIELD + "summary", "not saved")
    old_path = doc.path
    with pytest.raises(OSError):
        doc.save(dest)
    assert doc.dirty and doc.path == old_path
    assert not [p for p in dest.rglob("*") if p.name.endswith(".tmp")]   # the writer cleaned up
    with pytest.raises(StudioError, match="not empty and holds no op package"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "notes.txt").write_text("mine")
        doc.save(tmp_path / "other")
    with pytest.raises(StudioError, match="no folder yet"):
        Document(doc.files()).save()


def test_reload_reads_the_folder_again(doc, folder):
    doc.set(FIELD + "summary", "unsaved edit")
    text = (folder / MANIFEST).read_text("utf-8").replace('category = "selection"', 'category = "elementwise"')
    (folder / MANIFEST).write_text(text, "utf-8")             # another program changed the package
    (folder / "notes.md").write_text("new file\n", "utf-8")
    events = record(doc)
    doc.reload(origin="disk")
    assert doc.field("tolerance.category") == "elementwise" and doc.text("notes.md") == "new file\n"
    assert doc.field("summary") != "unsaved edit" and not doc.dirty
    changed = {e[1] for e in events if e[0] == "changed"}
    assert {FIELD + "tolerance.category", FIELD + "summary", FILE + "notes.md", FILE + MANIFEST} <= changed
    assert ("dirty", False) in events
    shutil.rmtree(folder)
    with pytest.raises(StudioError):
        doc.reload()


def test_position_is_the_one_finders(doc):
    line, col = doc.position("bindings.text")
    first = doc.manifest_text.split("\n")[line - 1]
    assert first[col - 1:].startswith(doc.field("bindings.text").split("\n")[0])
