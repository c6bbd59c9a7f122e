"""Crash-safe writes: temp file in the same folder, fsync, rename, fsync the folder."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_UMASK


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    write_many({path: data})


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_many(items: dict[str | os.PathLike, bytes]) -> None:
    """Write several files with the least window of a mixed state: every file is first written
    to a temp file beside its target and fsynced, then all are renamed in one quick pass, then
    the folders are fsynced. Each file is always one complete version; a crash in the rename
    pass (microseconds) can leave some files new and some old, never a torn file."""
    staged: list[tuple[str, Path]] = []
    current = None
    try:
        for path, data in items.items():
            path = current = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            os.fchmod(fd, _mode(path))          # mkstemp makes 0600; keep the file's or the umask's mode
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException as e:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if isinstance(e, OSError) and e.filename is None and current is not None:
            e.filename = str(current)        # a full disk names the file it was writing
        raise
    for folder in sorted({str(p.parent) for _, p in staged}):
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
