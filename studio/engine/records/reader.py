"""The one bounded, strict reader of records: a regular file only (a FIFO, a device, a socket or a
folder is never opened, so nothing blocks), at most a size cap, UTF-8, JSON nested at most
MAX_DEPTH deep, no NaN/Infinity, no repeated keys, a JSON object with the expected ``schema`` id,
then its typed schema (msgspec) and its seal. Every failure is a StudioError naming the file and,
where known, the line and column or the field."""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ..arrays import file_kind
from ..errors import StudioError
from .seal import Seal, SealCheck

MAX_DEPTH = 32
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_CHUNK = 1 << 20
_JSON_SPECIAL = re.compile(r'[\[\]{}"]')
_JSON_STRING_END = re.compile(r'\\.|"', re.S)
_AT = re.compile(r" - at `\$(.*)`$")
_MISSING = re.compile(r"missing required field `([^`]*)`")


def read_regular(path: str | os.PathLike, limit: int, *, what: str, file: str | None = None,
                 field: str | None = None, hint: str | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; anything else is a StudioError, found
    without blocking and without reading more than ``limit + 1`` bytes: the type and size come from
    ``stat`` before opening (a FIFO, a device, a socket or a folder is never opened), the open is
    O_NONBLOCK (a FIFO swapped in after the stat cannot block it), what was opened is checked again
    with ``fstat``, and the read stops one byte past the limit (a file that grows is still refused)."""
    where = file or str(path)
    try:
        _check_stat(os.stat(path), limit, what, where, field, hint)
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise StudioError(f"{what} does not exist", file=where, field=field, hint=hint) from None
    except (OSError, ValueError) as e:              # ValueError: a NUL in the name
        raise StudioError(f"cannot read {what}: {getattr(e, 'strerror', None) or e}", file=where, field=field,
                          hint=hint) from None
    try:
        _check_stat(os.fstat(fd), limit, what, where, field, hint)
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as e:
        raise StudioError(f"cannot read {what}: {e.strerror or e}", file=where, field=field, hint=hint) from None
    finally:
        os.close(fd)
    if got > limit:
        raise StudioError(f"{what} is over {limit} bytes (limit)", file=where, field=field, hint=hint)
    return b"".join(chunks)


def _check_stat(st: os.stat_result, limit: int, what: str, where: str, field, hint) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise StudioError(f"{what} is {file_kind(st.st_mode)}, not a regular file", file=where, field=field,
                          hint=hint or "replace it by a regular file")
    if st.st_size > limit:
        raise StudioError(f"{what} is {st.st_size} bytes (limit {limit})", file=where, field=field, hint=hint)


def json_nesting(text: str, limit: int = MAX_DEPTH) -> tuple[int, int]:
    """(line, column) of the first array or object opened deeper than ``limit``, else (0, 0); strings
    skipped, linear time: a 100,000-deep document is refused where it gets too deep, never parsed."""
    depth, pos = 0, 0
    while (m := _JSON_SPECIAL.search(text, pos)) is not None:
        c, pos = m.group(), m.end()
        if c == '"':
            while (e := _JSON_STRING_END.search(text, pos)) is not None:
                pos = e.end()
                if e.group() == '"':
                    break
            else:
                return 0, 0                  # unterminated: the parser says where
        elif c in "[{":
            depth += 1
            if depth > limit:
                line = text.count("\n", 0, m.start()) + 1
                return line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        else:
            depth -= 1
    return 0, 0


def show(v) -> str:
    """A value for a message: short, and safe whatever it is (no repr of a deep list or a huge int)."""
    if isinstance(v, str):
        return repr(v[:60] + ("..." if len(v) > 60 else ""))
    if v is None or isinstance(v, (bool, float)) or (isinstance(v, int) and abs(v) < 10**30):
        return repr(v)
    return f"a {type(v).__name__}"


def _no_duplicates(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"the key {show(dup)} appears twice in one object")
    return dict(pairs)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(raw: bytes, file: str, *, what: str = "record", hint: str | None = None):
    """Strict JSON: UTF-8, at most MAX_DEPTH deep, no NaN/Infinity, no repeated keys. Every failure
    is a StudioError naming the file (and the line and column where the parser knows it)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StudioError(f"{what} is not UTF-8 (byte {e.start})", file=file, hint=hint) from None
    line, col = json_nesting(text)
    if line:
        raise StudioError(f"{what} nests arrays or objects more than {MAX_DEPTH} deep", file=file, line=line,
                          col=col, hint=hint)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise StudioError(f"{what} is not JSON: {e.msg}", file=file, line=e.lineno, col=e.colno, hint=hint) from None
    except (ValueError, RecursionError) as e:      # a repeated key, NaN, a 5,000-digit number
        raise StudioError(f"{what} is not valid: {e}", file=file, hint=hint) from None


def schema_problem(doc, struct) -> tuple[str, str] | None:
    """(field, message) of the first way ``doc`` is not a ``struct`` (a msgspec.Struct), else None."""
    try:
        msgspec.convert(doc, struct, strict=True)
    except msgspec.ValidationError as e:
        msg = str(e)
        m = _AT.search(msg)
        where = (m.group(1) if m else "").lstrip(".")
        missing = _MISSING.search(msg)
        if missing:
            where = f"{where}.{missing.group(1)}" if where else missing.group(1)
        return where or "(the record)", _AT.sub("", msg)
    except UnicodeEncodeError:                 # "\ud800": valid JSON text, not valid Unicode
        return "(the record)", "a string holds a lone surrogate (\\ud800-\\udfff), which is not Unicode"
    return None


@dataclass
class Record:
    """A record read from disk: its JSON object, where it came from and what its seal says."""
    doc: dict
    path: Path
    seal: SealCheck

    def require_sealed(self, what: str, hint: str) -> dict:
        """The document, or a StudioError saying it is from elsewhere or naming the edited fields."""
        if self.seal.status == "sealed":
            return self.doc
        if self.seal.status == "foreign":
            raise StudioError(f"{what} is from elsewhere: {self.seal.why}; it never counts here", file=str(self.path),
                              field="seal", hint=hint)
        fields = self.seal.fields
        raise StudioError(f"{what} was edited after it was sealed: {', '.join(fields[:6])}"
                          f"{' …' if len(fields) > 6 else ''} changed", file=str(self.path), field=fields[0], hint=hint)


def read_object(path: str | Path, *, what: str, hint: str, max_bytes: int) -> dict:
    """A JSON object, read bounded and strict, whatever its schema."""
    file = str(path)
    doc = parse_json(read_regular(path, max_bytes, what=what, file=file, hint=hint), file, what=what, hint=hint)
    if not isinstance(doc, dict):
        raise StudioError(f"{what} is a JSON {type(doc).__name__}, not an object", file=file, hint=hint)
    return doc


def read_document(path: str | Path, *, schema: str, what: str, hint: str, max_bytes: int, struct=None) -> dict:
    """A JSON object of kind ``schema``, read bounded and strict, its fields checked against
    ``struct``; the seal is not judged (read_record does)."""
    file = str(path)
    doc = read_object(path, what=what, hint=hint, max_bytes=max_bytes)
    if doc.get("schema") != schema:
        raise StudioError(f"{what}: schema is {show(doc.get('schema'))}, not {schema!r}", file=file, field="schema",
                          hint=hint)
    if struct is not None and (p := schema_problem(doc, struct)) is not None:
        raise StudioError(f"{what} is not valid: {p[1]} (at {p[0]})", file=file, field=p[0], hint=hint)
    return doc


def read_record(path: str | Path, seal: Seal, *, schema: str, what: str, hint: str, max_bytes: int,
                struct=None) -> Record:
    """read_document, then the seal judged with ``seal`` (the reader's user folder)."""
    doc = read_document(path, schema=schema, what=what, hint=hint, max_bytes=max_bytes, struct=struct)
    return Record(doc, Path(path), seal.check(doc))
