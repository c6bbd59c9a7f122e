"""The main window's menus, built from their declaration (studio/app/shell/actions.py), and the object the
window holds for them (``window.menus``): File, Edit (undo/redo of the current document, find in the
current code cell), View (every dock panel, the toolbar, the theme), Run (Ctrl+Enter / Shift+Enter:
run the current cell, see menus.py), Tools (for features that add their own items), Help
(documentation, shortcuts, About). ``window_commands`` is what each action's command id runs."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QMenu, QMessageBox, QWidget

from .actions import LAYOUT, Action, Menu, Separator, check_layout, missing_commands
from .menus import ShortcutsDialog

DOCS_URL = "https://github.com/scellis/scellis-studio/blob/main/docs/studio.md"
RUN_KEYS = {(Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier): False,
            (Qt.Key.Key_Enter, Qt.KeyboardModifier.ControlModifier): False,
            (Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier): True,
            (Qt.Key.Key_Enter, Qt.KeyboardModifier.ShiftModifier): True}


class MenuDeclarationError(ValueError):
    """The declared menus cannot be built: an action without a registered command, an id twice, an
    item in a menu not declared before it."""


def key_sequences(keys) -> list[QKeySequence]:
    """The QKeySequences of an action's shortcut (actions.py says how they are written)."""
    out: list[QKeySequence] = []
    for k in keys:
        if k.startswith("std*:"):
            out += QKeySequence.keyBindings(getattr(QKeySequence.StandardKey, k[5:]))
        elif k.startswith("std:"):
            out.append(QKeySequence(getattr(QKeySequence.StandardKey, k[4:])))
        else:
            out.append(QKeySequence(k))
    return out


def build_menus(owner: QWidget, bar, layout, commands: Mapping[str, Callable[[], object]], *,
                existing: Mapping[str, QMenu] | None = None) -> tuple[dict[str, QMenu], dict[str, QAction]]:
    """The menus (by menu id) and the actions (by action id) of ``layout``, added to ``bar`` (a
    QMenuBar), each action a child of ``owner`` whose trigger runs ``commands[action.command]``;
    a menu of ``existing`` (built before) is filled, not made again. Refuses (MenuDeclarationError)
    a layout with an action whose command is not in ``commands``."""
    try:
        check_layout(layout)
    except ValueError as e:
        raise MenuDeclarationError(f"the menus cannot be built: {e}") from None
    missing = missing_commands([e for e in layout if isinstance(e, Action)], commands)
    if missing:
        raise MenuDeclarationError("the menus cannot be built: no command is registered for the action(s) "
                                   + ", ".join(missing))
    menus: dict[str, QMenu] = {}
    actions: dict[str, QAction] = {}
    groups: dict[str, QActionGroup] = {}
    for e in layout:
        if isinstance(e, Menu) and existing and e.id in existing:
            menus[e.id] = existing[e.id]
        elif isinstance(e, Menu):
            menus[e.id] = bar.addMenu(e.title) if e.parent is None else menus[e.parent].addMenu(e.title)
            menus[e.id].setObjectName(e.id.replace(".", "_") + "_menu")
        elif isinstance(e, Separator):
            menus[e.menu].addSeparator()
        else:
            a = QAction(e.title, owner)
            a.setObjectName(e.id)
            a.setCheckable(e.checkable)
            keys = key_sequences(e.shortcut)
            if keys:
                a.setShortcuts(keys)
            shown = a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            a.setToolTip(e.status_tip + (f" ({shown})" if shown else ""))
            a.setStatusTip(e.status_tip)
            if e.group:
                groups.setdefault(e.group, QActionGroup(owner)).addAction(a)
            a.setChecked(e.checked)
            command = commands[e.command]
            a.triggered.connect(lambda _checked=False, run=command: run())
            menus[e.menu].addAction(a)
            actions[e.id] = a
    return menus, actions


def window_commands(w) -> dict[str, Callable[[], object]]:
    """What each command id runs on the main window ``w`` (its ``cells``, ``state`` and ``menus``)."""
    from .actions import THEME_TITLES

    def on_current(what: str) -> Callable[[], object]:
        return lambda: (view := w.current()) is not None and getattr(view, what).run()
    return {
        "file.new": w.new_op_dialog,
        "file.open": w.open_dialog,
        "file.open_workflow": lambda: w.state.open_workflow_dialog(),
        "file.story": w.open_story,
        "file.save": lambda: w.save_current(),
        "file.save_as": lambda: w.save_current(ask=True),
        "file.close": lambda: w.close_view(w.tabs.currentWidget()),
        "file.quit": w.close,
        "edit.undo": w.undo_group.undo,
        "edit.redo": w.undo_group.redo,
        "edit.find": lambda: w.cells.find_bar_open(),
        "edit.find_next": lambda: w.cells.find(True),
        "edit.find_prev": lambda: w.cells.find(False),
        **{f"view.theme.{name}": (lambda n=name: w.state.set_theme(n)) for name in THEME_TITLES},
        "view.goto": lambda: w.cells.goto_cell(),
        "run.cell": lambda: w.cells.run_current_cell(advance=False),
        "run.cell_advance": lambda: w.cells.run_current_cell(advance=True),
        "run.check": lambda: (view := w.current()) is not None and view.checker.check_now(),
        "run.conformance": on_current("conformance"),
        "run.gradcheck": on_current("gradcheck"),
        "run.device": on_current("runner"),
        "run.trust": w.trust_current,
        "help.docs": lambda: w.menus.open_docs(),
        "help.shortcuts": lambda: ShortcutsDialog(w).exec(),
        "help.about": lambda: w.menus.about(),
    }


class Menus:
    """The window's menus and toolbar, built from ``layout`` (actions.py's LAYOUT) with ``commands``
    (``window_commands(window)`` when not given). ``menus["file.save"]`` is an action,
    ``menus.menu("tools")`` a menu, ``menus.run("run.cell")`` runs an action's command."""

    def __init__(self, window, layout=LAYOUT, commands: Mapping[str, Callable[[], object]] | None = None):
        self.window = window
        self.layout = tuple(layout)
        self.commands = dict(window_commands(window) if commands is None else commands)
        self.declared = {e.id: e for e in self.layout if isinstance(e, Action)}
        self.menus, self.actions = build_menus(window, window.menuBar(), self.layout, self.commands)
        self._watch = _Reveal(window)
        for m in self.layout:
            if isinstance(m, Menu) and m.hidden_until_used:
                self.menus[m.id].installEventFilter(self._watch)
                self.menus[m.id].menuAction().setVisible(False)        # shown once a tool adds an action
        if "file.recent" in self.menus:
            self.menus["file.recent"].aboutToShow.connect(self.fill_recent)
        group = getattr(window, "undo_group", None)
        if group is not None:
            self._follow_undo(group)
        tb = self.toolbar = window.addToolBar("Main toolbar")
        tb.setObjectName("main_toolbar")
        for e in self.declared.values():
            if e.toolbar:
                tb.addAction(self.actions[e.id])
        tb.toggleViewAction().setToolTip("show or hide the main toolbar")
        if "view.panels" in self.menus:
            self.menus["view.panels"].addAction(tb.toggleViewAction())

    def extend(self, layout, commands: Mapping[str, Callable[[], object]]) -> dict[str, QMenu]:
        """Add a feature's declared menus and actions (actions.py: PUBLISH_LAYOUT), run by its own
        ``commands``; returns its menus by id. Refused, as the window's own, when a command is missing."""
        ids = {e.id for e in self.layout if not isinstance(e, Separator)}
        clash = [e.id for e in layout if not isinstance(e, Separator) and e.id in ids]
        if clash:
            raise MenuDeclarationError(f"the menus cannot be extended: {', '.join(clash)} already declared")
        known = {m.id: m for m in self.layout if isinstance(m, Menu)}
        parents = tuple(known[e.menu] for e in layout if isinstance(e, (Action, Separator)) and e.menu in known)
        menus, actions = build_menus(self.window, self.window.menuBar(), tuple(dict.fromkeys(parents)) + tuple(layout),
                                     commands, existing=self.menus)
        self.layout += tuple(layout)
        self.commands.update(commands)
        self.declared.update({e.id: e for e in layout if isinstance(e, Action)})
        self.actions.update(actions)
        new = {k: m for k, m in menus.items() if k not in self.menus}
        self.menus.update(new)
        return new

    def _follow_undo(self, group) -> None:
        """Undo and Redo follow the current document's undo stack: enabled when it can, their text
        naming the edit ("Undo typing"), as QUndoGroup.createUndoAction's do."""
        for action_id, cond, can, now, text in (
                ("edit.undo", "can_undo", group.canUndoChanged, group.canUndo(), group.undoTextChanged),
                ("edit.redo", "can_redo", group.canRedoChanged, group.canRedo(), group.redoTextChanged)):
            self.enable(**{cond: now})
            a = self.actions.get(action_id)
            if a is None:
                continue
            can.connect(a.setEnabled)
            if self.declared[action_id].prefixed:
                title = self.declared[action_id].title
                text.connect(lambda t, a=a, title=title: a.setText(f"{title} {t}" if t else title))

    def __getitem__(self, action_id: str) -> QAction:
        return self.actions[action_id]

    def menu(self, menu_id: str) -> QMenu:
        return self.menus[menu_id]

    def run(self, action_id: str):
        """Run the command of the action ``action_id`` (what its menu item and its shortcut run)."""
        return self.commands[self.declared[action_id].command]()

    def enable(self, **conditions: bool) -> None:
        """Enable each action whose ``enabled_when`` is one of ``conditions`` as that condition says."""
        for e in self.declared.values():
            if e.enabled_when in conditions:
                self.actions[e.id].setEnabled(bool(conditions[e.enabled_when]))

    def help_last(self) -> None:
        """Help stays the last menu, whatever features add."""
        bar = self.window.menuBar()
        action = self.menus["help"].menuAction()
        if bar.actions() and bar.actions()[-1] is not action:
            bar.removeAction(action)
            bar.addAction(action)

    def fill_recent(self) -> None:
        from .paths import recent_packages
        recent = self.menus["file.recent"]
        recent.clear()
        for p in recent_packages()[:15]:
            a = recent.addAction(f"{p.name} — {p}")
            a.setToolTip(str(p))
            a.triggered.connect(lambda _=False, path=p: self.window.open_path(path))
        if not recent.actions():
            recent.addAction("nothing opened yet").setEnabled(False)

    def open_docs(self) -> None:
        local = Path(__file__).resolve().parents[2] / "docs" / "studio.md"
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(local)) if local.is_file() else QUrl(DOCS_URL))

    def about(self) -> None:
        from importlib.metadata import PackageNotFoundError, version
        try:
            v = version("scellis-studio")
        except PackageNotFoundError:
            v = "source checkout"
        QMessageBox.about(self.window, "About Scellis Studio", about_text(v, self.window.gpu_label.text()))


class _Reveal(QObject):
    """Shows a menu declared ``hidden_until_used`` (Tools) once it has an action, hides it when empty."""

    def eventFilter(self, obj, event) -> bool:
        if event.type() in (QEvent.Type.ActionAdded, QEvent.Type.ActionRemoved) and isinstance(obj, QMenu):
            QTimer.singleShot(0, self.parent(), lambda m=obj: m.menuAction().setVisible(bool(m.actions())))
        return False


class RunKeys(QObject):
    """Ctrl+Enter and Shift+Enter in a document run its current cell — even inside a code editor,
    which would otherwise take Shift+Enter as a line break (a text editor claims plain and Shift
    keys before the window's shortcuts see them). They run the Run menu's commands."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window

    def eventFilter(self, obj, event) -> bool:
        if event.type() not in (QEvent.Type.KeyPress, QEvent.Type.ShortcutOverride):
            return False
        mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        advance = RUN_KEYS.get((event.key(), mods))
        if advance is None or not isinstance(obj, QWidget):
            return False
        view = self.window.current()
        if view is None or not view.isAncestorOf(obj):
            return False
        if event.type() == QEvent.Type.ShortcutOverride:
            event.accept()                   # ours: the KeyPress comes to this filter, not to a shortcut
            return True
        self.window.menus.run("run.cell_advance" if advance else "run.cell")
        return True


def about_text(version: str, gpu: str) -> str:
    return (f"<h3>Scellis Studio {version}</h3>"
            "<p>Write GPU compute ops as content — a contract, a Python reference, a WGSL kernel — and prove them "
            "right: conformance against the reference on a corpus the engine generates, receipts bound by hash to "
            "the kernel and scoped to this machine's GPU profile.</p>"
            f"<p>{gpu}</p><p>Apache-2.0 · Qt {_qt_version()} · pyqtgraph {_pg_version()}</p>")


def _qt_version() -> str:
    from PySide6 import __version__
    return __version__


def _pg_version() -> str:
    import pyqtgraph
    return pyqtgraph.__version__
