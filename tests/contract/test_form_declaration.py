"""Form fields declared once (studio/engine/contract/fields.py): the declaration is what the
manifest's validator consults, what the Studio's forms are built from (studio/app/cells/form.py,
kind -> widget) and what the field table of docs/package-format.md is checked against. A field
added to the declaration shows up in all three; a form widget editing a field the declaration
lacks is caught."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QLineEdit

from studio.engine.contract import fields
from studio.engine.contract.contract import build_contract
from studio.engine.contract.fields import FIELDS, KINDS, Field, doc_problems, table_rows, update_doc
from studio.engine.contract.manifest import read_manifest
from studio.engine.errors import StudioError

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "package-format.md"
BASE = ROOT / "tests" / "data" / "reliability" / "fill" / "op.toml"


def _https(value: str, file: str | None) -> None:
    if not value.startswith("https://"):
        raise StudioError(f"homepage {value!r} is not an https:// address", file=file, field="homepage",
                          hint='e.g. homepage = "https://example.org/my-op"')


HOMEPAGE = Field("homepage", "text", max_len=200, check=_https, placeholder="https://…",
                 help="where the op's project lives: an https:// address")


@pytest.fixture
def with_homepage(monkeypatch):
    """The declaration with one field more (after authors, in the Op form)."""
    at = [f.path for f in FIELDS].index("authors") + 1
    monkeypatch.setattr(fields, "FIELDS", FIELDS[:at] + (HOMEPAGE,) + FIELDS[at:])
    return fields.FIELDS


@pytest.fixture(autouse=True)
def _deleted_after(request):
    """The cells made here (qtbot closes them after this fixture's setup, so before its teardown)
    deleted and their documents collected now, not by the collector in a later Studio test."""
    yield
    if "qtbot" in request.fixturenames:
        import gc

        from PySide6.QtCore import QCoreApplication, QEvent
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        QCoreApplication.processEvents()
        gc.collect()


def manifest(top: str = "") -> bytes:
    return (top + BASE.read_text()).encode()


def doc(tmp_path):
    from studio.app.notebook.documents import create_from_template, open_package
    return open_package(create_from_template("windowed_median", tmp_path, "wm", "me"))


def metadata_cell(qtbot, tmp_path):
    from studio.app.cells.metadata import MetadataCell
    cell = MetadataCell(1, doc(tmp_path))
    qtbot.addWidget(cell)
    return cell


# ------------------------------------------------------------------ the declaration as it is
def test_the_docs_field_table_is_the_declarations():
    problems = doc_problems(DOC.read_text(encoding="utf-8"))
    assert problems == [], "run: python -m studio.engine.contract.fields docs/package-format.md\n" + "\n".join(problems)


def test_every_declared_kind_has_a_widget():
    from studio.app.cells.form import WIDGETS, register
    assert set(WIDGETS) == set(KINDS)
    with pytest.raises(ValueError, match="no field kind"):
        register("colour", None, None, None)


def test_the_op_form_is_the_declarations(qtbot, tmp_path):
    from studio.app.cells.form import undeclared
    cell = metadata_cell(qtbot, tmp_path)
    op_fields = [f for f in FIELDS if f.form == "op"]
    assert list(cell.form.widgets) == [f.path for f in op_fields]
    for f in op_fields:
        w = cell.form.widgets[f.path]
        assert w.toolTip() == f.help
        if isinstance(w, QLineEdit):
            assert w.placeholderText() == f.placeholder
    assert cell.summary is cell.form.widgets["summary"]           # the names the rest of the Studio uses
    assert (cell.authors.text(), cell.visibility.currentText()) == ("me", "private")
    assert undeclared(cell.binder) == []


def test_the_tolerance_form_is_the_declarations(qtbot, tmp_path):
    from studio.app.cells.form import undeclared
    from studio.app.cells.tolerance import ToleranceCell
    cell = ToleranceCell(2, doc(tmp_path))
    qtbot.addWidget(cell)
    assert cell.justification.placeholderText() == fields.field("tolerance.justification").placeholder
    assert cell.kind.toolTip() == fields.field("tolerance.class").help
    assert [cell.category.itemText(i) for i in range(cell.category.count())] == \
        list(fields.field("tolerance.category").choices)
    assert undeclared(cell.binder) == []


# ------------------------------------------------------------------ a field added to the declaration
def test_an_added_field_is_in_the_form_and_bound_through_the_setter(qtbot, tmp_path, with_homepage):
    cell = metadata_cell(qtbot, tmp_path)
    w = cell.form.widgets["homepage"]
    assert isinstance(w, QLineEdit) and cell.homepage is w and list(cell.form.widgets)[-1] == "homepage"
    assert w.placeholderText() == "https://…" and w.toolTip() == HOMEPAGE.help
    qtbot.keyClicks(w, "https://example.org")
    assert cell.doc.field("homepage") == "https://example.org"          # OpDocument.set, the one setter
    assert 'homepage = "https://example.org"' in cell.doc.manifest_text
    cell.doc.set("field:homepage", "https://elsewhere.org")              # and back from the document
    assert w.text() == "https://elsewhere.org"


def test_an_added_field_is_in_the_docs_table(with_homepage):
    row = "| `homepage` | string (≤ 200) | no | where the op's project lives: an https:// address |"
    assert row in table_rows()
    text = DOC.read_text(encoding="utf-8")
    assert doc_problems(text) == ["homepage: no row in the field table"]
    updated = update_doc(text)
    assert doc_problems(updated) == []
    lines = updated.splitlines()
    assert lines[lines.index(row) - 1].startswith("| `authors` |")          # after the field declared before it


def test_an_added_field_is_validated_by_name(with_homepage):
    build_contract(read_manifest(manifest('homepage = "https://example.org"\n'), "op.toml"))
    for bad, words in [('"ftp://example.org"', "not an https:// address"), ("7", "must be str"),
                       (f'"https://{"x" * 200}"', "limit 200")]:
        with pytest.raises(StudioError, match=words) as info:
            build_contract(read_manifest(manifest(f"homepage = {bad}\n"), "op.toml"))
        assert info.value.field == "homepage" and "homepage" in info.value.format()


def test_an_undeclared_field_is_not_validated():
    """The control for the test above: without the declaration the validator does not know it."""
    build_contract(read_manifest(manifest('homepage = "ftp://example.org"\n'), "op.toml"))


def test_an_added_choice_is_refused_outside_its_choices(monkeypatch):
    stability = Field("stability", "choice", choices=("experimental", "stable"), default="experimental",
                      help="how settled the op's interface is")
    monkeypatch.setattr(fields, "FIELDS", FIELDS + (stability,))
    build_contract(read_manifest(manifest('stability = "stable"\n'), "op.toml"))
    with pytest.raises(StudioError, match="is not one of experimental, stable") as info:
        build_contract(read_manifest(manifest('stability = "wobbly"\n'), "op.toml"))
    assert info.value.field == "stability"
    assert "| `stability` | `experimental` \\| `stable` | no (`experimental`) |" in table_rows()[-1]


# ------------------------------------------------------------------ the failing control
def test_a_form_field_missing_from_the_declaration_is_caught(qtbot, tmp_path):
    from studio.app.cells.form import undeclared
    cell = metadata_cell(qtbot, tmp_path)
    assert undeclared(cell.binder, [f for f in FIELDS if f.path != "summary"]) == ["summary"]
    stray = QLineEdit(cell)                             # a widget bound by hand, past the declaration
    cell.binder.line(stray, "description")
    assert undeclared(cell.binder) == ["description"]


def test_a_docs_row_that_differs_from_the_declaration_is_caught():
    text = DOC.read_text(encoding="utf-8").replace("| `summary` | string (≤ 400) | yes | one line saying",
                                                   "| `summary` | string (≤ 400) | yes | a line saying")
    problems = doc_problems(text)
    assert len(problems) == 1 and problems[0].startswith("summary: the row differs")
