"""Targeted edits of op.toml text: change one value, keep everything else byte for byte.

The form cells write one field at a time; a power user's comments, blank lines and key order
in the text view must survive that. ``set_value`` replaces only the span of the value (or
inserts/deletes one key) and then proves the edit by re-parsing: the result must equal the
old data with exactly that one change. Should the text be too unusual for the span scanner,
the whole manifest is re-rendered with tomli_w instead — never a wrong file.
"""
from __future__ import annotations

import copy
import re
import tomllib

import tomli_w

_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")


def render_value(value) -> str:
    """A TOML value as text (strings with newlines as multi-line basic strings; a short array of
    scalars on one line, as a person writes ``authors = ["ana"]``)."""
    if isinstance(value, list) and all(isinstance(v, (str, int, float, bool)) and
                                       not (isinstance(v, str) and "\n" in v) for v in value):
        inline = "[" + ", ".join(render_value(v) for v in value) + "]"
        if len(inline) <= 80:
            return inline
    out = tomli_w.dumps({"k": value}, multiline_strings=True)
    return out[len("k = "):].rstrip("\n")


def render(data: dict) -> str:
    return tomli_w.dumps(data, multiline_strings=True)


def _scan_value_end(text: str, i: int) -> int:
    """Index just past the TOML value starting at text[i] (strings, arrays, inline tables, scalars)."""
    for q in ('"""', "'''"):
        if text.startswith(q, i):
            j = i + 3
            while True:
                k = text.find(q, j)
                if k < 0:
                    raise ValueError("unterminated multi-line string")
                if q == '"""' and _escaped(text, k):
                    j = k + 1
                    continue
                k += 3
                while k < len(text) and text[k] == q[0]:   # up to two quotes may close the content
                    k += 1
                return k
    c = text[i] if i < len(text) else ""
    if c in "\"'":
        j = i + 1
        while j < len(text) and text[j] != "\n":
            if text[j] == "\\" and c == '"':
                j += 2
                continue
            if text[j] == c:
                return j + 1
            j += 1
        raise ValueError("unterminated string")
    if c in "[{":
        depth, j = 0, i
        while j < len(text):
            ch = text[j]
            if ch in "\"'":
                j = _scan_value_end(text, j)
                continue
            if ch == "#":
                j = text.find("\n", j)
                if j < 0:
                    raise ValueError("unterminated array")
                continue
            if ch in "[{":
                depth += 1
            elif ch in "]}":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise ValueError("unterminated array")
    m = re.compile(r"[^\s#,\]}]+").match(text, i)
    if not m:
        raise ValueError("no value")
    return m.end()


def _escaped(text: str, k: int) -> bool:
    n = 0
    while k - 1 - n >= 0 and text[k - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def _lines_with_offsets(text: str):
    pos = 0
    for line in text.splitlines(keepends=True):
        yield pos, line
        pos += len(line)


def _locate(text: str, table: str, key: str):
    """(key_line_start, value_start, value_end, table_found, insert_at) for ``table.key``."""
    current, table_found, insert_at = "", table == "", None
    skip_until = -1
    key_re = re.compile(r"\s*(" + re.escape(key) + r"|\"" + re.escape(key) + r"\")\s*=\s*")
    first_header = None
    for start, line in _lines_with_offsets(text):
        if start < skip_until:
            continue
        h = _HEADER.match(line)
        if h:
            if first_header is None:
                first_header = start
            if current == table and table_found and insert_at is None:
                insert_at = start
            current = h.group(1).strip()
            if current == table:
                table_found = True
                insert_at = None
            continue
        if current != table:
            continue
        m = key_re.match(line)
        if m:
            vstart = start + m.end()
            vend = _scan_value_end(text, vstart)
            return start, vstart, vend, True, None
        km = re.match(r"\s*[A-Za-z0-9_\-\"']+\s*=\s*", line)
        if km:  # skip over other keys' multi-line values
            try:
                skip_until = _scan_value_end(text, start + km.end())
            except ValueError:
                pass
    if table == "" and insert_at is None:
        insert_at = first_header if first_header is not None else len(text)
    if table_found and insert_at is None:
        insert_at = len(text)
    return None, None, None, table_found, insert_at


def _apply(data: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(data)
    node = out
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return out


def _insert(text: str, at: int, chunk: str) -> str:
    """Insert a key line at ``at``, moved back over blank lines so it joins its table."""
    p = at
    while p >= 2 and text[p - 2:p] == "\n\n":
        p -= 1
    head = text[:p]
    if head and not head.endswith("\n"):
        head += "\n"
    return head + chunk + text[p:]


def set_value(text: str, dotted: str, value) -> str:
    """``text`` with ``dotted`` (e.g. ``tolerance.class``) set to ``value``; None deletes the key.
    Raises tomllib.TOMLDecodeError when ``text`` itself is not valid TOML."""
    data = tomllib.loads(text)
    want = _apply(data, dotted, value)
    table, _, key = dotted.rpartition(".")
    try:
        new = _edit(text, table, key, value)
        if tomllib.loads(new) == want:
            return new
    except (ValueError, tomllib.TOMLDecodeError):
        pass
    return render(want)


def _edit(text: str, table: str, key: str, value) -> str:
    kstart, vstart, vend, table_found, insert_at = _locate(text, table, key)
    if kstart is not None:
        if value is None:
            line_end = text.find("\n", vend)
            return text[:kstart] + (text[line_end + 1:] if line_end >= 0 else "")
        return text[:vstart] + render_value(value) + text[vend:]
    if value is None:
        return text
    line = f"{key} = {render_value(value)}\n"
    if not table_found:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + f"[{table}]\n" + line
    return _insert(text, insert_at, line)
