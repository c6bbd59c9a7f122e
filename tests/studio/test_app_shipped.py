"""Nothing is written into the install (the Studio's part): opening a shipped
example or builtin opens the user's editable copy in ``$SCELLIS_HOME/copies/…`` (the tab, its
tooltip and a banner say so), Ctrl+S writes the copy and leaves the shipped bytes as they were,
opening it again opens the same copy with its edits, and a document whose folder is inside the
install is never saved there — also with the install read-only."""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from studio.app.notebook.shipped import copies_dir, original_of, shipped_path
from studio.engine.errors import StudioError
from studio.engine.resources import BUILTINS, EXAMPLES, ROOT

from test_app_shell import dispose, make_window

FIRST_DRAFT = EXAMPLES / "windowed_median_first_draft"


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture
def window(qtbot):
    win = make_window(qtbot, restore_session=False)
    yield win
    dispose(win)


@pytest.mark.slow
def test_a_shipped_example_opens_as_the_users_copy_and_ctrl_s_never_writes_the_install(qtbot, window,
                                                                                        _isolated_home):
    before = digest(FIRST_DRAFT)
    view = window.open_path(FIRST_DRAFT)
    copy = view.doc.path
    assert copy.resolve() == (Path(_isolated_home) / "copies" / "examples" / FIRST_DRAFT.name).resolve()
    assert original_of(copy).resolve() == FIRST_DRAFT.resolve() and shipped_path(copy) is None
    i = window.tabs.indexOf(view)
    assert "(your copy)" in window.tabs.tabText(i) and "your copy" in window.tabs.tabToolTip(i)
    banner = view.notebook.banner
    assert not banner.isHidden() and "editable copy" in banner.text() and str(copy) in banner.text()
    # edit the kernel and save with Ctrl+S (File ▸ Save)
    editor = view.notebook.cells["kernel"].editor
    editor.setFocus()
    editor.moveCursor(editor.textCursor().MoveOperation.End)
    editor.insertPlainText("\n// my fix goes here\n")
    qtbot.waitUntil(lambda: view.doc.dirty, timeout=5000)
    window.menus["file.save"].trigger()
    assert not view.doc.dirty
    assert "// my fix goes here" in (copy / "forward.wgsl").read_text()
    assert digest(FIRST_DRAFT) == before                         # the shipped bytes are unchanged
    # opened again (from the catalog, the Welcome page…): the same copy, with the edit
    window.close_view(view, discard=True)
    again = window.open_path(FIRST_DRAFT / "op.toml")
    assert again.doc.path.resolve() == copy.resolve()
    assert "// my fix goes here" in again.doc.text(again.doc.kernel_file)
    # the copy is in the Recent list, but not among the catalog's roots (it would stand twice beside
    # the shipped one)
    window.background.wait(10)
    from studio.app.shell.paths import recent_packages
    assert copy.resolve() in [p.resolve() for p in recent_packages()]
    assert all(r.resolve() != copy.resolve() for r in window.extra_roots)


@pytest.mark.slow
def test_a_builtin_opens_as_a_copy_too(qtbot, window):
    clip = next(p.parent for p in sorted(BUILTINS.rglob("op.toml")))
    view = window.open_path(clip)
    assert view.doc.path.resolve().is_relative_to(copies_dir().resolve())
    assert original_of(view.doc.path).resolve() == clip.resolve()


@pytest.fixture
def read_only_install(tmp_path, monkeypatch):
    """A read-only copy of the product's resources standing in for the install."""
    import studio.app.notebook.shipped as shipped
    ro = tmp_path / "resources"
    shutil.copytree(ROOT, ro, ignore=shutil.ignore_patterns("__pycache__", "receipts"))
    monkeypatch.setattr(shipped, "ROOT", ro)
    for p in sorted(ro.rglob("*"), reverse=True):
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    ro.chmod(ro.stat().st_mode & ~stat.S_IWUSR)
    yield ro
    for p in [ro, *ro.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


@pytest.mark.slow
def test_a_read_only_install_opens_and_saves_through_the_copy(qtbot, window, read_only_install):
    draft = read_only_install / "examples" / FIRST_DRAFT.name
    before = digest(draft)
    view = window.open_path(draft)
    assert not view.doc.read_only
    assert view.doc.path.resolve().is_relative_to(copies_dir().resolve())
    view.doc.set("field:summary", "mine now")
    window.menus["file.save"].trigger()
    assert not view.doc.dirty and "mine now" in (view.doc.path / "op.toml").read_text()
    assert digest(draft) == before


def test_a_document_inside_the_install_is_never_saved_there(qtbot, window):
    """The guard under the window: a document whose folder is the shipped one (an old session's
    autosave, a path typed elsewhere) is refused by the save itself, whatever the file mode."""
    from studio.app.notebook.documents import open_package
    before = digest(FIRST_DRAFT)
    doc = open_package(FIRST_DRAFT)
    view = window.add_document(doc)
    view.doc.set("field:summary", "written into the install")
    with pytest.raises(StudioError, match="install"):
        view.session.save()
    with pytest.raises(StudioError, match="install"):
        view.session.save(FIRST_DRAFT)
    assert digest(FIRST_DRAFT) == before
    # control: the same document saved into a folder of the user's
    out = view.session.save(Path(os.environ["SCELLIS_HOME"]) / "elsewhere")
    assert "written into the install" in (out / "op.toml").read_text()
    window.close_view(view, discard=True)
