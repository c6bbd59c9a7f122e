"""The reference results cache's disk limits (studio/engine/trust/results.py): past DISK_BYTES for
one reference hash, and past TOTAL_DISK_BYTES for all of them together, the oldest packs go first
(with their sealed indexes), and what is left is still read back. Real packs written by ``flush``
into a real user folder; the limits are lowered so a few kilobytes cross them."""
import os

import numpy as np

from studio.engine.trust import results

A, B = "a" * 64, "b" * 64


def fill(cache, code: str, n: int, first: int = 0) -> list[str]:
    """n packs of one 4 KiB entry each for ``code``, pack i dated i seconds after the epoch (older
    first, whatever the file system's clock resolution); their keys."""
    keys = []
    for i in range(first, first + n):
        before = set(cache.folder(code).glob("*.npz")) if cache.folder(code).exists() else set()
        key = f"{code[:4]}-{i}"
        cache.put(code, key, np.full(1024, i, np.float32))
        assert cache.flush() == 1
        (pack,) = set(cache.folder(code).glob("*.npz")) - before
        os.utime(pack, ns=(10 ** 9 * (i + 1), 10 ** 9 * (i + 1)))
        keys.append(key)
    return keys


def on_disk(home, keys, code):
    fresh = results.ResultCache(home)                           # another process: the disk only
    return [k for k in keys if fresh.get(code, k) is not None]


def test_one_reference_hash_keeps_its_newest_packs_within_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "DISK_BYTES", 3 * 4096 + 2048)  # room for three packs of one 4 KiB array
    cache = results.ResultCache(tmp_path)
    keys = fill(cache, A, 6)
    assert len(list(cache.folder(A).glob("*.npz"))) == 3 == len(list(cache.folder(A).glob("*.json")))
    assert on_disk(tmp_path, keys, A) == keys[3:]               # the three newest, still readable


def test_all_reference_hashes_together_keep_within_the_total(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "TOTAL_DISK_BYTES", 4 * 4096 + 2048)    # four packs in all
    cache = results.ResultCache(tmp_path)
    old = fill(cache, A, 3)                                     # each hash alone is far under DISK_BYTES
    new = fill(cache, B, 3, first=3)
    assert on_disk(tmp_path, old, A) == old[2:] and on_disk(tmp_path, new, B) == new
    monkeypatch.setattr(results, "TOTAL_DISK_BYTES", 1 << 30)  # control: under the total, nothing goes
    more = fill(cache, A, 2, first=6)
    assert on_disk(tmp_path, old + more, A) == old[2:] + more
