"""Reading op.toml: TOML with field-level errors and source positions for embedded texts."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from ..errors import StudioError

_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


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
        """Line and column (1-based) where the *value* of a string field starts in op.toml."""
        table, _, key = dotted.rpartition(".")
        current = ""
        for n, raw in enumerate(self.text.split("\n"), 1):  # TOML lines end at \n only
            s = raw.strip()
            if s.startswith("[") and not s.startswith("[["):
                current = s.strip("[] ")
                continue
            if current != table:
                continue
            m = re.match(r"\s*" + re.escape(key) + r"\s*=\s*", raw)
            if not m:
                continue
            rest = raw[m.end():]
            for q in ('"""', "'''"):
                if rest.startswith(q):
                    after = rest[3:]
                    if after.strip() == "":
                        return n + 1, 1          # TOML trims the newline right after the quotes
                    return n, m.end() + 4
            if rest[:1] in "\"'":
                return n, m.end() + 2
            return n, m.end() + 1
        return None, None


def utf8_error(raw: bytes, e: UnicodeDecodeError, file: str) -> StudioError:
    """A decoding error at the line and column of the first bad byte."""
    line = raw.count(b"\n", 0, e.start) + 1
    col = len(raw[raw.rfind(b"\n", 0, e.start) + 1:e.start].decode("utf-8", "replace")) + 1
    return StudioError(f"not UTF-8 (byte {e.start}: 0x{raw[e.start]:02x})", file=file, line=line, col=col,
                       hint="save the file as UTF-8")


def read_manifest(raw: bytes, file: str) -> Manifest:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise utf8_error(raw, e, file) from None
    try:
        data = tomllib.loads(text)
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
