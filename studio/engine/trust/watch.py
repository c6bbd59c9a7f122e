"""What the engine keeps watching of a running reference host (studio/engine/trust/pool.py starts
them): the limits a host cannot be trusted to keep itself, and what it writes.

- ``Watch``: a thread per host that, every 0.1 s while the host lives, counts its threads
  (``RLIMIT_NPROC`` does not bind root, who runs CI, and counts every process of the user, so the
  engine counts the host's own), its CPU time while a call is in flight (the host cannot set limits
  under its filter), and — where its temporary folder is not a capped tmpfs
  (studio/engine/trust/namespaces.py) — the bytes and files in that folder. Past a limit it kills
  the host and keeps one line naming the limit and by how much; the same check runs when each call
  returns, so a call that crossed a limit fails, even between two ticks.
- ``Output``: the host's stderr (where a ``print`` in a reference also goes) is a pipe the engine
  drains; the last ``keep`` bytes are kept, the rest dropped with a note, and only ever shown
  through ``printable``: control characters (terminal escapes, ``\\r``, bidirectional overrides)
  escaped, one line.
"""
from __future__ import annotations

import os
import stat
import threading

TICK_S = 0.1
OUTPUT_KEEP = 64 << 10               # bytes of a host's output kept (the last ones)


def printable(text: str | bytes, limit: int | None = None) -> str:
    """``text`` as one line safe to show on a terminal: every character that is not printable
    (C0 and C1 controls, DEL, escape sequences' ESC, ``\\r``, ``\\n``, bidirectional and other format
    characters) as its backslash escape. ``limit``: keep the last ``limit`` characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "backslashreplace")
    if limit is not None and len(text) > limit:
        text = "…" + text[-limit:]
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


class Output:
    """Drains a host's output pipe on a thread of its own (a host blocked on a full pipe would hang),
    keeping the last ``keep`` bytes."""

    def __init__(self, pipe, keep: int = OUTPUT_KEEP):
        self.pipe, self.keep = pipe, keep
        self.data = bytearray()
        self.dropped = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="scellis-host-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        """Read until end of file, then close the pipe (here, not by its owner: a descriptor closed
        under a blocked read could be reused, and this thread would read someone else's pipe)."""
        fd = self.pipe.fileno()
        try:
            while chunk := os.read(fd, 1 << 16):
                with self._lock:
                    self.data += chunk
                    over = len(self.data) - self.keep
                    if over > 0:
                        del self.data[:over]
                        self.dropped += over
        except OSError:
            pass
        finally:
            self.pipe.close()

    def text(self, limit: int | None = None) -> str:
        """What the host wrote (its last bytes), escaped; with a note of what was dropped."""
        with self._lock:
            data, dropped = bytes(self.data), self.dropped
        note = f"[{dropped} earlier bytes dropped] " if dropped else ""
        return note + printable(data, limit) if data else ""

    def join(self, timeout: float = 1.0) -> None:
        self._thread.join(timeout)


def temp_usage(folder: str, max_files: int) -> tuple[int, int]:
    """(bytes on disk, entries) beneath ``folder``; the walk stops once more than ``max_files``
    entries were seen (the count then says so)."""
    used, seen, todo = 0, 0, [folder]
    while todo and seen <= max_files:
        try:
            with os.scandir(todo.pop()) as it:
                for e in it:
                    seen += 1
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    used += st.st_blocks * 512
                    if stat.S_ISDIR(st.st_mode):
                        todo.append(e.path)
                    if seen > max_files:
                        break
        except OSError:
            continue
    return used, seen


class Watch:
    """The engine's watch over one host process (see the module's docstring). ``call_cpu``: the
    host's CPU seconds when the call in flight began (None between calls); ``reason``: why the
    watch stopped the host, once it did."""

    def __init__(self, proc, limits, tmp: str, walk_temp: bool):
        self.proc, self.limits, self.tmp, self.walk_temp = proc, limits, tmp, walk_temp
        self.call_cpu: float | None = None
        self.reason: str | None = None
        self._ps = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"scellis-host-watch-{self.proc.pid}",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(TICK_S) and self.proc.poll() is None:
            if self.check():
                return

    def _process(self):
        import psutil
        if self._ps is None:
            self._ps = psutil.Process(self.proc.pid)
        return self._ps

    def cpu_seconds(self) -> float | None:
        import psutil
        try:
            t = self._process().cpu_times()
        except (psutil.Error, OSError):
            return None
        return t.user + t.system

    def over(self, cpu: bool = True) -> str | None:
        """The limit the host is past now, in words, or None (``cpu=False``: not its CPU time)."""
        import psutil
        lim = self.limits
        try:
            n = self._process().num_threads()
        except (psutil.Error, OSError):
            n = 0
        if n > lim.threads:
            return f"was stopped: it ran {n} threads, over its limit of {lim.threads}; the reference process was ended"
        start = self.call_cpu if cpu else None
        if start is not None:
            used = self.cpu_seconds()
            if used is not None and used - start > lim.cpu_s + 1:
                return (f"was stopped: it used more than its CPU time ({lim.cpu_s} s per call); "
                        f"the reference process was ended")
        if self.walk_temp:
            used, files = temp_usage(self.tmp, lim.temp_files)
            if files > lim.temp_files:
                return (f"was stopped: its temporary folder held more than {lim.temp_files} files, its limit; "
                        f"the reference process was ended")
            if used > lim.temp_bytes:
                return (f"was stopped: its temporary folder held {used / 2**20:.1f} MiB, over its limit of "
                        f"{lim.temp_bytes / 2**20:g} MiB in total; the reference process was ended")
        return None

    def check(self, cpu: bool = True) -> bool:
        """Kill the host if it is past a limit (and keep why); True when it was. ``cpu=False``: when
        a call has returned (its CPU time is the watch thread's to judge while it runs)."""
        with self._lock:
            if self.reason is not None:
                return True
            if self.proc.poll() is not None:
                return False
            why = self.over(cpu)
            if why is None:
                return False
            self.reason = why
            self.proc.kill()
            return True
