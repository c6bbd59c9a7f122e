"""A builtin's conformance, proven once per run whichever test asks first (the public bar's test in
test_publish.py proves every top-level builtin; the sharding report's tests need six of them): the
verdict, the report's lines and the receipt as conformance made it (unsealed), kept by the package's
content hash in a folder both pytest-xdist workers see. A test that asks writes the receipt into its
own user folder, sealed with that folder's key, where the engine judges it as it judges any receipt
(a receipt for other content is stale there).

The isolation check: each entry is written once with the sha256 of its bytes beside it; an entry
whose bytes no longer match (a test that changed the shared store) fails the next test that reads
it, naming the file."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

from studio.engine.atomic import write_bytes
from studio.engine.proof.conformance import conform, report_lines
from studio.engine.proof.receipts import make_receipt, write_receipt


class StoreChanged(AssertionError):
    pass


def store_folder(base: Path) -> Path:
    """The folder shared by the run's workers: beside each worker's own temporary folder under
    pytest-xdist (``base`` is ``…/popen-gwN``), else in it."""
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "proven-builtins"
    folder.mkdir(exist_ok=True)
    return folder


def read_entry(folder: Path, content_hash: str) -> dict | None:
    path = folder / f"{content_hash}.json"
    if not path.exists():
        return None
    data = path.read_bytes()
    want = (folder / f"{content_hash}.sha256").read_text().strip()
    if hashlib.sha256(data).hexdigest() != want:
        raise StoreChanged(f"{path} was changed after it was written: a test must not change the shared "
                           "proofs (copy what it needs into its own folder)")
    return json.loads(data)


def write_entry(folder: Path, content_hash: str, entry: dict) -> None:
    data = json.dumps(entry, sort_keys=True).encode()
    write_bytes(folder / f"{content_hash}.sha256", hashlib.sha256(data).hexdigest().encode())
    write_bytes(folder / f"{content_hash}.json", data)


def proven(folder: Path, ctx, pkg) -> dict:
    """``{"verdict", "lines", "receipt"}`` for ``pkg``'s content: conformance (its whole corpus, no
    mutants) run here unless a test of this run already ran it; a passing receipt is written into
    ``ctx``'s user folder, sealed there."""
    with open(folder / f"{pkg.hash}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # the other worker waits for a proof in flight
        entry = read_entry(folder, pkg.hash)
        if entry is None:
            rep = conform(ctx, pkg)
            entry = {"verdict": "pass" if rep.ok else "fail", "lines": report_lines(rep),
                     "receipt": make_receipt(pkg, rep) if rep.ok else None}
            write_entry(folder, pkg.hash, entry)
    if entry["verdict"] == "pass":
        write_receipt(pkg, entry["receipt"], ctx.seal)
    return entry
