"""Typed fields of a workflow file with their positions: every value read from the TOML comes with
the line and column where it was written, so a mistake is reported at file:line:col and field,
like every other file of the product. Parsing itself is the manifest reader's
(studio/engine/contract/manifest.py: UTF-8, bounded nesting, TOML errors at their position)."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from ..errors import StudioError

_KEY = r"(?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*')"
_HEADER = re.compile(r"^\s*\[(?!\[)\s*(" + _KEY + r"(?:\s*\.\s*" + _KEY + r")*)\s*\]")


def _norm(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in re.findall(_KEY, dotted))


@dataclass
class Fields:
    """The parsed document, its text and its file: typed getters that raise positioned errors."""
    data: dict
    text: str
    file: str

    def __post_init__(self):
        self._lines = self.text.split("\n")
        self._headers: dict[tuple[str, ...], int] = {}
        for n, raw in enumerate(self._lines):
            m = _HEADER.match(raw)
            if m:
                self._headers.setdefault(_norm(m.group(1)), n)

    # ------------------------------------------------------------------ positions
    def position(self, path: tuple[str, ...], *, key: bool = False) -> tuple[int | None, int | None]:
        """(line, col), 1-based, of the value at ``path`` (with ``key``: of its key), or of its
        table's header; (None, None) where the text does not show it plainly."""
        path = tuple(path)
        table_at = None                              # the deepest table of the path that has a header
        for i in range(len(path), -1, -1):
            table, keys = path[:i], path[i:]
            if table and table not in self._headers:
                continue
            start = self._headers[table] + 1 if table else 0
            if table and table_at is None:
                table_at = (start, self._lines[start - 1].index("[") + 1)
            if not keys:
                return table_at if table else (None, None)
            found = self._find_keys(start, keys, key)
            if found is not None:
                return found
        if table_at is not None:
            return table_at
        for h, n in self._headers.items():          # a table only written as [path.sub]
            if h[:len(path)] == path:
                return n + 1, self._lines[n].index("[") + 1
        return None, None

    def _find_keys(self, start: int, keys: tuple[str, ...], want_key: bool) -> tuple[int, int] | None:
        end = next((n for n in range(start, len(self._lines)) if _HEADER.match(self._lines[n])), len(self._lines))
        first = re.compile(r"^(\s*)(?:" + re.escape(keys[0]) + r"|\"" + re.escape(keys[0]) + r"\")\s*=\s*")
        for n in range(start, end):
            m = first.match(self._lines[n])
            if not m:
                continue
            row, col, kcol = n, m.end(), len(m.group(1))
            for k in keys[1:]:                       # inside an inline table (possibly over lines)
                pat = re.compile(r"(?:^|(?<=[{,\s]))(?:" + re.escape(k) + r"|\"" + re.escape(k) + r"\")\s*=\s*")
                hit = None
                for r in range(row, min(end, row + 50)):
                    m2 = pat.search(self._lines[r], col if r == row else 0)
                    if m2:
                        hit = (r, m2.end(), m2.start())
                        break
                if hit is None:
                    return row + 1, col + 1
                row, col, kcol = hit
            return row + 1, (kcol if want_key else col) + 1
        return None

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
