"""What of a package is code that runs on the CPU: the files its confined reference process
receives, and which of them is run. Trust (store.py) and the reference results cache (results.py)
are keyed on their hash, the **reference hash**, never on the whole package: editing a kernel, the
bindings, the tolerance or any other field of ``op.toml`` outside ``[reference]`` changes what the
device runs, not which Python runs here, so it keeps trust and every cached reference result.

The rule: every file of the package except the manifest (``op.toml``), WGSL kernels (``*.wgsl``)
and Markdown notes (``*.md``) — so every Python file the reference can import, and every data file
it can read. The reference host is given exactly these files (pool.py's import snapshot), so
nothing it can read lies outside the hash. Then the reference file by path and content (a ``.py``
file of the package, contract.py; framed again, so no file outside the rule above can ever be the
code that runs under a hash that does not hold it) and the ``[reference]`` table of ``op.toml``
(which file, which function, in which precision)."""
from __future__ import annotations

import hashlib
import json

MANIFEST = "op.toml"
NOT_CODE_SUFFIXES = (".wgsl", ".md")
CODE_HASH_PREFIX = b"scellis-op-code/2\0"
DEFAULT_REFERENCE = {"file": "reference.py", "forward": "forward", "precision": "f64"}   # contract.py's defaults


def is_code(rel: str) -> bool:
    """Whether the package file at posix path ``rel`` is part of what the reference may read."""
    return rel != MANIFEST and not rel.lower().endswith(NOT_CODE_SUFFIXES)


def code_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """The package's files that its reference process receives."""
    return {rel: data for rel, data in files.items() if is_code(rel)}


def reference_table(manifest: bytes | None) -> dict | None:
    """The ``[reference]`` table of ``op.toml`` with contract.py's defaults filled in; None when the
    manifest does not parse (a draft: its reference cannot run, so nothing is admitted by it)."""
    from ..contract.manifest import read_manifest
    from ..errors import StudioError
    try:
        data = read_manifest(manifest or b"", MANIFEST).data
    except StudioError:
        return None
    table = data.get("reference", {})
    return {**DEFAULT_REFERENCE, **table} if isinstance(table, dict) else {"not a table": repr(table)[:200]}


def _frame(h, rel: str, data: bytes) -> None:
    h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "little") + data)


def code_hash(files: dict[str, bytes]) -> str:
    """sha256, after the fixed prefix ``b"scellis-op-code/2\\0"``, over (path, bytes) pairs of the code
    files in sorted path order — each pair the UTF-8 path, a NUL, the length as 8 bytes
    little-endian, then the bytes (the package hash's framing, package.content_hash) — then
    ``reference\\0`` and the ``[reference]`` table as sorted JSON, framed the same way under its
    path ``[reference]``, then the reference file named there, framed (empty when absent)."""
    h = hashlib.sha256(CODE_HASH_PREFIX)
    for rel in sorted(code_files(files)):
        _frame(h, rel, files[rel])
    table = reference_table(files.get(MANIFEST))
    h.update(b"reference\0")
    _frame(h, "[reference]", json.dumps(table, sort_keys=True, default=str).encode())
    ref = table.get("file") if isinstance(table, dict) else None
    if isinstance(ref, str):
        _frame(h, ref, files.get(ref, b""))
    return h.hexdigest()
