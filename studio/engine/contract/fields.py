"""The op.toml fields the Studio's forms edit, declared once (docs/package-format.md, "op.toml").

Each :class:`Field` says where the value lives in op.toml (its dotted path), its type (one of
``KINDS``: ``text``, ``multiline``, ``choice``, ``text_list``), its domain (choices, length
limits, an extra check), the placeholder and help text a form shows, and the words the field
table of docs/package-format.md shows. Three readers consult ``FIELDS`` and nothing else:

- the validator: ``build_contract`` reads these fields through :func:`read_fields`, so a field
  added here is checked (type, length, choices, its ``check``) and refused by name;
- the Studio: its forms are built from the declaration (studio/app/cells/form.py, a registry
  from a field's kind to a widget);
- the docs: :func:`table_rows` writes the field table's rows, and a test checks the doc has them
  (:func:`doc_problems`; ``python -m studio.engine.contract.fields docs/package-format.md``
  rewrites them).

Fields that need more than one value to check (the tolerance class against its category) are
declared here for their own type and help; the rule between them stays in tolerance.py.
No Qt here: the engine never imports a front end."""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..atomic import write_text
from ..errors import StudioError
from .manifest import Manifest
from .opid import OpId
from .tolerance import CATEGORIES

KINDS = {"text": str, "multiline": str, "choice": str, "text_list": list}   # kind -> its TOML (Python) type
STRING_LIMIT = 100_000          # manifest.Manifest.get's default: any string field not declared shorter
VISIBILITIES = ("private", "workspace", "public")


@dataclass(frozen=True)
class Field:
    path: str                   # dotted path in op.toml: "id", "tolerance.category"
    kind: str                   # a key of KINDS: picks the validator's type and the form's widget
    help: str                   # the form's tooltip, and the docs table's "meaning"
    placeholder: str = ""
    label: str = ""             # the form's row label (default: the path's last part)
    choices: tuple[str, ...] = ()
    required: bool = False
    default: Any = None         # the value when the field is absent (not required)
    when: str = ""              # docs' "required" column when the need is conditional ("for `exact`")
    max_len: int = STRING_LIMIT  # characters: of the string, or of each item of a list
    max_items: int | None = None  # a list's length limit
    item: str = "items"         # what a list's items are called in its refusal ("names")
    domain: str = ""            # the docs' "type" column when richer than the kind ("SPDX expression")
    note: str = ""              # docs only: a reference note after the help text
    check: Callable[[Any, str | None], None] | None = None   # (value, file): raises a StudioError naming it
    form: str = "op"            # which cell's form edits it ("op", "tolerance")

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"field {self.path!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"field {self.path!r}: a choice needs its choices")

    @property
    def name(self) -> str:
        return self.label or self.path.rsplit(".", 1)[-1]

    # ------------------------------------------------------------------ the validator
    def read(self, m: Manifest):
        """The field's value in ``m`` (its default when absent and optional), or a StudioError
        naming the field: missing, mistyped, too long, not one of its choices, refused by ``check``."""
        typ = KINDS[self.kind]
        value = m.get(self.path, typ, required=self.required, default=self.default,
                      max_len=self.max_len if typ is str else STRING_LIMIT)
        if not _present(m, self.path):
            return value                                # absent: the declared default, unchecked
        self.validate(value, m.file)
        return value

    def validate(self, value, file: str | None = None) -> None:
        """The domain checks on a value of the right type (the form may call this on an edit)."""
        if self.kind == "text_list":
            if not all(isinstance(v, str) for v in value):
                raise StudioError(f"{self.path} must be a list of strings", file=file, field=self.path)
            if (self.max_items is not None and len(value) > self.max_items) or any(len(v) > self.max_len
                                                                                   for v in value):
                raise StudioError(f"{self.path}: at most {self.max_items} {self.item} of at most {self.max_len} "
                                  "characters", file=file, field=self.path)
        elif isinstance(value, str) and len(value) > self.max_len:
            raise StudioError(f"field '{self.path}' is {len(value)} characters long (limit {self.max_len})",
                              file=file, field=self.path)
        if self.choices and value not in self.choices:
            raise StudioError(f"{self.path} {value!r} is not one of {', '.join(self.choices)}", file=file,
                              field=self.path, hint=f"write one of {', '.join(self.choices)}")
        if self.check is not None:
            self.check(value, file)

    # ------------------------------------------------------------------ the docs
    def doc_name(self) -> str:
        table, _, key = self.path.rpartition(".")
        return f"`[{table}] {key}`" if table else f"`{key}`"

    def doc_type(self) -> str:
        if self.domain:
            return self.domain
        if self.kind == "choice":
            return " | ".join(f"`{c}`" for c in self.choices)
        if self.kind == "text_list":
            return "list of strings"
        return "string" + (f" (≤ {self.max_len})" if self.max_len < STRING_LIMIT else "")

    def doc_required(self) -> str:
        if self.required:
            return "yes"
        if self.when:
            return self.when
        return "no" + (f" (`{self.default}`)" if self.default not in (None, "", []) else "")

    def doc_row(self) -> str:
        meaning = self.help + (f"; {self.note}" if self.note else "")
        cells = (self.doc_name(), self.doc_type(), self.doc_required(), meaning)
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"     # a pipe in a cell is escaped


def _present(m: Manifest, dotted: str) -> bool:
    """Whether the field is written in ``m`` (Manifest.get has already refused a non-table)."""
    node = m.data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _check_id(value: str, file: str | None) -> None:
    OpId.parse(value, file=file)


FIELDS: tuple[Field, ...] = (
    Field("id", "text", required=True, check=_check_id,
          placeholder="namespace/author/name@version",
          help="the op's identity, namespace/author/name@version (e.g. user/demo/windowed_median@1): "
               "lower-case namespace and name, version a whole number from 1",
          note="builtins use `core/...`. Characters: namespace `[a-z][a-z0-9_-]*`, author `[a-z0-9][a-z0-9_.-]*`, "
               "name `[a-z][a-z0-9_]*`, version `[1-9][0-9]*` (lowercase ASCII only; `opid.py: ID_RE`)"),
    Field("summary", "text", required=True, max_len=400,
          help="one line saying what the op computes; the catalog card shows it"),
    Field("license", "text", max_len=1000, when="to leave `private`", domain="SPDX expression",
          placeholder="SPDX expression, e.g. Apache-2.0 (required to leave private)",
          help="an SPDX license expression: ids joined by AND / OR, parentheses, WITH exceptions "
               "(e.g. Apache-2.0, MIT OR Apache-2.0); required before the visibility leaves private",
          note="checked with `license-expression`"),
    Field("visibility", "choice", choices=VISIBILITIES, default="private",
          help="who may see the op: private (only you, the default), workspace, or public; "
               "leaving private needs a license",
          note="changed by `scellis publish` (docs/publishing.md)"),
    Field("authors", "text_list", default=[], max_items=64, max_len=200, item="names",
          placeholder="comma-separated",
          help="the op's authors, comma-separated (e.g. Ada Lovelace, Scellis Studio)"),
    Field("tolerance.class", "text", required=True, form="tolerance", label="tolerance class",
          domain="`exact` | `ulp(K)` | `ulp(K, fn, ...)` | `bound` | `bound(C)` | `bound(C, fn, ...)`",
          help="the tolerance class the op claims: exact (bit for bit the reference), ulp(K) (within "
               "K units in the last place) or bound(C) (within C times the standard γ·Σ|terms| bound)",
          note="docs/tolerance.md"),
    Field("tolerance.category", "choice", required=True, form="tolerance", label="semantic category",
          choices=tuple(sorted(CATEGORIES)),
          help="what the op does to values: its category decides which tolerance classes it may claim",
          note="generator: no array inputs; normalization: row-wise exp-and-reduce (softmax, layernorm) "
               "(docs/tolerance.md)"),
    Field("tolerance.justification", "multiline", default="", form="tolerance", when="for `exact`",
          placeholder="why no rounding happens (required for exact)",
          help="why the op needs no rounding, in a sentence or two (e.g. it compares and "
               "selects, so each output is one of the inputs): required for exact"),
)


def declared(fields: Iterable[Field] | None = None) -> tuple[Field, ...]:
    """The declaration in force: ``FIELDS`` as it is now (a test may extend it), or ``fields``."""
    return tuple(FIELDS if fields is None else fields)


def form_fields(form: str, fields: Iterable[Field] | None = None) -> tuple[Field, ...]:
    """The declared fields one form edits, in declaration order."""
    return tuple(f for f in declared(fields) if f.form == form)


def field(path: str, fields: Iterable[Field] | None = None) -> Field:
    for f in declared(fields):
        if f.path == path:
            return f
    raise KeyError(path)


def read_fields(m: Manifest, fields: Iterable[Field] | None = None) -> dict[str, Any]:
    """Every declared field's value in ``m``, in declaration order; the first refusal raises,
    naming its field (build_contract's reading of them)."""
    return {f.path: f.read(m) for f in declared(fields)}


# ------------------------------------------------------------------ docs/package-format.md
def table_rows(fields: Iterable[Field] | None = None) -> list[str]:
    """The docs table's row of each declared field (``| field | type | required | meaning |``)."""
    return [f.doc_row() for f in declared(fields)]


def _row_name(line: str) -> str | None:
    if not line.startswith("| `"):
        return None
    return line[2:].split(" | ", 1)[0].strip()


def doc_problems(text: str, fields: Iterable[Field] | None = None) -> list[str]:
    """Where the doc's field table differs from the declaration: a declared field with no row,
    or a row that is not the one the declaration writes (each named by its field)."""
    rows = {_row_name(line): line for line in text.splitlines() if _row_name(line)}
    out = []
    for f in declared(fields):
        have = rows.get(f.doc_name())
        if have is None:
            out.append(f"{f.path}: no row in the field table")
        elif have != f.doc_row():
            out.append(f"{f.path}: the row differs from the declaration:\n  doc:  {have}\n  want: {f.doc_row()}")
    return out


def update_doc(text: str, fields: Iterable[Field] | None = None) -> str:
    """``text`` with each declared field's row as the declaration writes it: rows replaced in
    place, a missing one inserted after the row of the field declared before it."""
    lines = text.split("\n")
    previous = None
    for f in declared(fields):
        names = [_row_name(line) for line in lines]
        if f.doc_name() in names:
            lines[names.index(f.doc_name())] = f.doc_row()
        elif previous is not None and previous in names:
            lines.insert(names.index(previous) + 1, f.doc_row())
        else:
            raise ValueError(f"{f.path}: no row to replace and no declared field before it in the table")
        previous = f.doc_name()
    return "\n".join(lines)


if __name__ == "__main__":          # python -m studio.engine.contract.fields docs/package-format.md
    for arg in sys.argv[1:]:
        with open(arg, encoding="utf-8") as doc:
            write_text(arg, update_doc(doc.read()))
