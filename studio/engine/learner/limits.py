"""What a learner file may ask of this machine, judged before anything is allocated or started
(docs/security.md): the size of its files, k, s and m against the memory available, and the
number of owners against the workers a run may start (one Dask worker process per owner)."""
from __future__ import annotations

import os

from ..arrays import MAX_ARRAY_BYTES, available_memory  # the one measure (a workflow's too)

MAX_LEARNER_BYTES = 1 << 20          # a learner.toml is a page of settings
MAX_WIDTH = 1 << 24                  # k, s, m: words per parameter vector, sample, state (64 MiB of f32 each)
MAX_OWNERS = 4096                    # whatever the cluster: more owners than this is a mistake
OWNERS_HINT = "fewer owners (each is one Dask worker process), or --max-owners N to allow more (e.g. on a cluster)"


def default_max_owners() -> int:
    """The owners a local run starts at most: two worker processes per CPU core, at least 8."""
    return max(8, 2 * (os.cpu_count() or 1))


def fits_memory(f, k: int, s: int, m: int) -> None:
    """k, s and m against the memory available (``f``: the file's Fields, for line:col): the owners'
    replicas, frames and sums hold some tens of copies of those vectors."""
    need = 32 * 4 * (2 * k + s + m + 1)
    have = available_memory()
    if need > have:
        key = max(("k", k), ("s", s), ("m", m), key=lambda kv: kv[1])[0]
        raise f.error(("learner", key), f"k = {k}, s = {s}, m = {m} need about {need >> 20} MiB for the learner's "
                                        f"vectors; this machine has {have >> 20} MiB available",
                      hint="declare smaller vectors, or run on a machine with more memory")


def samples_limit() -> int:
    """The most bytes one learner array (the samples, an assignment) may take: a quarter of the
    memory available, and never more than any input may (arrays.MAX_ARRAY_BYTES)."""
    return min(MAX_ARRAY_BYTES, available_memory() // 4)


def check_owners(f, path: tuple[str, ...], n: int, max_owners: int | None, what: str) -> None:
    """``n`` owners against the cap: ``max_owners`` (the workers this run may start) or MAX_OWNERS."""
    cap = min(max_owners, MAX_OWNERS) if max_owners else MAX_OWNERS
    if n > cap:
        why = " (the worker processes this run may start: --max-owners)" if max_owners else ""
        raise f.error(path, f"{what}, over the {cap} this run may start{why}", hint=OWNERS_HINT)
