"""Editors and problems: pygments highlighting for WGSL and Python, problems marked at line:col,
the problems panel's click-to-jump (into embedded manifest texts too), and code that is not
trusted here never being sent to run."""
from __future__ import annotations

import shutil

from PySide6.QtGui import QColor

from studio.app.bridge.background import Background
from studio.app.notebook.document_view import DocumentView
from studio.app.notebook.documents import create_from_template, open_package
from studio.app.widgets.editors import CodeEditor, Marker
from studio.app.notebook.problems import ProblemsPanel, from_json
from studio.app.bridge.worker_bridge import DeviceWorkers
from studio.engine.context import Context
from studio.engine.resources import EXAMPLES


def formats_of(editor: CodeEditor, line: int) -> list[tuple[int, int, QColor]]:
    block = editor.document().findBlockByNumber(line - 1)
    return [(r.start, r.length, r.format.foreground().color()) for r in block.layout().formats()]


def test_wgsl_and_python_are_highlighted(qtbot):
    wgsl = CodeEditor("wgsl")
    qtbot.addWidget(wgsl)
    wgsl.set_text("@compute @workgroup_size(64)\nfn main() {\n    let i = 1u; // note\n}\n")
    fn_line = formats_of(wgsl, 2)
    assert any(start == 0 and length == 2 for start, length, _ in fn_line)          # `fn` is a keyword
    comment = [f for f in formats_of(wgsl, 3) if f[0] == 16]
    assert comment and comment[0][2] != fn_line[0][2]                               # comments look different
    py = CodeEditor("python")
    qtbot.addWidget(py)
    py.set_text('def forward(x, *, w):\n    """doc\n    string"""\n    return x\n')
    assert any(s == 0 and n == 3 for s, n, _ in formats_of(py, 1))                  # `def`
    assert formats_of(py, 3)                                                         # inside the docstring
    # an edit that opens a string re-colours the lines after it
    before = formats_of(py, 4)
    c = py.textCursor()
    c.setPosition(len('def forward(x, *, w):\n    """doc\n    string'))
    c.deleteChar()
    py.setTextCursor(c)
    assert formats_of(py, 4) != before


def test_markers_and_goto(qtbot):
    ed = CodeEditor("wgsl")
    qtbot.addWidget(ed)
    ed.set_text("fn main() {\n    let x = 1u\n}\n")
    ed.set_markers([Marker(2, 9, "expected ';'")])
    sels = ed.extraSelections()
    assert len(sels) == 2 and sels[1].cursor.selectedText() == "x"
    ed.goto(2, 9)
    assert ed.cursor_line_col() == (2, 9)


def test_problem_paths_are_made_relative_to_the_package(qtbot, tmp_path):
    p = from_json({"message": "m", "file": str(tmp_path / "snap" / "forward.wgsl"), "line": 3, "col": 4},
                  [tmp_path / "snap"])
    assert (p.file, p.where) == ("forward.wgsl", "forward.wgsl:3:4")
    panel = ProblemsPanel()
    qtbot.addWidget(panel)
    panel.set_problems([p])
    got = []
    panel.activated.connect(got.append)
    panel.itemClicked.emit(panel.topLevelItem(0), 0)
    assert got == [p]


def test_a_problem_in_an_embedded_text_jumps_into_its_cell(qtbot, tmp_path):
    doc = open_package(create_from_template("windowed_median", tmp_path, "wm", "me"))
    view = DocumentView(doc, DeviceWorkers(), Background(), ctx=Context.open(), authored=True)
    qtbot.addWidget(view)
    view.checker.timer.setInterval(10**7)                   # no device worker in this test
    text = doc.manifest_text.splitlines()
    line = next(i for i, t in enumerate(text, 1) if "@binding(1) y" in t)
    col = text[line - 1].index("f32") + 1
    from studio.app.notebook.problems import Problem
    p = Problem("dims disagree", "op.toml", line, col)
    view.notebook.set_problems([p])
    bindings = view.notebook.cell("bindings")
    first = next(i for i, t in enumerate(doc.field("bindings.text").splitlines(), 1) if "@binding(1) y" in t)
    assert bindings.editor.markers and bindings.editor.markers[0].line == first
    view.notebook.jump(p)
    assert bindings.editor.cursor_line_col() == (first, col)
    sig_line = next(i for i, t in enumerate(text, 1) if t.startswith("signature"))
    view.notebook.jump(Problem("bad", "op.toml", sig_line, text[sig_line - 1].index("w <=") + 1))
    sig = view.notebook.cell("signature").text
    assert sig.text()[sig.cursorPosition():].startswith("w <= n")


def test_untrusted_code_is_not_run_until_trusted(qtbot, tmp_path):
    sent = shutil.copytree(EXAMPLES / "windowed_median", tmp_path / "from_a_colleague",
                           ignore=shutil.ignore_patterns("receipts"))
    (sent / "reference.py").write_text((sent / "reference.py").read_text() + "\n# changed by someone\n")
    doc = open_package(sent)
    workers = DeviceWorkers()
    ctx = Context.open()
    view = DocumentView(doc, workers, Background(), ctx=ctx)
    qtbot.addWidget(view)
    assert not view.session.runnable
    view.conformance.run()
    view.runner.run()
    assert workers.jobs == []                                              # nothing went to the worker
    assert "not trusted" in view.conformance_panel.summary.text()
    assert "not trusted" in view.run_panel.info.text()
    view.session.trust_now()
    assert view.session.runnable
    assert ctx.trust.status_of(sent, doc.content_hash()).level == "trusted"   # kept in the trust store
    # an edit made here, on top of trusted content, stays runnable (authored here)
    doc.set("field:summary", "mine now", None)
    assert view.session.runnable
