"""The Studio's menus are declared as data (studio/app/shell/actions.py) and built by one builder
(studio/app/shell/shell_menus.py): every declared action stands in the built menus with its title and
shortcut; a shortcut runs the action's command (Ctrl+Enter in a cell asks the cell's panel for a run,
never clicks its button); an action whose command is not registered is refused when the menus are
built, by name; and the declarations import no Qt (an import-linter contract in pyproject.toml)."""
from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMainWindow
from PySide6.QtTest import QTest

from studio.app.shell.actions import (
    ACTIONS,
    LAYOUT,
    LEARNER_LAYOUT,
    MENUS,
    PUBLISH_LAYOUT,
    SHARD_LAYOUT,
    THEME_TITLES,
    TUNE_LAYOUT,
    Action,
    Menu,
    Separator,
    check_layout,
)
from studio.app.shell.shell_menus import MenuDeclarationError, Menus, build_menus, key_sequences

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "The menus' declarations never import Qt or the rest of the Studio"


def menu_paths(bar) -> dict[str, str]:
    """objectName of each action in the menu bar's menus -> the path of menu titles it stands in."""
    out = {}

    def walk(menu, path):
        for a in menu.actions():
            if a.menu() is not None:
                walk(a.menu(), path + [a.text()])
            elif not a.isSeparator() and a.objectName():
                out[a.objectName()] = " ▸ ".join(path)
    for top in bar.actions():
        if top.menu() is not None:
            walk(top.menu(), [top.text()])
    return out


FEATURE_ACTIONS = tuple(e for e in PUBLISH_LAYOUT + LEARNER_LAYOUT + SHARD_LAYOUT + TUNE_LAYOUT
                        if isinstance(e, Action))    # the features' own: Publish, and the tools' panels


def menu_title_path(menu_id: str) -> str:
    by_id = {m.id: m for m in MENUS + tuple(e for e in PUBLISH_LAYOUT if isinstance(e, Menu))}
    titles = []
    m = by_id[menu_id]
    while m is not None:
        titles.insert(0, m.title)
        m = by_id.get(m.parent) if m.parent else None
    return " ▸ ".join(titles)


# ------------------------------------------------------------------ the declarations
def test_the_declarations_are_consistent():
    check_layout(LAYOUT)
    check_layout(PUBLISH_LAYOUT)
    assert len({a.id for a in ACTIONS + FEATURE_ACTIONS}) == len(ACTIONS + FEATURE_ACTIONS)
    from studio.app.widgets.theme import THEMES
    assert tuple(THEME_TITLES) == tuple(THEMES)        # View ▸ Theme has one item per theme


def test_the_declarations_import_no_qt_by_contract():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    c = next(c for c in contracts if c["name"] == CONTRACT)
    assert c["type"] == "forbidden" and c["source_modules"] == ["studio.app.shell.actions"]
    assert {"PySide6", "shiboken6", "pyqtgraph"} <= set(c["forbidden_modules"]) and not c.get("allow_indirect_imports")
    code = ("import sys, studio.app.shell.actions; "
            "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'pyqtgraph'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def _lint(tmp_path: Path, actions_source: str) -> subprocess.CompletedProcess:
    """The real contract (from pyproject.toml) on a small package whose studio/app/shell/actions.py is ``actions_source``."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    c = next(c for c in contracts if c["name"] == CONTRACT)
    for rel in ("studio/__init__.py", "studio/app/__init__.py", "studio/app/shell/__init__.py", "studio/engine/__init__.py",
                "studio/app/shell/window.py", "studio/app/shell/shell_menus.py", "studio/app/shell/menus.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "studio/app/shell/actions.py").write_text(actions_source)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[tool.importlinter]\nroot_packages = ["studio"]\ninclude_external_packages = true\n'
                   f'[[tool.importlinter.contracts]]\nname = "{c["name"]}"\ntype = "forbidden"\n'
                   f'source_modules = {c["source_modules"]!r}\nforbidden_modules = {c["forbidden_modules"]!r}\n')
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--config", str(cfg), "--no-cache"], capture_output=True, text=True,
                          cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})


def test_the_contract_fails_on_a_declaration_module_that_imports_qt(tmp_path):
    clean = _lint(tmp_path, "from dataclasses import dataclass\n")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    bad = _lint(tmp_path, "from PySide6.QtGui import QAction  # noqa\n")
    assert bad.returncode != 0 and "studio.app.shell.actions -> PySide6" in " ".join(bad.stdout.split()), bad.stdout


# ------------------------------------------------------------------ the builder
class Recorder(dict):
    """A command for every command id; ``ran`` lists the ids run, in order."""

    def __init__(self, ids):
        self.ran: list[str] = []
        super().__init__({i: (lambda i=i: self.ran.append(i)) for i in ids})


@pytest.fixture
def bare(qtbot):
    win = QMainWindow()
    qtbot.addWidget(win)
    return win


def test_a_missing_command_is_refused_by_name(bare):
    commands = Recorder({a.command for a in ACTIONS})
    del commands["run.gradcheck"]
    with pytest.raises(MenuDeclarationError, match=r"run\.gradcheck \(command 'run\.gradcheck'\)"):
        Menus(bare, commands=commands)
    assert bare.menuBar().actions() == []                       # refused before anything was built
    broken = LAYOUT + (Action("tools.nowhere", "Nowhere", "help", command="no.such.command"),)
    with pytest.raises(MenuDeclarationError, match=r"tools\.nowhere \(command 'no\.such\.command'\)"):
        build_menus(bare, bare.menuBar(), broken, Recorder({a.command for a in ACTIONS}))
    with pytest.raises(MenuDeclarationError, match="'x' is declared twice"):
        build_menus(bare, bare.menuBar(), (Menu("m", "M"), Action("x", "X", "m"), Action("x", "Y", "m")), {"x": print})
    with pytest.raises(MenuDeclarationError, match="its menu 'later'"):
        build_menus(bare, bare.menuBar(), (Separator("later"), Menu("later", "L")), {})
    menus = Menus(bare, commands=Recorder({a.command for a in ACTIONS}))
    with pytest.raises(MenuDeclarationError, match=r"publish\.fork \(command 'publish\.fork'\)"):
        menus.extend(PUBLISH_LAYOUT, Recorder({a.command for a in FEATURE_ACTIONS} - {"publish.fork"}))
    assert "publish" not in menus.menus
    with pytest.raises(MenuDeclarationError, match="file.save already declared"):
        menus.extend((Action("file.save", "Save again", "file"),), {"file.save": print})
    bare.menuBar().clear()
    # the control: the full set of commands builds
    assert set(Menus(bare, commands=Recorder({a.command for a in ACTIONS})).actions) == {a.id for a in ACTIONS}


def test_each_shortcut_runs_its_actions_command(qtbot, bare):
    commands = Recorder({a.command for a in ACTIONS})
    menus = Menus(bare, commands=commands)
    bare.show()
    qtbot.waitExposed(bare)
    bare.activateWindow()
    qtbot.waitActive(bare)
    keyed = [a for a in ACTIONS if a.shortcut]
    assert len(keyed) >= 15
    for a in keyed:
        first = key_sequences(a.shortcut)[0][0]
        commands.ran.clear()
        QTest.keyClick(bare.windowHandle(), first.key(), first.keyboardModifiers())   # as the platform sends it
        assert commands.ran == [a.command], (a.id, QKeySequence(first).toString(), commands.ran)
    for a in ACTIONS:                                           # the menu item runs the same command
        commands.ran.clear()
        menus[a.id].trigger()
        assert commands.ran == [a.command], a.id
        commands.ran.clear()
        menus.run(a.id)
        assert commands.ran == [a.command], a.id


# ------------------------------------------------------------------ the real window
def test_every_declared_action_is_in_the_window_menus_with_its_shortcut(qtbot):
    from test_app_shell import dispose, make_window
    win = make_window(qtbot, restore_session=False)
    try:
        paths = menu_paths(win.menuBar())
        for a in ACTIONS + FEATURE_ACTIONS:
            assert a.id in paths, f"{a.id} is not in the menus"
            assert paths[a.id] == menu_title_path(a.menu), (a.id, paths[a.id])
            qa = win.menus[a.id]
            assert qa.text().startswith(a.title) and qa.parent() is win
            assert qa.shortcuts() == key_sequences(a.shortcut), a.id
            assert qa.toolTip() and qa.isCheckable() == a.checkable
        qtbot.waitUntil(lambda: win.menuBar().actions()[-1].text() == "&Help")      # Help last, whatever features add
        tops = [t.text() for t in win.menuBar().actions()]
        declared = [m.title for m in MENUS if m.parent is None]
        assert [t for t in tops if t in declared] == declared                     # in the declared order
        toolbar = [x for x in win.menus.toolbar.actions() if x.objectName()]
        assert [x.objectName() for x in toolbar] == [a.id for a in ACTIONS if a.toolbar]
        assert set(win.menus.commands) >= {a.command for a in ACTIONS + FEATURE_ACTIONS}
        assert win.menus["view.theme.system"].isChecked()
        assert Qt.Key.Key_F5 in [s[0].key() for s in win.menus["run.conformance"].shortcuts()]
    finally:
        dispose(win)


# ------------------------------------------------------------------ run a cell: the command, not a click
class _Button:
    def isEnabled(self):
        return True

    def click(self):
        raise AssertionError("a shortcut clicked a button")


class _Panel:
    def __init__(self):
        self.run_button = _Button()
        self.requested = 0

    def request_run(self):
        self.requested += 1


def test_running_a_proof_cell_asks_its_panel_never_clicks_its_button():
    from studio.app.shell.menus import PROOF_CELLS, run_cell

    class View:
        pass
    view = View()
    for attr in PROOF_CELLS.values():
        setattr(view, attr, _Panel())
    for key, attr in PROOF_CELLS.items():
        assert run_cell(view, key) == key
        assert getattr(view, attr).requested == 1


def clicks(root: Path) -> list[str]:
    """Every ``<something>.click()`` call in the .py files under ``root``, as "path:line"."""
    found = []
    for py in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(py.read_text(), str(py))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "click":
                found.append(f"{py.relative_to(root)}:{node.lineno}")
    return found


def test_no_button_is_clicked_from_code_in_the_studio(tmp_path):
    """Shortcuts and menus run commands; ``.click()`` on a widget would simulate the user instead."""
    assert clicks(ROOT / "studio" / "app") == []
    (tmp_path / "m.py").write_text("def f(panel):\n    panel.run_button.click()\n")     # the control
    assert clicks(tmp_path) == ["m.py:2"]
