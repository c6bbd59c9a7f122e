"""Autosave and crash recovery. Every dirty document — untitled ones included — is written to
``<home>/autosave/<doc id>.json`` (temp, fsync, rename) a moment after each edit. A clean close
removes it. Entries left by a process that is no longer running are what a crash left behind:
the next start offers to restore them.
"""
from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ...engine.atomic import write_text
from .paths import autosave_dir

SCHEMA = "scellis-autosave/1"


def _start_time(pid: int) -> str | None:
    """The process's start time (psutil), so a recycled pid is not mistaken for a live owner."""
    import psutil
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except (psutil.Error, OSError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    import psutil
    if pid <= 0 or not psutil.pid_exists(pid):
        return False
    now = _start_time(pid)
    return started is None or now is None or now == started


@dataclass
class Entry:
    path: Path                 # the autosave file
    doc_id: str
    title: str
    package: str | None        # the package folder the document belongs to, if saved once
    saved_at: float
    files: dict[str, str]
    binary: dict[str, bytes]


class AutosaveStore:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else autosave_dir()
        self.pid = os.getpid()
        self.started = _start_time(self.pid)

    def file(self, doc_id: str) -> Path:
        return self.root / f"{doc_id}.json"

    def state(self, doc) -> dict:
        """What to write for ``doc`` (taken on the GUI thread; written by ``write`` anywhere)."""
        return {"schema": SCHEMA, "doc_id": doc.doc_id, "title": doc.title,
                "package": str(doc.path) if doc.path else None, "pid": self.pid, "started": self.started,
                "saved_at": time.time(), "files": doc.files(),
                "binary": {k: base64.b64encode(v).decode() for k, v in doc.binary.items()}}

    def write(self, state: dict) -> Path:
        p = self.file(state["doc_id"])
        write_text(p, json.dumps(state, indent=1, sort_keys=True))
        return p

    def discard(self, doc_id: str) -> None:
        try:
            self.file(doc_id).unlink()
        except FileNotFoundError:
            pass

    def _read(self, p: Path) -> tuple[dict, Entry] | None:
        try:
            d = json.loads(p.read_text("utf-8"))
            if d.get("schema") != SCHEMA:
                return None
            return d, Entry(p, d["doc_id"], d.get("title", p.stem), d.get("package"), float(d.get("saved_at", 0)),
                            {str(k): str(v) for k, v in d["files"].items()},
                            {k: base64.b64decode(v) for k, v in d.get("binary", {}).items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def orphans(self) -> list[Entry]:
        """Autosaves whose Studio is gone (it crashed or was killed), newest first."""
        out = []
        for p in sorted(self.root.glob("*.json")) if self.root.is_dir() else []:
            got = self._read(p)
            if got is None:
                continue
            d, entry = got
            if d.get("pid") == self.pid and d.get("started") == self.started:
                continue
            if _alive(int(d.get("pid", -1)), d.get("started")):
                continue
            out.append(entry)
        return sorted(out, key=lambda e: e.saved_at, reverse=True)

    def set_aside(self, entry: Entry) -> Path:
        """Keep a declined recovery out of the way instead of deleting anyone's work."""
        dest = self.root / "declined" / entry.path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(entry.path, dest)
        return dest
