"""The one error type users see: where (file, line, column or field), what, and what to do."""
from __future__ import annotations


class StudioError(Exception):
    """A user-facing error. Never shown as a traceback.

    file/line/col locate the problem in the user's text (1-based); field names a
    manifest field when there is no text position; hint says what to do.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 col: int | None = None, field: str | None = None, hint: str | None = None,
                 related: list["StudioError"] | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.field = field
        self.hint = hint
        self.related = list(related or [])

    def where(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        loc = ":".join(parts)
        if self.field:
            loc += f" [{self.field}]"
        return loc

    def format(self) -> str:
        out = [f"{self.where()}: {self.message}"]
        for r in self.related:
            out.append(f"  {r.where()}: {r.message}")
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return "\n".join(out)

    def __str__(self) -> str:  # keeps str(e) informative in logs and tests
        return self.format()

    def shifted(self, file: str | None = None, line: int = 1, col: int = 1) -> "StudioError":
        """Re-anchor a position computed inside an embedded text (line/col are 1-based
        offsets of the text's first character in the enclosing file)."""
        if self.line is not None:
            if self.line == 1 and self.col is not None:
                self.col += col - 1
            self.line += line - 1
        if file is not None:
            self.file = file
        return self

    def to_dict(self) -> dict:
        """Every field, for JSON and for crossing a process boundary (the worker, reports)."""
        return {"message": self.message, "file": self.file, "line": self.line, "col": self.col, "field": self.field,
                "hint": self.hint, "related": [r.to_dict() for r in self.related]}

    @classmethod
    def from_dict(cls, d: dict) -> "StudioError":
        return cls(d["message"], file=d.get("file"), line=d.get("line"), col=d.get("col"), field=d.get("field"),
                   hint=d.get("hint"), related=[StudioError.from_dict(r) for r in d.get("related", [])])


def from_os_error(e: OSError, *, file: str | None = None, doing: str = "cannot write it") -> StudioError:
    """An OSError the filesystem raised (a full disk, a read-only folder, a missing permission) as
    one line: the file, what failed, the errno by name, and what to do. Never "this is a bug"."""
    import errno
    name = errno.errorcode.get(e.errno or 0)
    what = (e.strerror or str(e)) + (f" ({name})" if name else "")
    full = e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)
    todo = "free some space there, or write elsewhere" if full else "check the path and its permissions"
    where = e.filename if e.filename is not None else file
    return StudioError(f"{doing}: {what}; {todo}", file=str(where) if where is not None else None)
