"""The document model and its views: one setter, one change signal; forms and the op.toml text
edit the same model; inline validation speaks the engine's words at the engine's positions."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from studio.app.cells.backward import BackwardCell
from studio.app.cells.bindings import BindingsCell
from studio.app.cells.code import KernelCell, ManifestCell
from studio.app.cells.signature import SignatureCell, compose, decompose
from studio.app.cells.tolerance import ToleranceCell
from studio.app.notebook.documents import (
    create_from_template,
    open_package,
    read_folder,
    save_document,
)
from studio.document.model import DEFAULT_KERNEL_FILE, DEFAULT_REFERENCE_FILE
from studio.engine.context import Context
from studio.engine.contract.contract import build_contract
from studio.engine.contract.manifest import read_manifest
from studio.engine.contract.package import MAX_FILES, load_package
from studio.engine.contract.signature import EXAMPLE, parse_signature
from studio.engine.contract.toml_edit import set_values
from studio.engine.errors import StudioError

REPO = Path(__file__).resolve().parents[2]
MEDIAN = REPO / "examples" / "windowed_median"


@pytest.fixture
def doc(tmp_path):
    return open_package(create_from_template("windowed_median", tmp_path, "wm", "me"))


# ------------------------------------------------------------------ the model
def test_one_setter_and_change_events(doc):
    events = []
    doc.changed.connect(lambda k, o: events.append((k, o)))
    doc.set("field:tolerance.class", "ulp(2)", origin="form")
    assert ("field:tolerance.class", "form") in events and ("file:op.toml", "form") in events
    assert 'class = "ulp(2)"' in doc.manifest_text and doc.dirty
    events.clear()
    doc.set("file:op.toml", doc.manifest_text.replace('category = "selection"', 'category = "elementwise"'), "text")
    assert ("field:tolerance.category", "text") in events and doc.field("tolerance.category") == "elementwise"
    events.clear()
    doc.set("file:forward.wgsl", doc.text("forward.wgsl") + "\n// note\n", "editor")
    assert events == [("file:forward.wgsl", "editor")]


def test_the_qt_document_re_emits_the_models_callbacks(doc, tmp_path):
    """The Qt document holds the Qt-free model: an edit made on the model itself (no Qt in the
    call) still reaches every Qt view as signals."""
    got = []
    doc.changed.connect(lambda k, o: got.append(("changed", k, o)))
    doc.dirtyChanged.connect(lambda d: got.append(("dirty", d)))
    doc.contentEdited.connect(lambda k, before, o: got.append(("edited", k, o)))
    doc.pathChanged.connect(lambda p: got.append(("path", p)))
    doc.model.set("field:summary", "from the model", "script")
    assert ("changed", "field:summary", "script") in got and ("dirty", True) in got
    assert ("edited", "field:summary", "script") in got and doc.field("summary") == "from the model"
    doc.model.save(tmp_path / "saved")
    assert ("path", tmp_path / "saved") in got and ("dirty", False) in got and not doc.dirty


def test_a_form_edit_is_refused_while_the_toml_is_broken(doc):
    doc.set("file:op.toml", doc.manifest_text.replace('summary = "', 'summary = '), None)
    assert doc.toml_problem is not None and doc.toml_problem.line == 2
    with pytest.raises(StudioError, match="syntax error"):
        doc.set("field:summary", "x", None)


def test_save_goes_through_the_engine_and_loads_back(doc, tmp_path):
    doc.set("field:summary", "Edited summary", None)
    dest = tmp_path / "copy"
    ctx = Context.open()
    save_document(doc, dest, ctx=ctx)
    assert not doc.dirty and doc.path == dest
    pkg = load_package(dest)
    assert pkg.contract.summary == "Edited summary" and pkg.hash == doc.content_hash()
    assert not list(dest.glob(".*.tmp"))
    assert ctx.trust.status(pkg).level == "authored"            # the engine's save records what it wrote
    # a non-code edit keeps the trust of its Python (trust follows the reference only)
    doc.set("field:summary", "Edited again", None)
    save_document(doc, tmp_path / "again")
    assert ctx.trust.status(load_package(tmp_path / "again")).level == "authored"
    # without a context (code that was not runnable here): the same writer, nothing recorded
    doc.set("file:reference.py", doc.text("reference.py") + "\n# an edit of the Python\n", None)
    save_document(doc, tmp_path / "other")
    assert ctx.trust.status(load_package(tmp_path / "other")).level == "untrusted"


def test_receipts_proven_on_a_snapshot_follow_the_save(qtbot, doc, tmp_path):
    """A run on unsaved content proves its snapshot; the receipts live in the user folder keyed by
    content hash, so the saved package with exactly that content has them; other content does not."""
    from studio.app.bridge.background import Background
    from studio.app.bridge.session import DocumentSession
    from studio.engine.proof import receipts

    session = DocumentSession(doc, Background(), ctx=Context.open(), authored=True)
    doc.set("field:summary", "proven before saving", None)
    snap = load_package(session.target()()["target"])             # what the worker is handed
    assert snap.hash == doc.content_hash() and snap.root != doc.path

    class Rep:                                                     # a gradcheck report, as the engine writes it
        def to_json(self):
            return {"op": snap.id, "hash": snap.hash, "verdict": "pass"}
    issued = receipts.write_receipt(snap, {"schema": receipts.SCHEMA, "gpu_profile": {"id": "here"}, "verdict": "pass",
                                           "hashes": {"package": snap.hash}})
    receipts.write_gradcheck_receipt(snap, Rep())
    saved = load_package(session.save(tmp_path / "saved"))
    assert [r for _, r in receipts.receipts(saved)] == [r for _, r in receipts.receipts(snap)]
    assert receipts.gradcheck_status(saved)[0] == "pass"
    assert issued.parent == receipts.receipt_dir(saved)          # the snapshot's receipt is the saved one's
    assert not (saved.root / "receipts").exists()               # nothing copied into the package folder
    # other content: nothing is carried
    doc.set("field:summary", "changed after the proof", None)
    other = load_package(session.save(tmp_path / "other"))
    assert receipts.receipts(other) == [] and receipts.gradcheck_status(other)[0] == "none"


def test_opening_a_folder_keeps_the_engines_rules(tmp_path):
    root = create_from_template("windowed_median", tmp_path, "wm", "me")
    (root / "blob.bin").write_bytes(b"\xff\x00")               # not UTF-8: carried as binary
    doc = open_package(root)
    assert doc.binary == {"blob.bin": b"\xff\x00"} and doc.content_hash() == load_package(root).hash
    for k in range(MAX_FILES):
        (root / f"extra{k}.txt").write_text("x")
    with pytest.raises(StudioError, match="limit"):
        open_package(root)


def test_the_models_defaults_are_the_engines(doc):
    text = set_values(doc.manifest_text, {"kernel.file": None, "reference.file": None})
    contract = build_contract(read_manifest(text.encode(), "op.toml"))
    assert (contract.kernel.file, contract.reference_file) == (DEFAULT_KERNEL_FILE, DEFAULT_REFERENCE_FILE)


def test_template_is_the_story_op(tmp_path):
    root = create_from_template("windowed_median", tmp_path, "median7", "ana")
    pkg = load_package(root)
    assert pkg.id == "user/ana/median7@1"
    story, _ = read_folder(MEDIAN)
    mine, _ = read_folder(root)
    for rel in ("forward.wgsl", "reference.py", "backward.wgsl"):
        assert mine[rel].replace("user/ana/median7@1", "X") == story[rel].replace("user/demo/windowed_median@1", "X")
    # op.toml: the story's, with what the dialog gave — the author in `authors`, the signature's name
    want = (story["op.toml"].replace("user/demo/windowed_median@1", "X")
            .replace('authors = ["Scellis Studio"]', 'authors = ["ana"]')
            .replace('signature = "windowed_median(', 'signature = "median7('))
    assert mine["op.toml"].replace("user/ana/median7@1", "X") == want
    with pytest.raises(StudioError, match="already exists"):
        create_from_template("windowed_median", tmp_path, "median7", "ana")
    with pytest.raises(StudioError, match="lower case"):
        create_from_template("windowed_median", tmp_path, "Median", "ana")


# ------------------------------------------------------------------ forms and text, one model
def test_signature_form_and_text_stay_in_step(qtbot, doc):
    cell = SignatureCell(1, doc)
    text_view = ManifestCell(2, doc)
    qtbot.addWidget(cell)
    qtbot.addWidget(text_view)
    # the form: change the parameter's upper bound in the table
    cell.params.set_cell(0, 3, "1, 15")
    assert "w: u32 odd in [1, 15]" in doc.field("signature")
    assert "w: u32 odd in [1, 15]" in text_view.editor.toPlainText()        # the text view follows
    # the text: a power user edits op.toml; the form follows
    text_view.editor.selectAll()
    text_view.editor.insertPlainText(doc.manifest_text.replace("odd in [1, 15]", "odd in [1, 9]"))
    assert cell.params.rows()[0] == ["w", "u32", "odd", "1, 9"]
    assert cell.text.text() == doc.field("signature")


def test_signature_inline_error_at_its_column(qtbot, doc):
    cell = SignatureCell(1, doc)
    qtbot.addWidget(cell)
    bad = EXAMPLE.replace("w <= n", "w <== n")
    qtbot.keyClicks(cell.text, "")      # focus
    cell.text.setText(bad)
    cell.text.textEdited.emit(bad)
    err = cell.message.error
    assert err is not None and err.col == bad.index("<==") + 3
    assert cell.chip.text() == "invalid"
    assert "^" in cell.caret.text()
    assert doc.field("signature") == bad           # what was typed is kept, even while wrong
    cell.text.setText(EXAMPLE)
    cell.text.textEdited.emit(EXAMPLE)
    assert cell.message.error is None and cell.chip.text() == "static"


def test_compose_round_trips_every_builtin_signature():
    for toml in sorted((REPO / "resources" / "ops").rglob("op.toml")):
        sig = parse_signature(tomllib.loads(toml.read_text())["signature"])
        assert str(parse_signature(compose(*decompose(sig)))) == str(sig), toml


def test_tolerance_rule_is_applied_as_you_choose(qtbot, doc):
    cell = ToleranceCell(1, doc)
    qtbot.addWidget(cell)
    assert cell.chip.text() == "exact"
    cell.category.setCurrentText("reduction")                    # exact does not fit a reduction
    assert doc.field("tolerance.category") == "reduction"
    assert "cannot claim 'exact'" in cell.message.error.message
    cell.kind.setCurrentText("bound")
    assert doc.field("tolerance.class") == "bound" and cell.message.error is None


def test_bindings_table_and_checks_against_the_signature(qtbot, doc):
    cell = BindingsCell(1, doc)
    qtbot.addWidget(cell)
    assert [r[2] for r in cell.table.rows()] == ["x", "y", "p"]
    cell.table.set_cell(1, 2, "out")                             # rename y: the signature's y has no binding
    assert "@binding(1) out : storage read_write f32[n - w + 1]" in doc.field("bindings.text")
    assert cell.message.error is not None and "y" in cell.message.error.message
    assert cell.editor.markers and cell.editor.markers[0].line == 1
    cell.table.set_cell(1, 2, "y")
    assert cell.message.error is None


def test_backward_ladder(qtbot, doc):
    cell = BackwardCell(1, doc)
    qtbot.addWidget(cell)
    declared = doc.field("backward.text")
    assert cell.kind.currentText() == "vjp" and cell.rules.rows()[0][:3] == ["x", "reference", "vjp"]
    if "on device(" in declared:                              # the device VJP's kernel is editable here too
        assert cell.device_box.isVisibleTo(cell)
        assert cell.device_editor.toPlainText() == doc.text(cell.device_kernel())
    cell.kind.setCurrentText("nondifferentiable")
    assert doc.field("backward.text") == "nondifferentiable" and not cell.rules.isVisibleTo(cell)
    if "on device(" in declared:
        # the device VJP's fields are still in op.toml: they stay in view (an error in one must never
        # point at a hidden field), said to be unused, with a way to remove them
        assert cell.device_box.isVisibleTo(cell) and cell.device_unused.isVisibleTo(cell)
    cell.kind.setCurrentText("vjp")
    assert doc.field("backward.text") == declared
    assert not cell.device_unused.isVisibleTo(cell)


def test_composite_rung_keeps_its_steps(qtbot, doc):
    cell = BackwardCell(1, doc)
    qtbot.addWidget(cell)
    cell.kind.setCurrentText("composite")
    assert doc.field("backward.text").startswith("composite")
    assert "without steps" in cell.message.text()            # the notation needs its steps
    steps = "composite\nu = core/shape/unfold@1(x; w = w)\ny = core/reduce/median_rows@1(u)\n"
    cell.editor.setPlainText(steps)
    qtbot.waitUntil(lambda: doc.field("backward.text") == steps, timeout=3000)
    cell.kind.setCurrentText("nondifferentiable")
    cell.kind.setCurrentText("composite")
    assert doc.field("backward.text") == steps


def test_kernel_cell_edits_the_kernel_file(qtbot, doc):
    cell = KernelCell(1, doc)
    qtbot.addWidget(cell)
    assert cell.editor.toPlainText() == doc.text("forward.wgsl")
    cell.editor.moveCursor(cell.editor.textCursor().MoveOperation.End)
    cell.editor.insertPlainText("// more\n")
    assert doc.text("forward.wgsl").endswith("// more\n")
    cell.invocations.setText("n - w +")
    cell.invocations.textEdited.emit("n - w +")
    assert cell.invocations_message.error is not None and cell.invocations_message.error.col == 8
