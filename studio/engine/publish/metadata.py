"""The publishing fields of an op, read from its op.toml (docs/publishing.md): description,
version, examples and lineage (``forked_from``), beside the contract's license, visibility and
authors. Read here, from the package's hashed bytes, so the contract and every op that loads
today stay as they are; a malformed field is reported by the field, never a traceback.

The description is ``description`` in op.toml, else the reference's module docstring (read
with ``ast``: nothing of the reference runs). The version is the id's ``@N``; a ``version``
field, when given, must say the same."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

import numpy as np

from ..arrays import check_input
from ..contract.domains import check_values
from ..contract.manifest import read_manifest
from ..contract.package import MANIFEST, OpPackage, sha256
from ..errors import StudioError

MAX_EXAMPLES = 16
MAX_EXAMPLE_VALUES = 4096


@dataclass(frozen=True)
class Example:
    note: str
    inputs: dict        # name -> nested list of numbers
    params: dict        # name -> number


@dataclass(frozen=True)
class Lineage:
    id: str
    hash: str


@dataclass
class PublishFields:
    description: str
    description_from: str            # "op.toml" | "reference docstring" | ""
    version: int
    examples: list[Example] = field(default_factory=list)
    forked_from: Lineage | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)   # (field, why) found while reading


def read_fields(pkg: OpPackage) -> PublishFields:
    m = read_manifest(pkg.files[MANIFEST], pkg.manifest_path)
    data, problems = m.data, []
    desc, source = data.get("description"), "op.toml"
    if desc is not None and not isinstance(desc, str):
        problems.append(("description", f"must be a string, not {type(desc).__name__}"))
        desc = None
    if not (desc or "").strip():
        desc, source = _docstring(pkg), "reference docstring"
    if not (desc or "").strip():
        desc, source = "", ""
    version = pkg.contract.id.version
    given = data.get("version")
    if given is not None and str(given) != str(version):
        problems.append(("version", f"version = {given!r} but the id {pkg.id} says @{version}"))
    examples = _examples(pkg, data.get("examples"), problems)
    return PublishFields(desc.strip(), source, version, examples, _lineage(data.get("forked_from"), problems),
                         problems)


def _docstring(pkg: OpPackage) -> str | None:
    try:
        return ast.get_docstring(ast.parse(pkg.reference_source)) or None
    except (SyntaxError, ValueError):
        return None


def _lineage(raw, problems) -> Lineage | None:
    if raw is None:
        return None
    if not (isinstance(raw, dict) and isinstance(raw.get("id"), str) and isinstance(raw.get("hash"), str)
            and len(raw["hash"]) == 64 and all(c in "0123456789abcdef" for c in raw["hash"])):
        problems.append(("forked_from", "must be { id = \"ns/author/name@N\", hash = \"<64 hex>\" }"))
        return None
    return Lineage(raw["id"], raw["hash"])


def _examples(pkg: OpPackage, raw, problems) -> list[Example]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        problems.append(("examples", "must be a list of tables ([[examples]] with inputs = {...}, params = {...})"))
        return []
    out = []
    for k, e in enumerate(raw[:MAX_EXAMPLES]):
        where = f"examples[{k}]"
        try:
            out.append(_example(pkg, e, where))
        except StudioError as err:
            problems.append((err.field or where, err.message))
    if len(raw) > MAX_EXAMPLES:
        problems.append(("examples", f"{len(raw)} examples (at most {MAX_EXAMPLES})"))
    return out


def _example(pkg: OpPackage, e: dict, where: str) -> Example:
    sig = pkg.contract.signature
    inputs, params, note = e.get("inputs", {}), e.get("params", {}), e.get("note", "")
    if not isinstance(inputs, dict) or not isinstance(params, dict) or not isinstance(note, str):
        raise StudioError(f"{where}: inputs and params must be tables, note a string", field=where)
    arrays = {}
    for name, values in inputs.items():
        try:
            a = np.asarray(values)
            if a.dtype.kind not in "iuf" or a.dtype == np.bool_:
                raise TypeError
        except (TypeError, ValueError):
            raise StudioError(f"{where}: input {name} is not an array of numbers", field=f"{where}.inputs.{name}") \
                from None
        if a.size > MAX_EXAMPLE_VALUES:
            raise StudioError(f"{where}: input {name} has {a.size} values (at most {MAX_EXAMPLE_VALUES})",
                              field=f"{where}.inputs.{name}")
        arrays[name] = a
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in params.values()):
        raise StudioError(f"{where}: params must be numbers", field=f"{where}.params")
    try:
        sig.resolve({n: a.shape for n, a in arrays.items()}, params)
        for t in sig.inputs:
            check_input(arrays[t.name], t)
        check_values(sig, arrays, params)          # an index outside its range, a broken CSR row pointer
    except StudioError as err:
        raise StudioError(f"{where} does not fit the signature: {err.message}",
                          field=f"{where}.{'inputs' if err.field in arrays else 'params'}") from None
    return Example(note, {n: a.tolist() for n, a in arrays.items()}, dict(params))


def part_digests(pkg: OpPackage) -> dict[str, str]:
    """sha256 of every content file, by posix relative path: what a ring's index records."""
    return {rel: sha256(data) for rel, data in sorted(pkg.files.items())}
