"""An op's identity, ``namespace/author/name@version`` (docs/package-format.md, the `id` field)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import StudioError

ID_RE = re.compile(r"^(?P<ns>[a-z][a-z0-9_-]*)/(?P<author>[a-z0-9][a-z0-9_.-]*)/(?P<name>[a-z][a-z0-9_]*)@(?P<version>[1-9][0-9]*)$")


@dataclass(frozen=True)
class OpId:
    namespace: str
    author: str
    name: str
    version: int

    @classmethod
    def parse(cls, text: str, *, file: str | None = None, field: str = "id") -> "OpId":
        m = ID_RE.match(text or "")
        if not m:
            raise StudioError(f"bad op id {text!r}", file=file, field=field,
                              hint="write namespace/author/name@version, e.g. user/demo/windowed_median@1")
        return cls(m["ns"], m["author"], m["name"], int(m["version"]))

    @property
    def unversioned(self) -> str:
        return f"{self.namespace}/{self.author}/{self.name}"

    def __str__(self) -> str:
        return f"{self.unversioned}@{self.version}"
