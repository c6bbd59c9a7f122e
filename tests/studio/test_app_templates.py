"""Templates for a blank start: elementwise, selection (windowed), reduction and
stencil — each a minimal correct op that passes its own conformance on the real device (and a
broken copy of each fails it); a new op from one carries what the dialog was given (id, author
in `authors`, license, visibility, the signature's name) and nothing of the median's."""
from __future__ import annotations

import tomllib

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from studio.app.notebook.documents import create_from_template, read_folder, template_infos
from studio.app.notebook.new_op import NewOpDialog
from studio.engine.contract.package import folder_hash, load_package
from studio.engine.errors import StudioError
from studio.engine.resources import EXAMPLES
from studio.engine.services import actions

KINDS = ["elementwise", "selection", "reduction", "stencil"]
# one wrong line per template: each must fail its conformance (the corpus catches it)
BREAK = {
    "elementwise": ("y[i] = x[i] * x[i];", "y[i] = x[i] * abs(x[i]);"),
    "selection": ("if (x[i + j] > m)", "if (x[i + j] >= m)"),           # ties: the last, not the first
    "reduction": ("s_local = s_local + x[i];", "s_local = s_local + x[i] * 1.0001;"),
    "stencil": ("if (i >= p.n - 2u) { return; }", "if (i >= p.n - 3u) { return; }"),
}


def test_every_kind_is_offered_the_story_op_first():
    infos = template_infos()
    assert infos[0]["name"] == "windowed_median"
    assert [t["name"] for t in infos[1:]] == KINDS
    assert all(t["title"] and t["summary"] and t["op_name"] for t in infos)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_template_is_a_minimal_correct_op_that_passes_its_conformance(ctx, tmp_path, kind):
    root = create_from_template(kind, tmp_path, f"my_{kind}", "ana", license="MIT", visibility="public", ctx=ctx)
    pkg = load_package(root)
    data = tomllib.loads((root / "op.toml").read_text())
    assert pkg.id == f"user/ana/my_{kind}@1"
    assert data["authors"] == ["ana"] and data["license"] == "MIT" and data["visibility"] == "public"
    assert data["signature"].startswith(f"my_{kind}(")
    median, _ = read_folder(EXAMPLES / "windowed_median")
    mine, _ = read_folder(root)
    assert "median" not in data["summary"].lower()                     # nothing of the median's
    assert mine["forward.wgsl"] != median["forward.wgsl"] and "backward.wgsl" not in mine
    assert "on device(" not in data["backward"]["text"]
    assert actions.check(ctx, pkg).ok, actions.check(ctx, pkg)
    rep = actions.conform(ctx, pkg, receipt=False)
    assert rep.verdict == "pass" and rep.failed == 0 and rep.passed > 0, rep.lines


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_template_fails_its_conformance(ctx, tmp_path, kind):
    """The failing control: the same corpus rejects a one-line mistake in each template."""
    root = tmp_path / "x"
    create_from_template(kind, tmp_path, "x", "ana")
    old, new = BREAK[kind]
    text = (root / "forward.wgsl").read_text()
    assert old in text
    (root / "forward.wgsl").write_text(text.replace(old, new))
    ctx.trust.record_authored(folder_hash(root), path=root.resolve())     # edited here: authored here
    rep = actions.conform(ctx, load_package(root), receipt=False)
    assert rep.verdict == "fail" and rep.failed > 0


def test_the_dialog_fills_id_author_license_and_visibility(qtbot, tmp_path):
    dlg = NewOpDialog(folder=str(tmp_path))
    qtbot.addWidget(dlg)
    assert [dlg.template.itemData(i) for i in range(dlg.template.count())] == ["windowed_median", *KINDS]
    dlg.choose_template("stencil")
    assert dlg.name.text() == "central_diff"              # a name still at a template's default follows
    assert "central difference" in dlg.template_summary.text()
    dlg.name.setText("edge_detect")
    dlg.choose_template("elementwise")
    assert dlg.name.text() == "edge_detect"               # the user's own name stays
    dlg.author.setText("ana")
    ok = dlg.buttons.button(QDialogButtonBox.StandardButton.Ok)
    dlg.visibility.setCurrentText("public")
    qtbot.waitUntil(lambda: not dlg.checker.pending)              # judged off the GUI thread
    assert not ok.isEnabled() and "needs a license" in dlg.preview.text()
    dlg.license.setText("Apache-2.0")
    qtbot.waitUntil(lambda: not dlg.checker.pending)
    assert ok.isEnabled()
    assert dlg.values() == ("elementwise", str(tmp_path), "edge_detect", "ana")
    assert dlg.options() == {"license": "Apache-2.0", "visibility": "public"}
    root = create_from_template(*dlg.values(), **dlg.options())
    data = tomllib.loads((root / "op.toml").read_text())
    assert (data["id"], data["authors"], data["license"], data["visibility"]) == \
        ("user/ana/edge_detect@1", ["ana"], "Apache-2.0", "public")


def test_bad_dialog_values_are_refused_with_their_field(tmp_path):
    with pytest.raises(StudioError) as e:
        create_from_template("stencil", tmp_path, "ok_name", "ana", visibility="everyone")
    assert e.value.field == "visibility"
    with pytest.raises(StudioError) as e:
        create_from_template("no_such_kind", tmp_path, "ok_name", "ana")
    assert e.value.field == "template" and "stencil" in e.value.hint


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_templates_backward_passes_gradcheck(ctx, tmp_path, kind):
    pkg = load_package(create_from_template(kind, tmp_path, f"g_{kind}", "ana", ctx=ctx))
    rep = actions.gradcheck(ctx, pkg, receipt=False)
    assert rep.verdict == "pass", rep


@pytest.mark.slow
def test_a_route_to_window_offsets_fails_gradcheck(ctx, tmp_path):
    """The failing control (a mistake made while writing these templates): a route index must be
    the input element's index in x, not its offset in the window."""
    root = create_from_template("selection", tmp_path, "g", "ana")
    ref = (root / "reference.py").read_text()
    old = "return np.arange(windows.shape[0], dtype=np.int64) + np.argmax(windows, axis=-1)"
    assert old in ref
    ref = ref.replace(old, "return np.argmax(windows, axis=-1).astype(np.int64)")
    ref = ref.replace("return x[argmax(x, w=w)]", "return x[np.arange(x.shape[0] - int(w) + 1) + argmax(x, w=w)]")
    (root / "reference.py").write_text(ref)
    ctx.trust.record_authored(folder_hash(root), path=root.resolve())
    pkg = load_package(root)
    assert actions.conform(ctx, pkg, receipt=False).verdict == "pass"       # the forward is still right
    assert actions.gradcheck(ctx, pkg, receipt=False).verdict == "fail"     # the routing is not


def test_the_dialog_shows_the_license_the_new_op_gets(qtbot, tmp_path):
    """The license field says what the new op.toml will say: the story template's Apache-2.0 filled
    in (not "optional" over a license set behind the user's back); cleared, the op has none."""
    dlg = NewOpDialog(folder=str(tmp_path))
    qtbot.addWidget(dlg)
    assert dlg.template.currentData() == "windowed_median" and dlg.license.text() == "Apache-2.0"
    dlg.choose_template("stencil")                       # a blank start declares none: none shown
    assert dlg.license.text() == ""
    dlg.choose_template("windowed_median")
    assert dlg.license.text() == "Apache-2.0"
    dlg.license.clear()
    dlg.author.setText("ana")
    root = create_from_template(*dlg.values(), **dlg.options())
    assert "license" not in tomllib.loads((root / "op.toml").read_text())
    kept = create_from_template("windowed_median", tmp_path / "kept", "wm", "ana", license=None)
    assert tomllib.loads((kept / "op.toml").read_text())["license"] == "Apache-2.0"     # (the control)
