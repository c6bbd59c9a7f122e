"""SPDX license expressions, validated with ``license-expression`` against the SPDX list it ships.

Nothing leaves ``private`` without one (docs/publishing.md). An expression may combine ids with
``AND``, ``OR``, parentheses and ``WITH`` exceptions. Every id is checked against the list: an
unknown id is named with the closest listed one, a deprecated id (``GPL-2.0``, ``wxWindows``) is
named with the id that replaces it, and ``LicenseRef-...``, ``NONE`` and ``NOASSERTION`` are not
licenses a colleague can read the terms of. Every problem of an expression is reported at once.
The license list is read once per ``Licenses`` object (no module state)."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from ..errors import StudioError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_OPERATORS = {"and", "or", "with"}
# SPDX's own replacements for deprecated ids that the list keeps as primary keys
_REPLACED = {
    "wxwindows": "LGPL-2.0-or-later WITH WxWindows-exception-3.1",
    "ecos-2.0": "GPL-2.0-or-later WITH eCos-exception-2.0",
    "gpl-2.0-with-autoconf-exception": "GPL-2.0-only WITH Autoconf-exception-2.0",
    "gpl-2.0-with-classpath-exception": "GPL-2.0-only WITH Classpath-exception-2.0",
    "gpl-2.0-with-font-exception": "GPL-2.0-only WITH Font-exception-2.0",
    "gpl-2.0-with-gcc-exception": "GPL-2.0-only WITH GCC-exception-2.0",
    "gpl-3.0-with-autoconf-exception": "GPL-3.0-only WITH Autoconf-exception-3.0",
    "gpl-3.0-with-gcc-exception": "GPL-3.0-only WITH GCC-exception-3.1",
}


@dataclass(frozen=True)
class LicenseProblem:
    token: str | None      # the id at fault (None: the expression's structure)
    col: int | None        # 1-based column in the expression
    message: str
    suggestion: str | None = None

    def __str__(self) -> str:
        where = f" (column {self.col})" if self.col else ""
        return self.message + where + (f"; did you mean {self.suggestion}?" if self.suggestion else "")


@dataclass(frozen=True)
class LicenseCheck:
    expression: str
    normalized: str | None
    problems: list[LicenseProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.normalized is not None

    def summary(self) -> str:
        return "valid SPDX expression" if self.ok else "; ".join(map(str, self.problems))


class Licenses:
    """The SPDX list as ``license-expression`` ships it: ids, exceptions, deprecated aliases."""

    def __init__(self):
        import license_expression as le
        self._le = le
        self.licensing = le.get_spdx_licensing()
        self.ids: dict[str, str] = {}          # lower -> canonical, listed licenses
        self.exceptions: dict[str, str] = {}   # lower -> canonical, listed exceptions
        self.aliases: dict[str, str] = {}      # lower deprecated alias -> current id
        self.deprecated: set[str] = set()      # lower ids the list marks deprecated
        for lic in le.get_license_index():
            key = lic.get("spdx_license_key")
            if not key or key.startswith("LicenseRef-"):
                continue
            (self.exceptions if lic.get("is_exception") else self.ids)[key.lower()] = key
            if lic.get("is_deprecated"):
                self.deprecated.add(key.lower())
            for alias in lic.get("other_spdx_license_keys") or []:
                if alias and not alias.startswith("LicenseRef-") and " " not in alias:
                    self.aliases.setdefault(alias.lower(), key)
        for alias in list(self.aliases):
            if alias in self.ids or alias in self.exceptions:
                del self.aliases[alias]

    def check(self, expression: str | None) -> LicenseCheck:
        text = (expression or "").strip()
        if not text:
            return LicenseCheck(text, None, [LicenseProblem(None, None, "no license expression (e.g. Apache-2.0, "
                                                                        "MIT, BSD-3-Clause)")])
        problems = self._ids(text)
        normalized = None
        try:
            normalized = str(self.licensing.parse(text, validate=True, strict=True))
        except Exception as e:         # noqa: BLE001 (the library raises several types, AttributeError on 'MIT OR' too)
            if not problems:           # an id problem explains the parse failure already
                problems.append(LicenseProblem(None, _col(getattr(e, "position", None)),
                                               f"not a valid SPDX expression: {_parse_message(e)} (join ids "
                                               "with AND / OR, an exception with WITH, e.g. "
                                               "GPL-2.0-or-later WITH Classpath-exception-2.0)"))
        return LicenseCheck(text, normalized if not problems else None, problems)

    def _ids(self, text: str) -> list[LicenseProblem]:
        out, after_with = [], False
        for m in _TOKEN.finditer(text):
            tok, col = m.group(), m.start() + 1
            low = tok.lower()
            if tok in "()":
                continue
            if low in _OPERATORS:
                after_with = low == "with"
                continue
            out += self._id(tok, col, exception=after_with)
            after_with = False
        return out

    def _id(self, tok: str, col: int, *, exception: bool) -> list[LicenseProblem]:
        low = tok.lower()
        plus = low.endswith("+") and low[:-1] in self.ids
        if low in ("none", "noassertion"):
            return [LicenseProblem(tok, col, f"{tok} is not a license: it grants nobody anything",
                                   "Apache-2.0")]
        if low.startswith("licenseref-") or low.startswith("documentref-"):
            return [LicenseProblem(tok, col, f"{tok} names a license outside the SPDX list, whose terms a "
                                             "colleague cannot look up")]
        table, other = (self.exceptions, self.ids) if exception else (self.ids, self.exceptions)
        if low in table and low not in self.deprecated:
            return []
        if low in self.deprecated:
            return [LicenseProblem(tok, col, f"{tok} is a deprecated SPDX id", _REPLACED.get(low))]
        if low in self.aliases or plus:
            new = self.aliases.get(low) or f"{self.ids[low[:-1]]}-or-later"
            return [LicenseProblem(tok, col, f"{tok} is a deprecated SPDX id", new)]
        if low in other:
            what = ("a license, not an exception: only an exception may follow WITH" if exception
                    else "an exception: it may only follow WITH, as in GPL-2.0-or-later WITH " + other[low])
            return [LicenseProblem(tok, col, f"{other[low]} is {what}")]
        return [LicenseProblem(tok, col, f"{tok} is not an SPDX {'exception' if exception else 'license'} id",
                               self._closest(low, exception))]

    def _closest(self, low: str, exception: bool) -> str | None:
        table = self.exceptions if exception else self.ids
        near = difflib.get_close_matches(low, list(table), n=1, cutoff=0.5)
        return table[near[0]] if near else None


def _col(pos) -> int | None:
    return pos + 1 if isinstance(pos, int) and pos >= 0 else None


def _parse_message(e: Exception) -> str:
    msg = str(e) or type(e).__name__
    return msg.split(" for token:")[0].strip() or "cannot parse it"


def require_license(licenses: Licenses, expression: str | None, *, file: str | None = None,
                    line: int | None = None, col: int | None = None, why: str = "to leave private") -> LicenseCheck:
    """The check, or a StudioError at the ``license`` field naming every problem at once."""
    rep = licenses.check(expression)
    if rep.ok:
        return rep
    lines = "\n".join(f"  - {p}" for p in rep.problems)
    raise StudioError(f"license {expression!r} is not a valid SPDX license expression ({why}):\n{lines}"
                      if expression else f"no license: an op needs an SPDX license expression {why}",
                      file=file, field="license", line=line, col=col,
                      hint="set one: --license Apache-2.0 (or license = \"Apache-2.0\" in op.toml); "
                           "the SPDX list is at https://spdx.org/licenses/")
