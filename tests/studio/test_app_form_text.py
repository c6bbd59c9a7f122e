"""The forms write only text the engine accepts, and say which field is wrong (studio/app/cells/):
the Backward form's rule switched from "reference" to "route" writes a route with a cotangent and an
index of its own (never ``route(vjp, …)``, which the notation refuses: 'vjp' is a reserved word
there), and switching back restores what the row held."""
from __future__ import annotations

import pytest

from studio.app.cells.backward import BackwardCell
from studio.app.notebook.documents import create_from_template, open_package
from studio.engine.contract.backward import parse_backward


@pytest.fixture
def doc(tmp_path):
    return open_package(create_from_template("windowed_median", tmp_path, "wm", "me"))


def test_choosing_route_in_the_backward_form_writes_text_it_accepts(qtbot, doc):
    cell = BackwardCell(1, doc)
    qtbot.addWidget(cell)
    cell.show()
    declared = doc.field("backward.text")
    assert cell.rules.rows()[0][1:3] == ["reference", "vjp"]
    form = cell.rules.table.cellWidget(0, 1)                   # the row's form dropdown, as the user picks
    form.setFocus()
    form.setCurrentIndex(form.findText("route"))
    text = doc.field("backward.text")
    assert "route(vjp" not in text and text.startswith("vjp x: route(dy, to = "), text
    parse_backward(text)                                       # the engine's own parser accepts it
    assert cell.message.error is None or cell.message.error.field == "backward.subgradient", cell.message.text()
    assert "reserved word" not in cell.message.text()
    assert cell.rules.rows()[0][1:3] == ["route", "dy"]        # the form shows what was written
    form.setCurrentIndex(form.findText("reference"))
    assert doc.field("backward.text") == declared              # what the row held comes back


def test_the_control_route_of_vjp_is_refused_in_the_cell(qtbot, doc):
    """The control: the text the form once wrote is refused, in the cell, with the notation's reason."""
    cell = BackwardCell(1, doc)
    qtbot.addWidget(cell)
    cell.editor.setPlainText("vjp x: route(vjp, to = argmedian)")
    qtbot.waitUntil(lambda: "reserved word" in cell.message.text(), timeout=3000)
