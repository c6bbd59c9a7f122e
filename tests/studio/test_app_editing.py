"""Editing conventions: controls change only on purpose — the mouse wheel over an
unfocused dropdown or spin box scrolls the notebook and never edits the op; a focused one still
steps as usual; "− remove" removes only what is selected; a device-VJP field the backward no
longer uses stays in view (an error in it never points at a hidden field)."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QComboBox, QSpinBox

from studio.app.bridge.background import Background
from studio.app.notebook.document_view import DocumentView
from studio.app.notebook.documents import create_from_template, open_package
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.context import Context


def wheel(widget, steps: int = -1) -> QWheelEvent:
    """A real wheel turn (one notch = 120) over the middle of ``widget``, delivered as Qt does."""
    local = QPointF(widget.width() / 2, widget.height() / 2)
    glob = QPointF(widget.mapToGlobal(QPoint(int(local.x()), int(local.y()))))
    ev = QWheelEvent(local, glob, QPoint(0, 0), QPoint(0, 120 * steps), Qt.MouseButton.NoButton,
                     Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, ev)
    return ev


def open_view(qtbot, tmp_path, template="windowed_median", name="wm"):
    doc = open_package(create_from_template(template, tmp_path, name, "me"))
    view = DocumentView(doc, DeviceWorkers(), Background(), ctx=Context.open(), authored=True)
    qtbot.addWidget(view)
    view.checker.timer.setInterval(10**7)                   # no device worker in these tests
    view.resize(1000, 600)
    view.show()
    qtbot.waitExposed(view)
    return view


def access_combo(view, row: int = 0) -> QComboBox:
    table = view.notebook.cell("bindings").table
    return table.table.cellWidget(row, 4)


def test_the_wheel_over_an_unfocused_dropdown_scrolls_the_notebook(qtbot, tmp_path):
    view = open_view(qtbot, tmp_path)
    doc, nb = view.doc, view.notebook
    nb.scroll.ensureWidgetVisible(nb.cell("bindings").table, 0, 0)
    qtbot.wait(50)
    box = access_combo(view)
    bindings_before, text_before = doc.field("bindings.text"), box.currentText()
    assert text_before == "read" and not doc.dirty and not box.hasFocus()
    bar = nb.scroll.verticalScrollBar()
    at = bar.value()
    for _ in range(3):
        wheel(box, -1)                                        # scroll down over the combo
    assert box.currentText() == text_before                   # the dropdown did not change
    assert doc.field("bindings.text") == bindings_before and not doc.dirty
    assert bar.value() > at                                   # the notebook scrolled instead
    # the same over a spin box (the kernel's workgroup size) and a plain dropdown (tolerance class)
    for w in (nb.cell("kernel").workgroup, nb.cell("tolerance").kind, nb.cell("reference").precision):
        nb.scroll.ensureWidgetVisible(w, 0, 50)
        before = w.value() if isinstance(w, QSpinBox) else w.currentText()
        wheel(w, -1)
        wheel(w, 1)
        wheel(w, 1)
        assert (w.value() if isinstance(w, QSpinBox) else w.currentText()) == before
        assert w.focusPolicy() == Qt.FocusPolicy.StrongFocus        # a wheel turn does not focus it
    assert not doc.dirty and doc.field("bindings.text") == bindings_before


def test_a_focused_dropdown_still_steps_with_the_wheel(qtbot, tmp_path):
    """The control: the wheel event above is one Qt acts on — on a control the user chose."""
    view = open_view(qtbot, tmp_path)
    box = view.notebook.cell("tolerance").kind
    view.activateWindow()
    box.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.waitUntil(box.hasFocus, timeout=3000)
    before = box.currentText()
    wheel(box, -1)
    assert box.currentText() != before                        # stepped on purpose ...
    assert view.doc.dirty and view.doc.field("tolerance.class") != "exact"   # ... and written through


def test_an_unguarded_dropdown_would_have_changed(qtbot):
    """The failing control: without the guard the same wheel event edits a dropdown."""
    box = QComboBox()
    box.addItems(["read", "read_write", ""])
    qtbot.addWidget(box)
    box.show()
    qtbot.waitExposed(box)
    wheel(box, -1)
    assert box.currentText() == "read_write"


def test_remove_removes_only_the_selected_row(qtbot, tmp_path):
    view = open_view(qtbot, tmp_path)
    cell = view.notebook.cell("bindings")
    before = cell.table.rows()
    assert not cell.table.remove_button.isEnabled()           # nothing selected: nothing to remove
    cell.table.remove_button.click()
    assert cell.table.rows() == before and not view.doc.dirty
    cell.table.table.selectRow(1)
    assert cell.table.remove_button.isEnabled()
    qtbot.mouseClick(cell.table.remove_button, Qt.MouseButton.LeftButton)
    assert cell.table.rows() == [before[0], before[2]]
    assert "@binding(1) y" not in view.doc.field("bindings.text")


def test_device_vjp_fields_never_hide_behind_another_rung(qtbot, tmp_path):
    view = open_view(qtbot, tmp_path)
    bw = view.notebook.cell("backward")
    assert bw.device_box.isVisibleTo(bw) and not bw.device_unused.isVisibleTo(bw)
    # switch the rule to route: the device-VJP fields remain in op.toml, so they remain in view
    bw.rules.set_cell(0, 1, "route")
    assert "route(" in view.doc.field("backward.text")
    assert view.doc.field("backward.invocations") == "n"
    assert bw.device_box.isVisibleTo(bw) and bw.device_unused.isVisibleTo(bw)
    assert bw.device_invocations.isVisibleTo(bw) and bw.device_invocations.text() == "n"
    # an error the checker finds in one of them lands in a visible, editable field
    bw.device_invocations.setFocus()
    qtbot.keyClicks(bw.device_invocations, " +")
    assert view.doc.field("backward.invocations") == "n +"
    # or remove them, in one edit (one undo step)
    depth = view.undo_stack.count()
    qtbot.mouseClick(bw.device_remove, Qt.MouseButton.LeftButton)
    assert all(view.doc.field(k) is None for k in ("backward.invocations", "backward.bindings", "backward.tolerance"))
    assert not bw.device_box.isVisibleTo(bw)
    assert view.undo_stack.count() == depth + 1
    view.undo_stack.undo()
    assert view.doc.field("backward.invocations") == "n +" and bw.device_box.isVisibleTo(bw)


# ----------------------------------------------------------------------------- editors, tables, plots
def test_the_wheel_over_unfocused_editors_tables_and_plots_scrolls_the_page(qtbot, tmp_path):
    """A code editor, the mutant table and the run plot take the wheel only once clicked into;
    before that the notebook scrolls. Controls: the focused editor scrolls itself."""
    import numpy as np
    view = open_view(qtbot, tmp_path)
    nb = view.notebook
    bar = nb.scroll.verticalScrollBar()
    editor = nb.cell("kernel").editor
    editor.setPlainText(editor.toPlainText() + "\n" * 200 + "// end\n")
    table = view.gradcheck_panel.findChild(__import__("PySide6.QtWidgets").QtWidgets.QTableWidget)
    plot = view.run_panel.plot
    n = 10_000
    view.run_panel.show_result(np.arange(n, dtype=np.float32), np.arange(n, dtype=np.float32), "y", 0.1)
    qtbot.wait(20)
    for area in (editor, table, plot):
        assert area is not None
        nb.scroll.ensureWidgetVisible(area, 0, 50)
        qtbot.wait(10)
        own = area.verticalScrollBar().value()
        at = bar.value()
        view_range = plot.viewRange()
        wheel(area.viewport(), -1)
        assert bar.value() != at or at == bar.maximum(), type(area).__name__     # the page moved
        assert area.verticalScrollBar().value() == own and plot.viewRange() == view_range
    # the control: the editor clicked into scrolls itself
    view.activateWindow()
    editor.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.waitUntil(editor.hasFocus, timeout=3000)
    nb.scroll.ensureWidgetVisible(editor, 0, 50)
    assert editor.verticalScrollBar().maximum() > 0
    own, at = editor.verticalScrollBar().value(), bar.value()
    wheel(editor.viewport(), -1)
    assert editor.verticalScrollBar().value() > own and bar.value() == at


def test_wheel_zoom_on_a_time_series_is_x_only_and_stops_at_the_data(qtbot, tmp_path):
    import numpy as np
    view = open_view(qtbot, tmp_path)
    plot = view.run_panel.plot
    n = 10_000
    view.run_panel.show_result(np.arange(n, dtype=np.float32), np.sin(np.arange(n, dtype=np.float32)), "y", 0.1)
    qtbot.wait(30)
    view.notebook.scroll.ensureWidgetVisible(plot, 0, 50)
    view.activateWindow()
    plot.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.waitUntil(plot.hasFocus, timeout=3000)
    vb = plot.getPlotItem().getViewBox()
    vb.disableAutoRange(axis="y")
    (x0, x1), y_before = plot.viewRange()
    wheel(plot.viewport(), 1)                                         # zoom in
    qtbot.wait(10)
    (a, b), y_after = plot.viewRange()
    assert b - a < x1 - x0 and y_after == y_before                    # time zoomed, values not
    for _ in range(60):                                               # zoom far out
        wheel(plot.viewport(), -1)
    qtbot.wait(10)
    (a, b), _ = plot.viewRange()
    assert a >= -0.5 - 1e-6 and b <= n - 0.5 + 1e-6, (a, b)           # never past the data
    # the control: a plot without the limits zooms out past the data
    vb.setLimits(xMin=None, xMax=None, maxXRange=None)
    for _ in range(10):
        wheel(plot.viewport(), -1)
    (a, b), _ = plot.viewRange()
    assert b - a > n
