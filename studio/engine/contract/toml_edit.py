"""The one editor of op.toml text: set or delete fields, keep everything else the user wrote.

The Studio's forms write one field at a time and publishing/forking set a few top-level keys;
both come here. Built on tomlkit, which keeps a TOML document's comments, blank lines, key order
and the style of every value it is not asked to change: an edit replaces one value (a comment
after it stays), a new key joins its table (a new top-level key goes after the last one, before
the first table), a new table goes at the end. Every result is re-read before it is returned: it
must hold exactly the old data with the requested changes, or the edit is refused with the
field named — never a wrong file."""
from __future__ import annotations

import copy
import datetime
import math
import tomllib

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, InlineTable, String, StringType, Table, Trivia

from ..errors import StudioError
from .manifest import read_manifest
from .toml_position import position

_SCALARS = (str, bool, int, float, datetime.date, datetime.time, datetime.datetime)


def set_value(text: str, dotted: str, value, *, file: str = "op.toml") -> str:
    """``text`` with ``dotted`` (e.g. ``tolerance.class``) set to ``value``; None deletes the key."""
    return set_values(text, {dotted: value}, file=file)


def set_values(text: str, updates: dict, *, file: str = "op.toml") -> str:
    """``text`` with each ``dotted: value`` of ``updates`` applied in order (None deletes).
    A StudioError names the field when a value is not TOML, when the path crosses a value that is
    not a table, or when ``text`` itself is not valid TOML (at its line and column)."""
    want = read_manifest(text.encode("utf-8"), file).data       # invalid TOML: refused at its position
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as e:       # valid for tomllib but not for tomlkit: say so, never guess
        raise StudioError(f"op.toml cannot be edited here: {e}", file=file,
                          hint="edit it in the op.toml text view") from None
    for dotted, value in updates.items():
        keys = dotted.split(".")
        _check_value(value, dotted, file)
        table = _table(doc, keys[:-1], text, dotted, file, create=value is not None)
        want = _apply(want, keys, value)
        if table is None:
            continue
        if value is None:
            if keys[-1] in table:
                del table[keys[-1]]
            continue
        old = table.get(keys[-1]) if keys[-1] in table else None
        table[keys[-1]] = _item(value, old)
    out = doc.as_string()
    try:
        ok = tomllib.loads(out) == want
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        field = ", ".join(updates)
        raise StudioError(f"cannot set {field} in {file}: the edit would not read back as written",
                          file=file, field=field, hint="make the change in the op.toml text view")
    return out


def _check_value(value, dotted: str, file: str) -> None:
    """Refuse what TOML cannot hold (None inside arrays or tables, other objects, bad strings)."""
    if value is None:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or v is None:
                raise StudioError(f"field '{dotted}': {k!r} = {v!r} cannot be written in TOML", file=file,
                                  field=f"{dotted}.{k}", hint="a table's keys are strings and its values are not empty")
            _check_value(v, f"{dotted}.{k}", file)
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            if v is None:
                raise StudioError(f"field '{dotted}': an array cannot hold an empty value", file=file, field=dotted)
            _check_value(v, dotted, file)
        return
    if not isinstance(value, _SCALARS):
        raise StudioError(f"field '{dotted}': a value of type {type(value).__name__} cannot be written in TOML", file=file,
                          field=dotted, hint="give a string, a number, true/false, an array or a table")
    if isinstance(value, float) and math.isnan(value) and math.copysign(1, value) < 0:
        raise StudioError(f"field '{dotted}': TOML has no negative NaN", file=file, field=dotted)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise StudioError(f"field '{dotted}' is not valid text (a lone surrogate)", file=file,
                              field=dotted, hint="type the text again") from None


def _table(doc, keys: list[str], text: str, dotted: str, file: str, *, create: bool):
    """The container ``keys`` name (created when missing and ``create``), or None."""
    node = doc
    for k, key in enumerate(keys):
        if key not in node:
            if not create:
                return None
            node[key] = tomlkit.table()
        nxt = node[key]
        if isinstance(nxt, AoT) or not isinstance(nxt, (Table, InlineTable, dict)):
            where = ".".join(keys[:k + 1])
            line, col = position(text, where)
            raise StudioError(f"cannot set '{dotted}': '{where}' is not a table", file=file, field=dotted,
                              line=line, col=col, hint=f"write [{where}] as a table first")
        node = nxt
    return node


def _apply(data: dict, keys: list[str], value) -> dict:
    out = copy.deepcopy(data)
    node = out
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    if value is None:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = [dict(v) if isinstance(v, dict) else v for v in value] if isinstance(value, tuple) \
            else value
    return out


def _item(value, old):
    """``value`` as a tomlkit item, in the style a person writes (and that ``old`` had)."""
    if isinstance(value, str):
        # a text: opening quotes on their own line, as the shipped ops write it (not with a carriage
        # return: tomlkit writes it raw, and it reads back as part of a line break; escaped below)
        if "\n" in value and "\r" not in value:
            raw = String.from_raw(value, StringType.MLB).as_string()[3:-3]
            # tomlkit itself writes the trimmed newline when the text starts with one
            return String(StringType.MLB, value, raw if value.startswith("\n") else "\n" + raw, Trivia())
        literal = isinstance(old, String) and old.type == StringType.SLL
        if literal and "'" not in value and all(c >= " " or c == "\t" for c in value) and "\x7f" not in value:
            return String.from_raw(value, StringType.SLL)
        return tomlkit.string(value)
    if isinstance(value, dict):
        if isinstance(old, Table):
            return tomlkit.item(value)
        inline = tomlkit.inline_table()
        for k, v in value.items():
            inline[k] = _item(v, None)
        return inline
    if isinstance(value, (list, tuple)):
        arr = tomlkit.array()
        for v in value:
            arr.append(_item(v, None) if isinstance(v, (str, dict)) else v)
        return arr
    return tomlkit.item(value)
