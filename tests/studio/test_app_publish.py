"""The Studio's publishing parts, as real widgets (pytest-qt, offscreen): the Publish dialog with
the license validated as you type and the missing public-bar fields; the card view; Fork; the Ring
panel browsing, fetching, trusting and re-verifying through a real device worker."""
import os
import shutil

import pytest
from conftest import MEDIAN

from studio.app.publish import CardView, PublishDialog, RingPanel
from studio.app.publish.dialogs import publishing_workers
from studio.engine.context import Context
from studio.engine.contract.package import load_package
from studio.engine.publish.metadata import read_fields
from studio.engine.services import publishing

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture
def gui_ctx(_isolated_home, hosts):
    return Context.open(hosts=hosts)          # the GUI process's context: no device here


@pytest.fixture
def workers():
    w = publishing_workers(None)
    yield w
    w.close()


def checked(qtbot, dlg):
    """The dialog's verdict on what is typed now (it is computed off the GUI thread)."""
    qtbot.waitUntil(lambda: not dlg.checker.pending, timeout=10_000)
    return dlg


def test_license_is_validated_as_you_type(qtbot, pkg_copy, gui_ctx):
    dlg = PublishDialog(load_package(pkg_copy()), ctx=gui_ctx, profile="unknown")
    qtbot.addWidget(dlg)
    dlg.visibility.setCurrentText("workspace")
    dlg.license.clear()
    checked(qtbot, dlg)
    assert not dlg.publish_button.isEnabled() and "only stay private" in dlg.license_status.text()
    qtbot.keyClicks(dlg.license, "Apachee-2.0")
    assert dlg.status.text() == "checking…"                     # off the GUI thread: the verdict follows
    checked(qtbot, dlg)
    assert "did you mean Apache-2.0" in dlg.license_status.text() and not dlg.publish_button.isEnabled()
    dlg.license.setText("GPL-2.0")
    assert "GPL-2.0-only" in checked(qtbot, dlg).license_status.text()
    dlg.license.setText("MIT OR Apache-2.0")
    checked(qtbot, dlg)
    assert dlg.license_status.text().startswith("✓") and dlg.publish_button.isEnabled()


def test_public_lists_every_missing_field(qtbot, pkg_copy, gui_ctx):
    dlg = PublishDialog(load_package(pkg_copy()), ctx=gui_ctx, profile="unknown")
    qtbot.addWidget(dlg)
    assert checked(qtbot, dlg).missing.count() == 0          # private: the bar is not asked
    dlg.visibility.setCurrentText("public")
    checked(qtbot, dlg)
    items = [dlg.missing.item(k).text() for k in range(dlg.missing.count())]
    assert [i.split(":")[0] for i in items] == ["signature", "examples", "conformance receipt", "gradcheck receipt"]
    assert not dlg.publish_button.isEnabled() and "4 field(s) missing" in dlg.status.text()


@pytest.mark.slow
def test_publish_dialog_publishes_through_the_device_worker(qtbot, pkg_copy, gui_ctx, workers):
    root = pkg_copy()
    dlg = PublishDialog(load_package(root), ctx=gui_ctx, profile="unknown", workers=workers)
    qtbot.addWidget(dlg)
    dlg.visibility.setCurrentText("workspace")
    checked(qtbot, dlg)
    with qtbot.waitSignal(dlg.finished, timeout=240_000):
        qtbot.mouseClick(dlg.publish_button, __import__("PySide6.QtCore", fromlist=["Qt"]).Qt.MouseButton.LeftButton)
    assert load_package(root).contract.visibility == "workspace"
    assert any("private → workspace" in line for line in dlg.result_lines)


def test_card_view_shows_the_card_as_html(qtbot, pkg_copy, gui_ctx):
    view = CardView()
    qtbot.addWidget(view)
    card = view.show_package(load_package(pkg_copy()), ctx=gui_ctx, profile="unknown")
    assert (card["source"], card["trust"]["level"], card["badge"]) == ("user", "unverified", "exact")
    text = view.toPlainText()
    assert "user/demo/windowed_median@1" in text and "unverified" in text and "Lineage" in text


def test_fork_from_the_studio_records_lineage(qtbot, pkg_copy, gui_ctx, tmp_path):
    from studio.app.publish.dialogs import fork_current

    class Win:                                      # fork_current needs only ctx (and open_path, if any)
        ctx = gui_ctx
    src = load_package(pkg_copy())
    forked = fork_current(Win(), src, "user/me/median@1")
    assert read_fields(forked).forked_from.hash == src.hash


@pytest.mark.slow
def test_ring_panel_browses_fetches_trusts_and_reverifies(qtbot, tmp_path, gui_ctx, workers):
    a_home = tmp_path / "A"
    a = Context.open(home=a_home, hosts=gui_ctx.hosts)
    root = a_home / "ops" / "wm"                    # authored in A's folder only, not in the fetching user's
    shutil.copytree(MEDIAN, root, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    a.trust.record_authored(load_package(root).hash, path=root.resolve())
    ring = tmp_path / "ring"
    publishing.ring_add(a, "shared", str(ring))
    publishing.publish(a, load_package(root), visibility="workspace", profile_id="none-here")
    publishing.publish_to_ring(a, load_package(root), "shared")

    panel = RingPanel(gui_ctx, workers=workers)
    qtbot.addWidget(panel)
    panel.name.setText("shared")
    panel.url.setText(str(ring))
    panel.buttons["Add ring"].click()
    assert panel.table.rowCount() == 1 and panel.table.item(0, 1).text() == "user/demo/windowed_median@1"
    panel.buttons["Fetch"].click()
    assert "every file matches the index" in panel.status.text() and "untrusted" in panel.status.text()
    panel.buttons["Re-verify"].click()                      # untrusted: refused, nothing runs
    qtbot.waitUntil(lambda: "refused" in panel.status.text(), timeout=240_000)
    assert "not trusted" in panel.status.text()
    panel.buttons["Trust"].click()
    panel.buttons["Re-verify"].click()
    qtbot.waitUntil(lambda: "trust: " in panel.status.text() or "refused" in panel.status.text(), timeout=240_000)
    assert "trust: verified" in panel.status.text(), panel.status.text()


@pytest.mark.slow
def test_the_main_window_has_the_publish_menu(qtbot):
    from studio.app.shell.window import MainWindow
    from studio.app.bridge.worker_bridge import DeviceWorkers
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
    qtbot.addWidget(win)
    try:
        assert [a.text() for a in win.publish_menu.actions()] == ["Publish…", "Card", "Proof report…", "Fork…", "Ring panel"]
        assert win.ring_dock.panel is win.ring_panel
    finally:
        win.shutdown()
        win.publish_workers.close()


@pytest.mark.slow
def test_publishing_from_the_window_updates_the_open_document(qtbot, pkg_copy):
    from PySide6.QtCore import Qt

    from studio.app.publish.dialogs import open_publish_dialog
    from studio.app.shell.window import MainWindow
    from studio.app.bridge.worker_bridge import DeviceWorkers
    root = pkg_copy()
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
    qtbot.addWidget(win)
    try:
        view = win.open_path(root)
        assert view is not None and not view.doc.dirty
        dlg = open_publish_dialog(win)
        dlg.visibility.setCurrentText("workspace")
        checked(qtbot, dlg)
        with qtbot.waitSignal(dlg.accepted, timeout=240_000):
            qtbot.mouseClick(dlg.publish_button, Qt.MouseButton.LeftButton)
        assert 'visibility = "workspace"' in view.doc.text("op.toml") and not view.doc.dirty
        assert view.doc.text("op.toml") == (root / "op.toml").read_text()
    finally:
        win.shutdown()
        win.publish_workers.close()


@pytest.mark.slow
def test_publish_menu_writes_the_proof_report(qtbot, pkg_copy, tmp_path, ctx):
    """Publish ▸ Proof report…: the op proven in the device worker, then `scellis report`'s page written
    where the user chose, and it re-verifies. The control: the first draft's report is written too,
    and it shows the failed receipt with its failing case (the first draft's minimum, n = w = 1)."""
    from studio.app.publish.dialogs import save_proof_report
    from studio.app.shell.window import MainWindow
    from studio.app.bridge.worker_bridge import DeviceWorkers
    from studio.engine.services.proof_report import check
    win = MainWindow(workers=DeviceWorkers(), offer_recovery=False, restore_session=False)
    qtbot.addWidget(win)
    try:
        verdicts = {}
        for name, src in (("story", MEDIAN), ("draft", MEDIAN.parent / "windowed_median_first_draft")):
            out = tmp_path / f"{name}.html"
            job = save_proof_report(win, load_package(pkg_copy(src, name)), str(out))
            with qtbot.waitSignal(job.finished, timeout=300_000):
                pass
            assert out.is_file(), win.statusBar().currentMessage()
            assert f"wrote {out}" in win.statusBar().currentMessage()
            verdicts[name] = check(ctx, out)
        assert verdicts["story"][0], verdicts["story"][1]
        page = (tmp_path / "draft.html").read_text()
        assert "conformance: failed" in page and "failing case" in page and '"dims": {"n": 1}' in page
    finally:
        win.shutdown()
        win.publish_workers.close()
