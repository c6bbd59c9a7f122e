"""Reading op.toml: TOML with field-level errors and source positions for embedded texts."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from ..errors import StudioError
from .toml_position import position, string_end

_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")
MAX_DEPTH = 32              # arrays and inline tables nested deeper are refused before parsing
_SPECIAL = re.compile(r"[\[\]{}#\"'\n]")


@dataclass
class Manifest:
    data: dict
    text: str
    file: str

    def get(self, dotted: str, typ, *, required: bool = True, default=None, max_len: int = 100_000):
        node = self.data
        parts = dotted.split(".")
        for k, part in enumerate(parts):
            if k and not isinstance(node, dict):       # e.g. `tolerance = "exact"` where a table belongs
                table = ".".join(parts[:k])
                line, col = self.position(table)
                raise StudioError(f"'{table}' must be a table ([{table}]), not {type(node).__name__}",
                                  file=self.file, field=table, line=line, col=col,
                                  hint=f"write [{table}] on a line of its own, then its fields below it")
            if part not in node:
                if required:
                    raise StudioError(f"missing field '{dotted}'", file=self.file, field=dotted,
                                      hint=f"add `{dotted.split('.')[-1]} = ...` to op.toml"
                                      + (f" under [{dotted.rsplit('.', 1)[0]}]" if "." in dotted else ""))
                return default
            node = node[part]
        if not isinstance(node, typ) or (typ is int and isinstance(node, bool)):
            want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
            line, col = self.position(dotted)
            raise StudioError(f"field '{dotted}' must be {want}, not {type(node).__name__}",
                              file=self.file, field=dotted, line=line, col=col)
        if isinstance(node, str) and len(node) > max_len:
            raise StudioError(f"field '{dotted}' is {len(node)} characters long (limit {max_len})",
                              file=self.file, field=dotted)
        return node

    def position(self, dotted: str) -> tuple[int | None, int | None]:
        """Line and column (1-based) where the *value* of a field starts in op.toml (a string's
        first character: embedded texts count their positions from there)."""
        return position(self.text, dotted, content=True)


def utf8_error(raw: bytes, e: UnicodeDecodeError, file: str) -> StudioError:
    """A decoding error at the line and column of the first bad byte."""
    line = raw.count(b"\n", 0, e.start) + 1
    col = len(raw[raw.rfind(b"\n", 0, e.start) + 1:e.start].decode("utf-8", "replace")) + 1
    return StudioError(f"not UTF-8 (byte {e.start}: 0x{raw[e.start]:02x})", file=file, line=line, col=col,
                       hint="save the file as UTF-8")


def nesting(text: str, limit: int = MAX_DEPTH) -> tuple[int, int, int]:
    """(depth, line, column) of the first bracket or brace opened deeper than ``limit``, else of
    the deepest one (depth 0: none), counting outside strings and comments, in linear time: a
    1,000-deep array is refused at its position instead of recursing in the TOML parser."""
    depth = deepest = 0
    where = (1, 1)
    line, line_start, pos = 1, 0, 0
    while (m := _SPECIAL.search(text, pos)) is not None:
        i, c = m.start(), m.group()
        pos = i + 1
        if c == "\n":
            line, line_start = line + 1, pos
        elif c == "#":
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
        elif c in "\"'":
            pos = string_end(text, i)
            newlines = text.count("\n", i, pos)
            if newlines:
                line, line_start = line + newlines, text.rfind("\n", i, pos) + 1
        elif c in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, (line, i - line_start + 1)
            if depth > limit:
                return depth, line, i - line_start + 1
        else:
            depth = max(0, depth - 1)
    return deepest, *where


def read_manifest(raw: bytes, file: str) -> Manifest:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise utf8_error(raw, e, file) from None
    depth, line, col = nesting(text)
    if depth > MAX_DEPTH:
        raise StudioError(f"arrays or inline tables nested more than {MAX_DEPTH} deep", file=file, line=line,
                          col=col, hint="an op.toml needs a few levels at most: flatten the value")
    try:
        data = tomllib.loads(text)
    except RecursionError:          # deeper than the scan saw (it should not happen): still no traceback
        raise StudioError("invalid TOML: nested too deeply to parse", file=file, line=line, col=col,
                          hint="an op.toml needs a few levels at most: flatten the value") from None
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        if m is None and "end of document" in msg:      # point just past the last character
            line, col = text.count("\n") + 1, len(text) - (text.rfind("\n") + 1) + 1
            msg = msg.replace("(at end of document)", "(at the end of the file)")
        raise StudioError(f"invalid TOML: {_TOML_POS.sub('', msg).strip()}", file=file, line=line, col=col,
                          hint="fix the TOML syntax at this position") from None
    return Manifest(data, text, file)
