"""Gradcheck remembered by what it depends on (issue 25): it runs on the reference path only (the
author's reference forward and reference VJP, docs/gradients.md), so its report is a function of
the reference hash (trust/code.py), the contract (``op.toml``) and its own settings. A kernel edit —
forward or backward WGSL — changes none of them and gets the remembered report, re-addressed to
the edited package's hash; a reference or contract edit runs it again. Composite ops (whose steps
are other packages) are never remembered. Memory only, per process (the worker's child)."""
from __future__ import annotations

import dataclasses
import hashlib
import json

from ..contract.package import MANIFEST, OpPackage


def gradcheck_key(ctx, pkg: OpPackage, **settings) -> tuple | None:
    if pkg.contract.composite is not None:
        return None
    manifest = hashlib.sha256(pkg.files.get(MANIFEST, b"")).hexdigest()
    return ("gradcheck", ctx.references.code_hash(pkg), manifest, json.dumps(settings, sort_keys=True, default=repr))


def remembered_gradcheck(ctx, pkg: OpPackage, run, **settings):
    """``run(ctx, pkg, params, h=, seed=, tolerance=)``'s report, remembered by gradcheck_key."""
    key = gradcheck_key(ctx, pkg, **settings)
    cache = ctx.references.results
    hit = cache.recall(key) if key is not None else None
    if hit is not None:
        return dataclasses.replace(hit, hash=pkg.hash, op=pkg.id)
    params = settings.pop("params")
    rep = run(ctx, pkg, params, **settings)
    if key is not None:
        cache.remember(key, rep)
    return rep
