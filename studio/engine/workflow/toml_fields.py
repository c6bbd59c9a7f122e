"""Typed fields of a workflow file with their positions: every value read from the TOML comes with
the line and column where it was written, so a mistake is reported at file:line:col and field,
like every other file of the product. Parsing itself is the manifest reader's
(studio/engine/contract/manifest.py: UTF-8, bounded nesting, TOML errors at their position)."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..contract.toml_position import position
from ..errors import StudioError


@dataclass
class Fields:
    """The parsed document, its text and its file: typed getters that raise positioned errors."""
    data: dict
    text: str
    file: str

    # ------------------------------------------------------------------ positions
    def position(self, path: tuple[str, ...], *, key: bool = False) -> tuple[int | None, int | None]:
        """(line, col), 1-based, of the value at ``path`` (with ``key``: of its key), or of the
        deepest part of it the text writes; (None, None) where the text does not show it."""
        return position(self.text, tuple(path), key=key)

    def error(self, path: tuple[str, ...], message: str, hint: str | None = None, *, key: bool = False) -> StudioError:
        line, col = self.position(path, key=key)
        return StudioError(message, file=self.file, line=line, col=col, field=".".join(path), hint=hint)

    # ------------------------------------------------------------------ typed values
    def node(self, path: tuple[str, ...]):
        node = self.data
        for p in path:
            if not isinstance(node, dict) or p not in node:
                return None
            node = node[p]
        return node

    def table(self, path: tuple[str, ...], *, required: bool = False) -> dict:
        v = self.node(path)
        if v is None:
            if required:
                raise self.error(path, f"missing table [{'.'.join(path)}]",
                                 hint=f"add a [{'.'.join(path)}] table to the workflow file")
            return {}
        if not isinstance(v, dict):
            raise self.error(path, f"'{'.'.join(path)}' must be a table, not {_kind(v)}",
                             hint=f"write [{'.'.join(path)}] on a line of its own, then its fields below it")
        return v

    def get(self, path: tuple[str, ...], typ, *, required: bool = False, default=None):
        v = self.node(path)
        if v is None:
            if required:
                raise self.error(path, f"missing field '{path[-1]}' in [{'.'.join(path[:-1])}]",
                                 hint=f"add `{path[-1]} = ...` under [{'.'.join(path[:-1])}]")
            return default
        types = typ if isinstance(typ, tuple) else (typ,)
        ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in types)
        if float in types and isinstance(v, int) and not isinstance(v, bool):
            v, ok = float(v), True
        if not ok:
            want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            raise self.error(path, f"'{'.'.join(path)}' must be {want}, not {_kind(v)}")
        return v

    def known(self, path: tuple[str, ...], allowed: tuple[str, ...]) -> None:
        """Refuse keys of the table at ``path`` that the schema does not know (a typo is named)."""
        for k in self.table(path):
            if k not in allowed:
                near = difflib.get_close_matches(k, allowed, n=1)
                raise self.error((*path, k), f"unknown field '{k}' in [{'.'.join(path)}]" if path
                                 else f"unknown table or field '{k}'",
                                 hint=(f"did you mean '{near[0]}'? " if near else "")
                                 + f"known: {', '.join(allowed)} (docs/workflows.md)", key=True)


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "an array",
               dict: "a table"}


def _kind(v) -> str:
    for t, name in ((bool, "true/false"), (int, "an integer"), (float, "a number"), (str, "a string"),
                    (list, "an array"), (dict, "a table")):
        if isinstance(v, t):
            return name
    return type(v).__name__
