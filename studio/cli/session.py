"""What a `scellis` command opens: this process's context (the catalog with --ops-path, the user's
trust store) and the device worker. Device work never runs in this process: it runs in the worker,
which has its own context."""
from __future__ import annotations

import sys

from ..engine.context import Context


def context(args) -> Context:
    return Context.open(ops_path(args))


def ops_path(args) -> list[str]:
    return list(getattr(args, "ops_path", None) or [])


def worker_for(target: str, budget_s: float):
    """The device worker for a request about ``target``. A package named by its path (a folder with
    op.toml, or op.toml itself) is loaded here first, as the worker will load it: a malformed one is
    refused before a worker starts (an error in milliseconds, not after a process and a device). An
    op id is looked up in the worker, once, as before."""
    from pathlib import Path

    from ..engine.contract.package import MANIFEST, load_package
    p = Path(target)
    if (p / MANIFEST).is_file() or p.name == MANIFEST:
        load_package(p)
    return worker(budget_s)


def worker(budget_s: float):
    """The device worker: a kernel that never finishes is killed at its budget and reported
    (exit 2), never a hung terminal (docs/reliability.md). Its requests: the engine's request
    table (studio/engine/services/requests.py)."""
    from ..engine.worker.client import WorkerClient
    return WorkerClient(budget_s=budget_s)


def console():
    from rich.console import Console
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def with_progress(worker, kind: str, what: str, *, quiet: bool, **kw):
    """One request to the device worker, with a progress bar on a terminal (none with ``quiet``,
    e.g. --json, or when stderr is not a terminal)."""
    if quiet or not sys.stderr.isatty():
        return worker.call(kind, **kw)
    from rich.progress import Progress
    with Progress(transient=True) as bar:
        task = bar.add_task(what, total=None)
        return worker.call(kind, progress=lambda done, total: bar.update(task, completed=done, total=total), **kw)
