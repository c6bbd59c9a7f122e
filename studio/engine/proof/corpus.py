"""The conformance corpus, generated from the signature alone: the author never picks the cases.

Deterministic for a given identity (generator version, seed, large, fold size): the same cases,
bit for bit, on every machine; their content hash goes into the receipt. What it covers
(docs/verification.md): every size class the signature admits (the minimum, boundaries, random,
and the large sizes sizes.py plans: each kernel's own 2-D launch fold, a size near 10⁶), every
value kind the input domains admit (magnitudes up to the float maximum where `finite` allows),
every float input in every band of binades and around its kinks (bands.py), float parameters at
their boundaries, tiny, huge and random, and every value of a small parameter domain with every
value kind."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from ..contract.signature import Signature
from ..errors import StudioError
from ..precision import is_float
from . import extremes, families
from .bands import BINADES_PER_CASE, PER_BINADE
from .families import _dim_symbols, _minimum, _primary, swept_symbol   # noqa: F401  (the corpus's API)
from .indices import edge_cases, index_values, is_index
from .values import (FLT_MAX, SPECIAL_KINDS, VALUE_KINDS, _const, _values, cotangent_values,  # noqa: F401 (re-exported: the corpus's API)
                     float_param_values, param_values)

GENERATOR = "scellis-corpus"
VERSION = 4                # 4: the domain's extremes (extremes.py), per-axis large sizes, several seeds
RNG_VERSION = 3            # the families of version 3 draw as they did: a 1-D op's corpus keeps them
SEEDS = 3                  # a receipt is earned over at least this many seeds
LARGE_SIZE = 1_000_003
SIZE_KINDS = ("fold", "backward_fold", "big", "max", "run")   # the planned large sizes (sizes.py, coverage.py)
MAX_SIZE = 1 << 28
MAX_SEEDS = 64


@dataclass
class CorpusCase:
    index: int
    shape_kind: str    # minimum | above_minimum | boundary | random | pairwise | band | large | max | fold | backward_fold
    value_kind: str
    dims: dict[str, int]
    params: dict[str, int | float]
    inputs: dict[str, np.ndarray]
    tight: tuple[str, ...] = ()        # relations that hold with equality, e.g. "n = w"
    seed: int | None = None            # the seed its values came from, where not the corpus's first

    def describe(self) -> str:
        env = ", ".join(f"{k} = {v}" for k, v in {**self.dims, **self.params}.items())
        kind = self.shape_kind.replace("_", " ") + (f" ({', '.join(self.tight)})" if self.tight else "")
        return f"case {self.index}: {kind} input: {env}; values {self.value_kind}" + (
            f"; seed {self.seed}" if self.seed is not None else "")


@dataclass
class Corpus:
    signature: Signature
    seed: int
    large: bool
    cases: list[CorpusCase]
    sizes: dict[str, int] = field(default_factory=dict)   # fold | backward_fold | big | max -> swept size
    run_params: dict | None = None     # a run's own parameter values, for its "run" case (proof/reliance.py)
    seeds: int = 1                     # the small and extreme families, once per seed seed, seed + 1, ...
    workgroups: dict = field(default_factory=dict)     # dim -> the kernel's workgroup along it
    reach: extremes.Reach | None = None                # the domain's extremes reached (coverage.py)

    @property
    def fold_size(self) -> int | None:
        return self.sizes.get("fold")

    @property
    def identity(self) -> dict:
        return {"generator": GENERATOR, "version": VERSION, "seed": self.seed, "large": self.large,
                "signature": self.signature.text, "fold_size": self.fold_size, "sizes": dict(self.sizes),
                "coverage": "every small-domain parameter value x every value kind; every float input in every "
                            f"band of {BINADES_PER_CASE} binades ({PER_BINADE} mantissas per binade and sign) and "
                            "around its kinks and domain edges",
                **({"run_params": dict(self.run_params)} if self.run_params else {}),
                "seeds": list(range(self.seed, self.seed + self.seeds)),
                **({"workgroups": dict(self.workgroups)} if self.workgroups else {})}

    @functools.cached_property
    def hash(self) -> str:
        """sha256 of the identity and every case (computed once: the cases do not change)."""
        h = hashlib.sha256(json.dumps(self.identity, sort_keys=True).encode())
        for c in self.cases:
            h.update(json.dumps([c.shape_kind, c.value_kind, c.dims, c.params], sort_keys=True).encode())
            for name in sorted(c.inputs):
                h.update(name.encode() + np.ascontiguousarray(c.inputs[name]).tobytes())
        return h.hexdigest()


def fold_case_size(workgroup_size: int, max_groups: int = 65535, margin: int = 256) -> int:
    """A swept size whose launch folds into 2-D: more invocations than ``max_groups`` workgroups of
    ``workgroup_size`` hold in x (kernels index gid.x + gid.y * num_workgroups.x * workgroup_size).
    The margin covers invocation counts a little below the size (n - w + 1); conformance checks
    that the case really folds."""
    return max_groups * workgroup_size + 1 + margin


def swept_env(sig: Signature, seed: int = 0):
    """(env_for, smallest): the symbol environment of the corpus's large cases as a function of
    the swept size (the first parameter combination, other dims 1), and the smallest size."""
    rng = np.random.default_rng([seed, RNG_VERSION])
    primary, size_param = _primary(sig)
    combos = families._param_combos(sig, param_values(sig, rng), rng, size_param)
    params, dims = combos[0], {s: 1 for s in _dim_symbols(sig) if s != primary}
    smallest = _minimum(sig, primary, size_param, dims, params) if primary is not None else None
    def env_for(v: int) -> dict:
        return {**dims, **params, primary: v} if primary is not None else {**dims, **params}
    return env_for, smallest


def axis_env(sig: Signature, axis: str, seed: int = 0) -> dict | None:
    """The environment of ``axis``'s own large and fold cases, without ``axis``: the parameters
    of swept_env, every other dim at its smallest admissible value above 1 (None: none holds)."""
    env_for, _ = swept_env(sig, seed)
    params = {p.name: v for p, v in ((p, env_for(1).get(p.name)) for p in sig.params) if v is not None}
    env = dict(params)
    for d in _dim_symbols(sig):
        if d == axis:
            continue
        v = next((v for v in range(2, 66) if extremes.partial_ok(sig, {**env, d: v})), None)
        if v is None:
            return None
        env[d] = v
    return env


def generate(sig: Signature, *, seed: int = 0, large: bool = False, fold_size: int | None = None,
             sizes: dict[str, int] | None = None, run_params: dict | None = None, seeds: int = 1,
             workgroups: dict[str, int] | None = None) -> Corpus:
    """``sizes``: the large sizes to include (sizes.plan); ``fold_size`` alone is {"fold": fold_size}.
    ``run_params``: a run's own parameter values, which its "run" size case holds. ``seeds``: the
    small and extreme families are made for seeds seed, seed + 1, ...; the large sizes once.
    ``workgroups``: the kernel's workgroup along each dim (its boundaries are extremes)."""
    sizes = dict(sizes if sizes is not None else ({"fold": fold_size} if fold_size is not None else {}))
    if large and not any(v and v >= LARGE_SIZE for v in sizes.values()):
        sizes["big"] = LARGE_SIZE      # --large always holds a size near 10^6, whatever the launch
    shape = families.Shape(sig)
    kinds = list(VALUE_KINDS)
    if sig.inputs and all(t.domain.admits_inf for t in sig.inputs if is_float(t.dtype)):
        kinds += list(SPECIAL_KINDS)
    cases: list[CorpusCase] = []
    state = {"seed": seed, "base": seed}
    axes = extremes.axes(sig, _dim_symbols(sig), workgroups)
    first_reach = None
    for s in range(seed, seed + max(1, int(seeds))):
        state["seed"] = s
        rng = state["rng"] = np.random.default_rng([s, RNG_VERSION])
        add = _adder(sig, cases, state)
        combos = families._param_combos(sig, param_values(sig, rng), rng, shape.size_param)
        if s == seed:             # the families of version 3, in its order: a 1-D op's corpus starts with it
            _first_seed_families(shape, combos, kinds, rng, add, sizes, run_params, seed)
        else:                     # a further seed: fresh values for the sweep's sizes and every value kind
            families.sweep(shape, combos[:families.MIN_COMBOS], kinds, rng, add)
            families.every_kind(shape, combos, kinds, rng, add)
        state["rng"] = np.random.default_rng([s, VERSION, 1])
        reach = families.extreme(shape, axes, kinds, state["rng"], add, first=s == seed, large_corpus=large)
        first_reach = first_reach or reach
    if not cases:
        raise StudioError("the signature admits no input the corpus generator can build",
                          hint="check that the param ranges and relations can all hold at once")
    return Corpus(sig, seed, large, cases, {k: v for k, v in sizes.items() if v is not None},
                  run_params=dict(run_params) if run_params and "run" in sizes else None,
                  seeds=max(1, int(seeds)), workgroups=dict(workgroups or {}), reach=first_reach)


def _first_seed_families(shape: families.Shape, combos: list, kinds: list, rng, add, sizes: dict, run_params, seed: int):
    """The first seed's families, in version 3's order: the sweep, value pairs, every value kind,
    the bands, the index edges, then the large sizes (families.py, indices.py)."""
    sig = shape.sig
    families.sweep(shape, combos, kinds, rng, add)
    families.value_pairs(shape, combos, kinds, rng, add)
    families.every_kind(shape, combos, kinds, rng, add)
    families._bands(sig, combos, shape.other_dims, shape.primary, shape.size_param, rng, add)
    edge_cases(sig, [shape.primary, *shape.other_dims] if shape.primary and not shape.size_param else
               shape.other_dims, combos[0] if combos else {}, kinds, rng, add)
    families.large(shape, sizes, combos, lambda axis: axis_env(sig, axis, seed), add, run_params)


def _adder(sig: Signature, cases: list, state: dict):
    """``add(shape_kind, value_kind, dims, params, override=None) -> bool``: one case, its values
    drawn from ``state["rng"]`` (False: the signature does not admit it)."""
    def add(shape_kind: str, value_kind: str, sizes: dict, params: dict, override=None):
        rng = state["rng"]
        env_dims = dict(sizes)
        try:
            shapes = {t.name: tuple(int(d.eval({**env_dims, **params})) for d in t.dims) for t in sig.inputs}
            env = sig.resolve(shapes, params)        # index inputs get values valid at these dims (indices.py)
            inputs = {t.name: (index_values if is_index(t) else lambda k, s, t, e, r: _values(k, s, t.dtype, t.domain, r))(
                "normal" if override else value_kind, shapes[t.name], t, env, rng) for t in sig.inputs}
        except StudioError:
            return False
        if override:                   # one input in a value band, the others normal
            name, fn = override
            inputs[name] = fn(shapes[name]).reshape(shapes[name])
        env = {**sizes, **params}
        tight = tuple(f"{r.right} = {r.left}" for r in sig.relations
                      if r.op in ("<=", ">=") and _const(r.left, env) == _const(r.right, env))
        cases.append(CorpusCase(len(cases), shape_kind, value_kind, dict(sizes), dict(params), inputs, tight,
                                seed=state["seed"] if state["seed"] != state.get("base", state["seed"]) else None))
        return True
    return add


def memo_key(signature_text: str, identity: dict) -> tuple:
    """What a receipt check's memo of regenerated corpora (Context.corpora) is keyed by."""
    def canon(v):         # a receipt on disk holds its maps in sorted order, a fresh corpus in its own
        return json.dumps(v, sort_keys=True, default=repr)
    return (signature_text, identity["seed"], identity["large"], identity.get("fold_size"),
            canon(identity.get("sizes")), canon(identity.get("run_params")),
            canon(identity.get("seeds") or [identity["seed"]]), canon(identity.get("workgroups")))


def remember(corpora: dict, corpus: Corpus) -> None:
    """Put a corpus just generated in the memo, as the receipt check would regenerate it: a receipt
    made from it is then checked without generating it a second time."""
    ident = {**corpus.identity, "cases": len(corpus.cases)}
    corpora.setdefault(memo_key(corpus.signature.text, ident), (ident, corpus.hash))


def regenerate(sig: Signature, identity: dict) -> Corpus:
    """The corpus a receipt's corpus identity names (for verifying the receipt)."""
    fold = identity.get("fold_size")
    sizes = identity.get("sizes")
    if sizes is not None and not (isinstance(sizes, dict) and all(
            k.partition("@")[0] in SIZE_KINDS and k.partition("@")[2] in ("", *_dim_symbols(sig))
            and isinstance(v, int) and 1 <= v <= MAX_SIZE for k, v in sizes.items())):
        raise StudioError(f"corpus.sizes must map {', '.join(SIZE_KINDS)} to sizes in [1, {MAX_SIZE}]",
                          field="corpus.sizes")
    run_params = identity.get("run_params")
    if run_params is not None and not (isinstance(run_params, dict) and all(
            k in {p.name for p in sig.params} and isinstance(v, (int, float)) and not isinstance(v, bool)
            for k, v in run_params.items())):
        raise StudioError("corpus.run_params must map the signature's parameters to numbers", field="corpus.run_params")
    seeds, workgroups = identity.get("seeds", [identity["seed"]]), identity.get("workgroups") or {}
    if not (isinstance(seeds, list) and 1 <= len(seeds) <= MAX_SEEDS and seeds == list(range(
            int(identity["seed"]), int(identity["seed"]) + len(seeds)))):
        raise StudioError(f"corpus.seeds must be the seeds seed, seed + 1, ... (1 to {MAX_SEEDS} of them)",
                          field="corpus.seeds")
    if not (isinstance(workgroups, dict) and all(k in _dim_symbols(sig) and isinstance(v, int) and 1 <= v <= 1024
                                                 for k, v in workgroups.items())):
        raise StudioError("corpus.workgroups must map the signature's dims to workgroup sizes in [1, 1024]",
                          field="corpus.workgroups")
    return generate(sig, seed=int(identity["seed"]), large=bool(identity["large"]), run_params=run_params,
                    seeds=len(seeds), workgroups=workgroups,
                    sizes={k: int(v) for k, v in sizes.items()} if isinstance(sizes, dict) else
                    ({"fold": int(fold)} if fold is not None else {}))


