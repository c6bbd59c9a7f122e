"""Where a key or its value is written in a TOML text: the one finder of source positions.

Every file of the product that is TOML (op.toml, workflow files) reports a mistake at the line and
column where the user wrote it. ``position`` finds them all: a key under a ``[table]`` header, a
dotted key (``a.b = 1``), a key inside an inline table (``{ id = "x" }``, even over several
lines), quoted keys. Only statements are read: a line inside a multi-line string or a multi-line
array is never mistaken for a key or a header, and keys under an array of tables (``[[x]]``) are
not mistaken for the table before it. Positions are 1-based, in characters."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

_BARE = r"[A-Za-z0-9_-]+"
_KEY = r"(?:" + _BARE + r"|\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*')"
_KEYS = _KEY + r"(?:[ \t]*\.[ \t]*" + _KEY + r")*"
_ASSIGN = re.compile(r"[ \t]*(" + _KEYS + r")[ \t]*=[ \t]*")
_HEADER = re.compile(r"[ \t]*(\[\[?)[ \t]*(" + _KEYS + r")[ \t]*\]")
_ONE_KEY = re.compile(_KEY)
_STRING_END = {'"': re.compile(r'\\.|"|\n'), "'": re.compile(r"'|\n"),
               '"""': re.compile(r'\\.|"""', re.S), "'''": re.compile(r"'''")}
_INLINE_SEP = re.compile(r"[\s,]*")


def split_keys(dotted: str) -> tuple[str, ...]:
    """``a."b.c".d`` → ("a", "b.c", "d"): the keys of a dotted key, unquoted."""
    out = []
    for k in _ONE_KEY.findall(dotted):
        if k[:1] == '"':
            k = _basic(k)
        elif k[:1] == "'":
            k = k[1:-1]
        out.append(k)
    return tuple(out)


def _basic(quoted: str) -> str:
    try:
        return json.loads(quoted)
    except ValueError:                          # a TOML escape JSON lacks (\U, \e): the raw text
        return quoted[1:-1]


@dataclass(frozen=True)
class _Statement:
    path: tuple[str, ...] | None     # the full path of a key, or of a [table]; None under [[x]]
    key_at: int                      # offset of the key (of the '[' for a header)
    value_at: int | None             # offset of the value (None for a header)
    value_end: int | None


def string_end(text: str, i: int) -> int:
    """Just past the string opening at ``text[i]`` (at the line break of an unterminated one-line
    string; the end of the text for an unterminated multi-line one)."""
    quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    end, pos = _STRING_END[quote], i + len(quote)
    while (e := end.search(text, pos)) is not None:
        if e.group() == "\n":
            return e.start()
        pos = e.end()
        if e.group() == quote:
            if len(quote) == 3:                 # a closing run of up to five quotes ends it
                for _ in range(2):
                    if text.startswith(quote[0], pos):
                        pos += 1
            return pos
    return len(text)


def value_end(text: str, i: int) -> int:
    """Just past the value starting at ``text[i]``: a string, an array or inline table (strings
    and comments inside skipped), or a scalar (up to a comment, a comma, a bracket or the line end)."""
    c = text[i:i + 1]
    if c in ("\"", "'"):
        return string_end(text, i)
    if c in ("[", "{"):
        depth, j = 0, i
        while j < len(text):
            ch = text[j]
            if ch in "\"'":
                j = string_end(text, j)
                continue
            if ch == "#":
                nl = text.find("\n", j)
                j = len(text) if nl < 0 else nl
                continue
            if ch in "[{":
                depth += 1
            elif ch in "]}":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return len(text)
    m = re.compile(r"[^\s#,\]}]*").match(text, i)
    return m.end()


def _statements(text: str):
    """Each header and each key/value statement of the text, in order."""
    table: tuple[str, ...] | None = ()
    pos = 0
    while pos < len(text):
        nl = text.find("\n", pos)
        line_end = len(text) if nl < 0 else nl
        h = _HEADER.match(text, pos, line_end)
        a = None if h else _ASSIGN.match(text, pos, line_end)
        nxt = line_end + 1
        if h:
            keys = split_keys(h.group(2))
            table = keys if h.group(1) == "[" else None
            yield _Statement(table, h.start(1), None, None)
        elif a:
            end = value_end(text, a.end())
            yield _Statement(None if table is None else table + split_keys(a.group(1)), a.start(1), a.end(), end)
            if end > line_end:                  # a value over several lines: go on after it
                nl = text.find("\n", end)
                nxt = len(text) if nl < 0 else nl + 1
        pos = nxt


def _inline(text: str, start: int, end: int, keys: tuple[str, ...]) -> _Statement | None:
    """The deepest of ``keys`` written inside the inline table ``text[start:end]``."""
    if text[start:start + 1] != "{":
        return None
    pos = start + 1
    while pos < end:
        pos = _INLINE_SEP.match(text, pos, end).end()
        a = _ASSIGN.match(text, pos, end)
        if not a:
            return None
        vend = value_end(text, a.end())
        got = split_keys(a.group(1))
        if got == keys[:len(got)]:
            here = _Statement(got, a.start(1), a.end(), vend)
            if len(got) == len(keys):
                return here
            inner = _inline(text, a.end(), vend, keys[len(got):])
            return here if inner is None else replace(inner, path=got + inner.path)
        pos = vend
    return None


def _find(text: str, path: tuple[str, ...]) -> tuple[_Statement | None, bool]:
    """The statement writing ``path`` (and True), else the deepest one writing a part of it."""
    best, best_len, below = None, -1, None
    for s in _statements(text):
        if s.path is None:
            continue
        if s.path == path:
            return s, True
        n = len(s.path)
        if n < len(path) and s.path == path[:n]:
            if s.value_at is not None:
                inner = _inline(text, s.value_at, s.value_end, path[n:])
                if inner is not None and inner.path == path[n:]:
                    return inner, True
                if inner is not None:
                    s, n = inner, n + len(inner.path)
            if n > best_len:
                best, best_len = s, n
        elif below is None and s.value_at is None and s.path[:len(path)] == path:
            below = s                           # a table only written as [path.sub]
    return best or below, False


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def _element(text: str, start: int, end: int, index: int) -> int | None:
    """Where element ``index`` of the array ``text[start:end]`` starts (comments skipped), or None."""
    if text[start:start + 1] != "[":
        return None
    pos, i = start + 1, 0
    while pos < end:
        pos = _INLINE_SEP.match(text, pos, end).end()
        if text.startswith("#", pos):
            nl = text.find("\n", pos)
            pos = end if nl < 0 else nl
            continue
        if pos >= end or text[pos] == "]":
            return None
        if i == index:
            return pos
        pos, i = value_end(text, pos), i + 1
    return None


def position(text: str, path: str | tuple, *, key: bool = False,
             content: bool = False) -> tuple[int | None, int | None]:
    """(line, col), 1-based, of the value at ``path`` (``"tolerance.class"`` or a tuple of keys,
    whose last item may be an int: that element of an array); with ``key``: of its key; with
    ``content``: of a string value's first character (inside the quotes, past the newline TOML
    trims after opening triple quotes), which is where an embedded text's own positions start.
    Where the text does not write ``path`` itself: the deepest table, key, inline table or array
    of it that it does write (the value of a key; or a ``[path.sub]`` header); (None, None) when
    none."""
    index = None
    if not isinstance(path, str) and path and isinstance(path[-1], int):
        *path, index = path
    keys = split_keys(path) if isinstance(path, str) else tuple(path)
    s, exact = _find(text, keys)
    if s is None:
        return None, None
    if (key and exact) or s.value_at is None:
        return _line_col(text, s.key_at)
    at = s.value_at
    if index is not None and exact:
        at = _element(text, at, s.value_end, index) or at
    if content and text[at:at + 1] in ("\"", "'"):
        quote = 3 if text.startswith(text[at] * 3, at) else 1
        at += quote
        if quote == 3 and text.startswith("\n", at):
            at += 1
        elif quote == 3 and text.startswith("\r\n", at):
            at += 2
    return _line_col(text, at)
