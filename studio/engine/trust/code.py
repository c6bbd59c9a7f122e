"""What of a package is code that runs on the CPU: the files its confined reference process
receives. Trust (store.py) and the reference results cache (results.py) are keyed on their hash,
the **reference hash**, never on the whole package: editing a kernel, the bindings, the
tolerance or any other field of ``op.toml`` changes what the device runs, not which Python runs
here, so it keeps trust and every cached reference result.

The rule: every file of the package except the manifest (``op.toml``), WGSL kernels (``*.wgsl``)
and Markdown notes (``*.md``). The reference host is given exactly these files (pool.py's import
snapshot), so nothing it can read lies outside the hash."""
from __future__ import annotations

import hashlib

MANIFEST = "op.toml"
NOT_CODE_SUFFIXES = (".wgsl", ".md")
CODE_HASH_PREFIX = b"scellis-op-code/1\0"


def is_code(rel: str) -> bool:
    """Whether the package file at posix path ``rel`` is part of what the reference may read."""
    return rel != MANIFEST and not rel.lower().endswith(NOT_CODE_SUFFIXES)


def code_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """The package's files that its reference process receives."""
    return {rel: data for rel, data in files.items() if is_code(rel)}


def code_hash(files: dict[str, bytes]) -> str:
    """sha256 over (path, bytes) pairs of the code files in sorted path order, after the fixed
    prefix ``b"scellis-op-code/1\\0"``; each pair is the UTF-8 path, a NUL, the length as 8 bytes
    little-endian, then the bytes (the package hash's framing, package.content_hash)."""
    h = hashlib.sha256(CODE_HASH_PREFIX)
    for rel in sorted(code_files(files)):
        data = files[rel]
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()
