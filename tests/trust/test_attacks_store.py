"""The trust store's lock under attack, as seen: an orphan that holds
``$SCELLIS_HOME/.trust.lock`` made `scellis trust` hang until it was killed. Now a writer waits
a bounded time and names the holder; a lock whose holder died never blocks (the kernel drops it)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from studio.engine.errors import StudioError
from studio.engine.trust.store import TrustStore

HOLD = ("import fcntl, sys, time\n"
        "f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
        "print('held', flush=True); time.sleep(120)\n")


def _hold(path):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_held_lock_is_named_not_waited_on_for_ever(_isolated_home):
    store = TrustStore(_isolated_home)
    store.lock_wait_s = 0.5
    holder = _hold(_isolated_home / ".trust.lock")
    try:
        t0 = time.monotonic()
        with pytest.raises(StudioError) as info:
            store.trust_content(None, "ab" * 32, op="x")
        assert time.monotonic() - t0 < 10
        assert f"process {holder.pid}" in info.value.message and "not released" in info.value.message
        assert info.value.file.endswith(".trust.lock")
    finally:
        holder.kill()
        holder.wait()
    # its holder is gone: the lock is gone with it, and trust goes on at once
    assert store.trust_content(None, "ab" * 32, op="x").level == "trusted"


def test_a_lock_left_by_a_killed_process_never_blocks(_isolated_home):
    holder = _hold(_isolated_home / ".trust.lock")
    holder.kill()
    holder.wait()
    store = TrustStore(_isolated_home)
    store.lock_wait_s = 0.5
    assert store.trust_content(None, "cd" * 32, op="y").ok
