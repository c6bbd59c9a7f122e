"""Tuning, proof first: every candidate of a package's tunable overrides (``tune [..]`` in its
binding descriptor: studio/engine/contract/tunables.py) is the same package with the override's
value replaced — a contract-level variant, so conformance and the one executor run it unchanged.
Each candidate first runs the whole conformance corpus (the same corpus for all: same seed, same
sizes); a candidate that fails is kept in the report with its first failing case and is never
timed, never chosen. The survivors are timed on representative sizes (the corpus's swept symbol at
each size, median of ``repeats`` whole calls after one warm-up, the calls going round-robin over
the candidates so that a shared machine's load falls on all alike), and the fastest total wins.

The record of the result (sealed, per package content and GPU profile) is the service's job:
studio/engine/services/tuning.py."""
from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from ..context import Context
from ..contract.package import OpPackage
from ..contract.tunables import declared, tunables, variant
from ..device.execution import Case, run_cases
from ..errors import StudioError
from .conformance import conform
from .corpus import _values, swept_env, swept_symbol
from .indices import index_values, is_index

DEFAULT_SIZES = (1 << 16, 1 << 20)
DEFAULT_REPEATS = 5
MAX_COMBINATIONS = 64


@dataclass
class Candidate:
    values: dict[str, int | float]
    proven: bool = False
    cases: int = 0
    failure: str | None = None               # the first failing case of a candidate that failed
    seconds: list[float] = field(default_factory=list)   # median seconds per timed size

    @property
    def total(self) -> float | None:
        return sum(self.seconds) if self.proven and self.seconds else None

    def to_json(self) -> dict:
        return {"values": dict(self.values), "proven": self.proven, "cases": self.cases, "failure": self.failure,
                "seconds": list(self.seconds)}


@dataclass
class TuneResult:
    op: str
    hash: str
    params: dict
    sizes: list[int]
    default: dict
    candidates: list[Candidate]

    @property
    def winner(self) -> Candidate | None:
        timed = [c for c in self.candidates if c.total is not None]
        return min(timed, key=lambda c: c.total) if timed else None

    def to_json(self) -> dict:
        w = self.winner
        return {"op": self.op, "hash": self.hash, "params": dict(self.params), "sizes": list(self.sizes),
                "default": dict(self.default), "winner": dict(w.values) if w else None,
                "candidates": [c.to_json() for c in self.candidates]}


def combinations(pkg: OpPackage, only: dict[str, list] | None = None) -> list[dict]:
    """Every combination of the tunables' candidates (the declared default first), or those in ``only``."""
    ts = tunables(pkg.contract)
    if not ts:
        raise StudioError(f"{pkg.id} declares no tunable override", file=pkg.manifest_path, field="bindings.text",
                          hint="declare one in [bindings]: override RUN: u32 = 512 tune [128, 256, 512, 1024]")
    lists = []
    for o in ts:
        vals = list(o.candidates)
        if only and o.name in only:
            vals = [v for v in vals if v in only[o.name]]
            if not vals:
                raise StudioError(f"--only {o.name}: none of {only[o.name]} is a tune candidate of '{o.name}'",
                                  field="--only", hint=f"its candidates: {', '.join(map(str, o.candidates))}")
        lists.append(vals)
    if only and (unknown := set(only) - {o.name for o in ts}):
        raise StudioError(f"--only: {pkg.id} has no tunable {', '.join(sorted(unknown))}", field="--only",
                          hint=f"its tunables: {', '.join(o.name for o in ts)}")
    combos = [dict(zip([o.name for o in ts], vs)) for vs in itertools.product(*lists)]
    if len(combos) > MAX_COMBINATIONS:
        raise StudioError(f"{pkg.id}: {len(combos)} candidate combinations (at most {MAX_COMBINATIONS})",
                          file=pkg.manifest_path, field="bindings.text", hint="list fewer tune candidates")
    d = declared(pkg.contract)
    return sorted(combos, key=lambda c: c != d)


def variant_package(pkg: OpPackage, values: dict) -> OpPackage:
    """The package with these candidate values: same files, same content hash, the contract's
    override values (and the launch size that names them) replaced."""
    return dataclasses.replace(pkg, contract=variant(pkg.contract, values))


def timing_cases(pkg: OpPackage, params: dict, sizes, seed: int = 0) -> list[Case]:
    """One input per size: the corpus's swept symbol at that size, its other dims 1, ``params``
    over the corpus's first parameter combination; normal values."""
    sig = pkg.contract.signature
    env_for, _ = swept_env(sig, seed)
    unknown = set(params) - {p.name for p in sig.params}
    if unknown:
        raise StudioError(f"{pkg.id} has no parameter {', '.join(sorted(unknown))}", field="--param",
                          hint=f"its parameters: {', '.join(p.name for p in sig.params) or 'none'}")
    rng = np.random.default_rng(seed)
    out = []
    for v in sizes:
        env = {**env_for(int(v)), **params}
        shapes = {t.name: tuple(int(d.eval(env)) for d in t.dims) for t in sig.inputs}
        run_params = {p.name: env[p.name] for p in sig.params if p.name in env}
        dims = sig.resolve(shapes, run_params)   # refuses a size the signature does not admit, with its rule
        out.append(Case({t.name: index_values("normal", shapes[t.name], t, dims, rng) if is_index(t) else   # valid indices
                         _values("normal", shapes[t.name], t.dtype, t.domain, rng) for t in sig.inputs}, run_params))
    return out


def time_packages(ctx: Context, pkgs: list[OpPackage], cases: list[Case], repeats: int) -> list[list[float]]:
    """Per package, the median seconds of a whole call per case. Each package is called once
    untimed first (its pipeline compiles), then the repeats go round-robin over the packages, so
    that a shared machine's load falls on every candidate alike."""
    out = [[] for _ in pkgs]
    for case in cases:
        for pkg in pkgs:
            run_cases(pkg, [case], device=ctx.device)
        times = [[] for _ in pkgs]
        for _ in range(repeats):
            for i, pkg in enumerate(pkgs):
                t0 = time.perf_counter()
                run_cases(pkg, [case], device=ctx.device)
                times[i].append(time.perf_counter() - t0)
        for i, t in enumerate(times):
            out[i].append(float(np.median(t)))
    return out


def tune(ctx: Context, pkg: OpPackage, *, params: dict | None = None, sizes=DEFAULT_SIZES,
         repeats: int = DEFAULT_REPEATS, seed: int = 0, only: dict[str, list] | None = None,
         progress=None) -> TuneResult:
    """Prove every candidate on the conformance corpus, then time the proven ones."""
    params = dict(params or {})
    combos = combinations(pkg, only)
    sig = pkg.contract.signature
    if swept_symbol(sig) is None and len(set(sizes)) > 1:
        sizes = sizes[:1]                       # nothing to sweep: one size is every size
    cases = timing_cases(pkg, params, sizes, seed)
    result = TuneResult(pkg.id, pkg.hash, params, [int(s) for s in sizes], declared(pkg.contract), [])
    for i, values in enumerate(combos):
        cand = Candidate(values)
        vpkg = variant_package(pkg, values)
        try:
            rep = conform(ctx, vpkg, seed=seed, mutants=0, stop_after=1)   # one failing case condemns it
            cand.cases = rep.total
            if rep.ok:
                cand.proven = True
            else:
                cand.failure = (rep.failures[0].describe() if rep.failures else "; ".join(
                    e.message for e in rep.category_errors) or "the backward kernel fails conformance")
        except StudioError as e:             # the candidate does not compile, or its launch is refused
            cand.failure = e.message
        result.candidates.append(cand)
        if progress:
            progress(i + 1, len(combos) + 1)
    proven = [c for c in result.candidates if c.proven]      # only a proven candidate is ever timed
    for c, secs in zip(proven, time_packages(ctx, [variant_package(pkg, c.values) for c in proven], cases, repeats)):
        c.seconds = secs
    if progress:
        progress(len(combos) + 1, len(combos) + 1)
    return result
