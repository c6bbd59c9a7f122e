"""Every menu of the main window and every action in them, declared as data (no Qt here: an
import-linter contract in pyproject.toml keeps it so). The window's menus are built from this list
(``Menus`` in studio/app/shell/shell_menus.py), in its order: a menu, a submenu, an action, a separator each
go where they stand in ``LAYOUT``.

An action names the **command** it runs, by id; the window registers the commands
(``window_commands`` in shell_menus.py) and building the menus refuses an action whose command is not
registered. A keyboard shortcut runs the same command as the menu item (Ctrl+Enter in a code editor
too: ``RunKeys``), never a button's click.

Shortcuts are written as Qt reads them ("Ctrl+S"); ``"std:Find"`` is the platform's key for a
standard action (its first binding), ``"std*:Undo"`` every binding the platform has for it.

``enabled_when`` names a condition the window reports (``Menus.enable``): ``document`` (a document
tab is current), ``closable`` (a tab other than the Welcome page), ``untrusted`` (the current
document's code is not trusted here), ``can_undo`` / ``can_redo`` (its undo stack)."""
from __future__ import annotations

from dataclasses import dataclass

CONDITIONS = ("document", "closable", "untrusted", "can_undo", "can_redo")

# View ▸ Theme: the theme's name (studio/app/widgets/theme.py THEMES) and its title
THEME_TITLES = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


@dataclass(frozen=True)
class Menu:
    """A menu of the menu bar (``parent`` None) or a submenu; ``dynamic``: filled in by the window
    (Open recent, Panels), not from actions; ``hidden_until_used``: shown once an item is added (Tools)."""
    id: str
    title: str
    parent: str | None = None
    dynamic: bool = False
    hidden_until_used: bool = False


@dataclass(frozen=True)
class Separator:
    menu: str


@dataclass(frozen=True)
class Action:
    """One menu item. ``command``: the id of what it runs (its own id when not given); ``tip``: its
    tooltip and status-bar text (the title when not given); ``group``: checkable actions of one group
    exclude each other; ``toolbar``: also on the main toolbar (in declaration order);
    ``prefixed``: the title is a prefix the window completes (Undo / Redo: "Undo typing")."""
    id: str
    title: str
    menu: str
    command: str = ""
    shortcut: tuple[str, ...] = ()
    tip: str = ""
    enabled_when: str | None = None
    checkable: bool = False
    checked: bool = False
    group: str | None = None
    toolbar: bool = False
    prefixed: bool = False

    def __post_init__(self) -> None:
        if not self.command:
            object.__setattr__(self, "command", self.id)
        if isinstance(self.shortcut, str):
            object.__setattr__(self, "shortcut", (self.shortcut,))
        if self.enabled_when is not None and self.enabled_when not in CONDITIONS:
            raise ValueError(f"action {self.id!r}: unknown condition {self.enabled_when!r} (one of {CONDITIONS})")

    @property
    def status_tip(self) -> str:
        return self.tip or self.title.replace("&", "").rstrip("…")


DOC = "document"

LAYOUT: tuple[Menu | Action | Separator, ...] = (
    Menu("file", "&File"),
    Action("file.new", "New op from template…", "file", shortcut=("Ctrl+N",), toolbar=True,
           tip="start a new op from a template (elementwise, windowed, reduction, stencil)"),
    Action("file.open", "Open package…", "file", shortcut=("Ctrl+O",), toolbar=True,
           tip="open an op package (a folder with op.toml)"),
    Action("file.open_workflow", "Open workflow…", "file", tip="open a workflow file as a notebook of steps"),
    Action("file.story", "Open the story's op", "file", tip="open the windowed median, the op the tutorial follows"),
    Menu("file.recent", "Open recent", parent="file", dynamic=True),
    Separator("file"),
    Action("file.save", "Save", "file", shortcut=("Ctrl+S",), enabled_when=DOC, toolbar=True,
           tip="save the current op package"),
    Action("file.save_as", "Save As…", "file", shortcut=("Ctrl+Shift+S",), enabled_when=DOC,
           tip="save the current op into another folder"),
    Action("file.close", "Close tab", "file", shortcut=("Ctrl+W",), enabled_when="closable",
           tip="close the current tab"),
    Separator("file"),
    Action("file.quit", "Quit", "file", shortcut=("Ctrl+Q",), tip="quit Scellis Studio"),

    Menu("edit", "&Edit"),
    Action("edit.undo", "&Undo", "edit", shortcut=("std*:Undo",), enabled_when="can_undo", prefixed=True,
           tip="undo the last edit of this document (forms and text alike)"),
    Action("edit.redo", "&Redo", "edit", shortcut=("std*:Redo",), enabled_when="can_redo", prefixed=True,
           tip="redo the edit undone last"),
    Separator("edit"),
    Action("edit.find", "Find…", "edit", shortcut=("std:Find",), enabled_when=DOC,
           tip="find text in the current code cell"),
    Action("edit.find_next", "Find next", "edit", shortcut=("std:FindNext",), enabled_when=DOC,
           tip="the next match in the code cell"),
    Action("edit.find_prev", "Find previous", "edit", shortcut=("std:FindPrevious",), enabled_when=DOC,
           tip="the previous match in the code cell"),

    Menu("view", "&View"),
    Menu("view.panels", "Panels", parent="view", dynamic=True),
    Separator("view"),
    Menu("view.theme", "Theme", parent="view"),
    *(Action(f"view.theme.{name}", title, "view.theme", checkable=True, checked=name == "system", group="theme",
             tip=f"{name} theme") for name, title in THEME_TITLES.items()),
    Separator("view"),
    Action("view.goto", "Go to cell…", "view", shortcut=("Ctrl+G",), enabled_when=DOC,
           tip="jump to a cell of the notebook"),

    Menu("run", "&Run"),
    Action("run.cell", "Run cell", "run", shortcut=("Ctrl+Return", "Ctrl+Enter"), enabled_when=DOC, toolbar=True,
           tip="run the current cell: conformance, gradcheck or run in those cells; a check elsewhere"),
    Action("run.cell_advance", "Run cell and advance", "run", shortcut=("Shift+Return", "Shift+Enter"),
           enabled_when=DOC, tip="run the current cell, then go to the next one"),
    Separator("run"),
    Action("run.check", "Check now", "run", shortcut=("Ctrl+B",), enabled_when=DOC,
           tip="parse, check and compile the document now"),
    Action("run.conformance", "Conformance", "run", shortcut=("F5",), enabled_when=DOC,
           tip="run conformance on the generated corpus"),
    Action("run.gradcheck", "Gradcheck", "run", shortcut=("F6",), enabled_when=DOC,
           tip="check the declared VJP against finite differences"),
    Action("run.device", "Run on device", "run", shortcut=("F7",), enabled_when=DOC,
           tip="run the op on the device on the Run cell's input"),
    Separator("run"),
    Action("run.trust", "Trust this package's code…", "run", enabled_when="untrusted", toolbar=True,
           tip="let this package's Python reference run here (it was not written on this machine)"),

    Menu("tools", "&Tools", dynamic=True, hidden_until_used=True),

    Menu("help", "&Help"),
    Action("help.docs", "Documentation", "help", shortcut=("std:HelpContents",), tip="open the Studio's documentation"),
    Action("help.shortcuts", "Keyboard shortcuts", "help", shortcut=("Ctrl+/",), tip="every keyboard shortcut"),
    Separator("help"),
    Action("help.about", "About Scellis Studio", "help", tip="version, GPU, licence"),
)

# The Publish menu: a feature's own (studio/app/publish/dialogs.py ``install_publish`` adds it, with its
# commands, through ``Menus.extend``).
PUBLISH_LAYOUT: tuple[Menu | Action | Separator, ...] = (
    Menu("publish", "&Publish"),
    Action("publish.publish", "Publish…", "publish", tip="publish the current op package to an exchange ring"),
    Action("publish.card", "Card", "publish", tip="the current op's card"),
    Action("publish.report", "Proof report…", "publish", tip="save the current op's proof report"),
    Action("publish.fork", "Fork…", "publish", tip="fork the current op package under your name"),
    Action("publish.ring", "Ring panel", "publish", tip="show the exchange ring panel"),
)

# The Tools menu's panels: each tool's own (its ``install_*`` adds its dock and, through
# ``Docks.add_tool_dock`` and ``Menus.extend``, this action with the command that shows the dock).
LEARNER_LAYOUT: tuple[Action, ...] = (
    Action("tools.learner", "&Learner…", "tools", tip="train a data-parallel learner (docs/learner.md)"),
)
SHARD_LAYOUT: tuple[Action, ...] = (
    Action("tools.shard", "&Sharding report…", "tools",
           tip="which nodes shard exactly, which are rounded per replica (docs/bf16.md)"),
)
TUNE_LAYOUT: tuple[Action, ...] = (
    Action("tools.tune", "&Tune kernel…", "tools",
           tip="prove, then time, every candidate of an op's tunable overrides on this GPU (docs/performance.md)"),
)

ACTIONS: tuple[Action, ...] = tuple(e for e in LAYOUT if isinstance(e, Action))
MENUS: tuple[Menu, ...] = tuple(e for e in LAYOUT if isinstance(e, Menu))


def check_layout(layout=LAYOUT) -> None:
    """Every id once; every item in a menu declared before it; raises ValueError naming the first fault."""
    seen: set[str] = set()
    menus: set[str] = set()
    for e in layout:
        if isinstance(e, Separator):
            where = e.menu
        else:
            if e.id in seen:
                raise ValueError(f"{type(e).__name__.lower()} {e.id!r} is declared twice")
            seen.add(e.id)
            where = e.parent if isinstance(e, Menu) else e.menu
        if where is not None and where not in menus:
            raise ValueError(f"{getattr(e, 'id', 'a separator')!r}: its menu {where!r} is not declared before it")
        if isinstance(e, Menu):
            menus.add(e.id)


def missing_commands(actions, commands) -> list[str]:
    """The actions whose command ``commands`` (a mapping of command ids) lacks, as "id (command)"."""
    return [f"{a.id} (command {a.command!r})" for a in actions if a.command not in commands]
