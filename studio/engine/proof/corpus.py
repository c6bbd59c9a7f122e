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

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from ..contract.signature import Domain, Signature
from ..errors import StudioError
from ..precision import is_float, numpy_dtype
from .bands import BINADES_PER_CASE, PER_BINADE, band_groups, band_values, kink_values
from .indices import edge_cases, feasible, index_values, is_index

GENERATOR = "scellis-corpus"
VERSION = 3                # 3: size plan per kernel (sizes.py), value bands and kinks (bands.py)
BOUNDARY_SIZES = (63, 64, 65, 255, 256, 257)
LARGE_SIZE = 1_000_003
MIN_COMBOS = 4             # the shape sweep runs at least this often (fresh values each time)
SMALL_DOMAIN = 64          # an integer param with at most this many admissible values is enumerated
VALUE_KINDS = ("normal", "uniform", "constant", "duplicates", "ascending", "descending", "spikes",
               "signed_zeros", "subnormal", "huge", "extreme")
PAIRWISE_SPAN = 48         # the pairwise cases' sizes: the minimum plus up to this much
FLT_MAX = float(np.finfo(np.float32).max)
SIZE_KINDS = ("fold", "backward_fold", "big", "max", "run")   # the planned large sizes (sizes.py, coverage.py)
MAX_SIZE = 1 << 28
SPECIAL_KINDS = ("inf", "nan")   # only where the input's value domain admits them


@dataclass
class CorpusCase:
    index: int
    shape_kind: str    # minimum | above_minimum | boundary | random | pairwise | band | large | max | fold | backward_fold
    value_kind: str
    dims: dict[str, int]
    params: dict[str, int | float]
    inputs: dict[str, np.ndarray]
    tight: tuple[str, ...] = ()        # relations that hold with equality, e.g. "n = w"

    def describe(self) -> str:
        env = ", ".join(f"{k} = {v}" for k, v in {**self.dims, **self.params}.items())
        kind = self.shape_kind.replace("_", " ") + (f" ({', '.join(self.tight)})" if self.tight else "")
        return f"case {self.index}: {kind} input: {env}; values {self.value_kind}"


@dataclass
class Corpus:
    signature: Signature
    seed: int
    large: bool
    cases: list[CorpusCase]
    sizes: dict[str, int] = field(default_factory=dict)   # fold | backward_fold | big | max -> swept size

    @property
    def fold_size(self) -> int | None:
        return self.sizes.get("fold")

    @property
    def identity(self) -> dict:
        return {"generator": GENERATOR, "version": VERSION, "seed": self.seed, "large": self.large,
                "signature": self.signature.text, "fold_size": self.fold_size, "sizes": dict(self.sizes),
                "coverage": "every small-domain parameter value x every value kind; every float input in every "
                            f"band of {BINADES_PER_CASE} binades ({PER_BINADE} mantissas per binade and sign) and "
                            "around its kinks and domain edges"}

    @property
    def hash(self) -> str:
        h = hashlib.sha256(json.dumps(self.identity, sort_keys=True).encode())
        for c in self.cases:
            h.update(json.dumps([c.shape_kind, c.value_kind, c.dims, c.params], sort_keys=True).encode())
            for name in sorted(c.inputs):
                h.update(name.encode() + np.ascontiguousarray(c.inputs[name]).tobytes())
        return h.hexdigest()


def _const(e, env=None):
    try:
        return e.eval(env or {}) if e is not None else None
    except StudioError:
        return None


def param_values(sig: Signature, rng: np.random.Generator) -> dict[str, list]:
    """Every admissible value of a small integer domain; boundaries and samples otherwise."""
    out = {}
    for p in sig.params:
        lo, hi = _const(p.lo), _const(p.hi)
        if p.dtype in ("u32", "i32"):
            lo = lo if lo is not None else (0 if p.dtype == "u32" else -1000)
            hi = hi if hi is not None else lo + 1000
            vals = list(range(int(lo), int(hi) + 1)) if hi - lo < SMALL_DOMAIN else sorted(
                {int(lo), int(lo) + 1, int(hi), *rng.integers(lo, hi, size=5, endpoint=True).tolist()})
            if p.parity:
                want = 1 if p.parity == "odd" else 0
                vals = [v for v in vals if v % 2 == want] or [v + 1 for v in vals if (v + 1) % 2 == want and v + 1 <= hi]
        else:
            vals = float_param_values(lo, hi, rng)
        out[p.name] = vals
    return out


def float_param_values(lo, hi, rng: np.random.Generator) -> list[float]:
    """A float parameter across its whole domain: its boundaries and their neighbours, zero and
    one, tiny, huge, and seeded random values (log-uniform over the span and uniform within it)."""
    lo_ = -FLT_MAX if lo is None else float(lo)
    hi_ = FLT_MAX if hi is None else float(hi)
    f = lambda v: float(np.float32(v))
    cands = [lo_, hi_, f(np.nextafter(np.float32(lo_), np.float32(hi_))), f(np.nextafter(np.float32(hi_), np.float32(lo_))),
             0.0, 1.0, -1.0, 1e-30, -1e-30, 1e-3, 1e30, -1e30, 2.0 ** -140, 10.0, 100.0, 1000.0, -10.0, -1000.0]
    span = max(abs(lo_), abs(hi_), 1.0)
    cands += [f(rng.choice([-1, 1]) * 10 ** rng.uniform(-6, np.log10(span))) for _ in range(4)]
    cands += [f(rng.uniform(max(lo_, -1e6), min(hi_, 1e6))) for _ in range(3)]
    vals = []
    for v in cands:
        v = f(v)
        if lo_ <= v <= hi_ and np.isfinite(v) and v not in vals:
            vals.append(v)
    return vals or [f(lo_)]


def _values(kind: str, shape: tuple, dtype: str, domain, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    if dtype in ("u32", "i32"):
        info = np.iinfo(numpy_dtype(dtype))
        if kind == "constant":
            a = np.full(n, rng.integers(0, 100))
        elif kind == "huge":
            a = rng.integers(max(info.min, -2**31), info.max, size=n, endpoint=True)
        else:
            a = rng.integers(0 if dtype == "u32" else -1000, 1000, size=n)
        return a.astype(numpy_dtype(dtype)).reshape(shape)
    if kind == "normal":
        a = rng.normal(size=n)
    elif kind == "uniform":
        a = rng.uniform(-1, 1, size=n)
    elif kind == "constant":
        a = np.full(n, rng.normal())
    elif kind == "duplicates":
        a = rng.choice(rng.normal(size=3), size=n)
    elif kind == "ascending":
        a = np.sort(rng.normal(size=n))
    elif kind == "descending":
        a = -np.sort(rng.normal(size=n))
    elif kind == "spikes":
        a = rng.normal(scale=0.1, size=n)
        a[::2] += rng.choice([-8.0, 8.0], size=a[::2].size)
    elif kind == "signed_zeros":
        a = rng.choice(np.array([0.0, -0.0, 1.0, -1.0]), size=n)
    elif kind == "subnormal":
        a = rng.choice([-1, 1], size=n) * rng.integers(1, 2**23, size=n) * 2.0 ** -149
    elif kind == "huge":
        a = rng.choice([-1, 1], size=n) * 10 ** rng.uniform(17, 19, size=n)
    elif kind == "extreme":            # up to the float maximum: where `finite` allows, it is allowed
        a = rng.choice([-1, 1], size=n) * np.minimum(10 ** rng.uniform(20, 38.6, size=n), FLT_MAX)
    elif kind == "inf":
        a = rng.normal(size=n)
        a[rng.integers(0, max(n, 1), size=max(1, n // 8) if n else 0)] = rng.choice([np.inf, -np.inf])
    elif kind == "nan":
        a = rng.normal(size=n)
        a[rng.integers(0, max(n, 1), size=max(1, n // 8) if n else 0)] = np.nan     # n = 0: an empty input
    else:  # pragma: no cover
        raise ValueError(kind)
    a = a.astype(np.float32)
    if domain.kind == "nonneg":
        a = np.abs(a)
    elif domain.kind == "in":
        a = np.clip(a, domain.lo, domain.hi).astype(np.float32)
    return a.reshape(shape)


def fold_case_size(workgroup_size: int, max_groups: int = 65535, margin: int = 256) -> int:
    """A swept size whose launch folds into 2-D: more invocations than ``max_groups`` workgroups of
    ``workgroup_size`` hold in x (kernels index gid.x + gid.y * num_workgroups.x * workgroup_size).
    The margin covers invocation counts a little below the size (n - w + 1); conformance checks
    that the case really folds."""
    return max_groups * workgroup_size + 1 + margin


def cotangent_values(kind: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """Values of one kind for a cotangent (finite f32: a cotangent is a gradient)."""
    return _values(kind, tuple(shape), "f32", Domain("finite"), rng)


def swept_env(sig: Signature, seed: int = 0):
    """(env_for, smallest): the symbol environment of the corpus's large cases as a function of
    the swept size (the first parameter combination, other dims 1), and the smallest size."""
    rng = np.random.default_rng([seed, VERSION])
    primary, size_param = _primary(sig)
    combos = _param_combos(sig, param_values(sig, rng), rng, size_param)
    params, dims = combos[0], {s: 1 for s in _dim_symbols(sig) if s != primary}
    smallest = _minimum(sig, primary, size_param, dims, params) if primary is not None else None
    def env_for(v: int) -> dict:
        return {**dims, **params, primary: v} if primary is not None else {**dims, **params}
    return env_for, smallest


def generate(sig: Signature, *, seed: int = 0, large: bool = False, fold_size: int | None = None,
             sizes: dict[str, int] | None = None) -> Corpus:
    """``sizes``: the large sizes to include (sizes.plan); ``fold_size`` alone is {"fold": fold_size}."""
    sizes = dict(sizes if sizes is not None else ({"fold": fold_size} if fold_size is not None else {}))
    if large and not any(v and v >= LARGE_SIZE for v in sizes.values()):
        sizes["big"] = LARGE_SIZE      # --large always holds a size near 10^6, whatever the launch
    rng = np.random.default_rng([seed, VERSION])
    pvals = param_values(sig, rng)
    primary, size_param = _primary(sig)
    kinds = list(VALUE_KINDS)
    if sig.inputs and all(t.domain.admits_inf for t in sig.inputs if is_float(t.dtype)):
        kinds += list(SPECIAL_KINDS)
    cases: list[CorpusCase] = []

    def add(shape_kind: str, value_kind: str, sizes: dict, params: dict, override=None):
        env_dims = dict(sizes)
        shapes = {t.name: tuple(int(d.eval({**env_dims, **params})) for d in t.dims) for t in sig.inputs}
        try:
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
        cases.append(CorpusCase(len(cases), shape_kind, value_kind, dict(sizes), dict(params), inputs, tight))
        return True

    combos = _param_combos(sig, pvals, rng, size_param)
    other_dims = [s for s in _dim_symbols(sig) if s != primary]
    for ci, params in enumerate(combos):
        dims = {s: int(rng.integers(1, 9)) for s in other_dims}
        smallest = _minimum(sig, primary, size_param, dims, params)
        if smallest is None:
            continue
        sizes_for = lambda v: ({**dims, primary: v} if not size_param else dims)
        with_size = lambda v: ({**params, size_param: v} if size_param else params)
        rot = ci % len(kinds)
        add("minimum", kinds[rot], sizes_for(smallest), with_size(smallest))
        add("above_minimum", kinds[(rot + 1) % len(kinds)], sizes_for(smallest + 1), with_size(smallest + 1))
        for j, b in enumerate(BOUNDARY_SIZES):
            if b > smallest + 1:
                add("boundary", kinds[(rot + 2 + j) % len(kinds)], sizes_for(b), with_size(b))
        r = int(rng.integers(smallest, smallest + 2000))
        add("random", kinds[(rot + 8) % len(kinds)], sizes_for(r), with_size(r))
    # pairwise: every value of a small parameter domain meets every value kind, on small inputs
    for params in _distinct(combos):
        dims = {s: int(rng.integers(1, 9)) for s in other_dims}
        smallest = _minimum(sig, primary, size_param, dims, params)
        if smallest is None:
            continue
        for k in kinds:
            v = smallest + int(rng.integers(0, PAIRWISE_SPAN + 1))
            add("pairwise", k, {**dims, primary: v} if not size_param else dims,
                {**params, size_param: v} if size_param else params)
    # every value kind on a mid-sized input for the first few parameter combinations
    for params in combos[:3]:
        dims = {s: int(rng.integers(1, 9)) for s in other_dims}
        smallest = _minimum(sig, primary, size_param, dims, params)
        if smallest is None:
            continue
        size = max(smallest, 97)
        for k in kinds:
            add("random", k, {**dims, primary: size} if not size_param else dims,
                {**params, size_param: size} if size_param else params)
    _bands(sig, combos, other_dims, primary, size_param, rng, add)
    edge_cases(sig, [primary, *other_dims] if primary and not size_param else other_dims, combos[0] if combos else {},
               kinds, rng, add)
    # the planned large sizes (sizes.py). Normal values, and constant ones: a long sum of equal
    # terms shows a loop the driver cut short (lavapipe ends a loop after 65,535 iterations) or a
    # dropped tail, where a bound on Σ|terms| of random signs cannot
    for kind, v in sorted(sizes.items(), key=lambda kv: kv[1]):
        if not combos or v is None:
            continue
        params, dims = combos[0], {s: 1 for s in other_dims}
        for vk in (("normal", "constant") if kind in ("fold", "big") else ("constant",)):
            add({"big": "large"}.get(kind, kind), vk, {**dims, primary: v} if not size_param else dims,
                {**params, size_param: v} if size_param else params)
    if not cases:
        raise StudioError("the signature admits no input the corpus generator can build",
                          hint="check that the param ranges and relations can all hold at once")
    return Corpus(sig, seed, large, cases, {k: v for k, v in sizes.items() if v is not None})


def _bands(sig, combos, other_dims, primary, size_param, rng, add) -> None:
    """Every float input in every band of binades, and around its kinks and domain edges."""
    for t in sig.inputs:
        if not is_float(t.dtype):
            continue
        cases = [("band", f"band 2^{lo}..2^{hi}", (lambda g, d=t.domain, f=bool(j % 2): lambda shape: band_values(
            g, d, int(np.prod(shape)), rng, f))((lo, hi))) for j, (lo, hi) in enumerate(band_groups(t.domain))]
        cases += [("band", "kinks", None)] * min(len(_distinct(combos)), 4)
        for i, (shape_kind, vk, fn) in enumerate(cases):
            params = combos[i % len(combos)] if combos else {}
            if fn is None:
                fn = (lambda p, d=t.domain: lambda shape: kink_values(d, p, int(np.prod(shape)), rng))(params)
            dims = {s: int(rng.integers(1, 9)) for s in other_dims}
            smallest = _minimum(sig, primary, size_param, dims, params)
            if smallest is None:
                continue
            size = max(smallest, 2 * BINADES_PER_CASE * PER_BINADE)
            add(shape_kind, f"{t.name}: {vk}", {**dims, primary: size} if not size_param else dims,
                {**params, size_param: size} if size_param else params, override=(t.name, fn))


def regenerate(sig: Signature, identity: dict) -> Corpus:
    """The corpus a receipt's corpus identity names (for verifying the receipt)."""
    fold = identity.get("fold_size")
    sizes = identity.get("sizes")
    if sizes is not None and not (isinstance(sizes, dict) and all(
            k in SIZE_KINDS and isinstance(v, int) and 1 <= v <= MAX_SIZE for k, v in sizes.items())):
        raise StudioError(f"corpus.sizes must map {', '.join(SIZE_KINDS)} to sizes in [1, {MAX_SIZE}]",
                          field="corpus.sizes")
    return generate(sig, seed=int(identity["seed"]), large=bool(identity["large"]),
                    sizes={k: int(v) for k, v in sizes.items()} if isinstance(sizes, dict) else
                    ({"fold": int(fold)} if fold is not None else {}))


def _distinct(combos: list[dict]) -> list[dict]:
    seen, out = set(), []
    for c in combos:
        key = tuple(sorted(c.items()))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _dim_symbols(sig: Signature) -> list[str]:
    seen: list[str] = []
    for t in sig.inputs:
        for d in t.dims:
            for s in sorted(getattr(d, "symbols", lambda: frozenset())()):
                if s not in seen and s not in {p.name for p in sig.params}:
                    seen.append(s)
    return seen


def _primary(sig: Signature) -> tuple[str | None, str | None]:
    """The size that is swept: the first dim of the first input, or for ops without inputs the
    first integer param (e.g. a generator's n)."""
    dims = _dim_symbols(sig)
    if dims:
        return dims[0], None
    for p in sig.params:
        if p.dtype in ("u32", "i32"):
            return p.name, p.name
    return None, None


def swept_symbol(sig: Signature) -> str | None:
    """The symbol the corpus sweeps (a dim, or for ops without inputs an integer param)."""
    return _primary(sig)[0]


def _param_combos(sig, pvals, rng, size_param) -> list[dict]:
    names = [p.name for p in sig.params if p.name != size_param]
    if not names:
        return [{}] * MIN_COMBOS
    longest = max(MIN_COMBOS, *(len(pvals[n]) for n in names))
    combos = []
    for i in range(longest):
        combos.append({n: pvals[n][i % len(pvals[n])] for n in names})
    return combos


def _minimum(sig, primary, size_param, dims, params) -> int | None:
    """The smallest size of the swept dimension that the signature admits."""
    if primary is None:
        return 1
    if _fails_without_size(sig, params, size_param):
        return None          # what the scan below finds, without its 4,097 failing tries
    for v in range(0, 4097):
        env = {**dims, primary: v}
        p = {**params, size_param: v} if size_param else params
        try:
            shapes = {t.name: tuple(int(d.eval({**env, **p})) for d in t.dims) for t in sig.inputs}
            if any(s < 0 for sh in shapes.values() for s in sh):
                continue
            e = sig.resolve(shapes, p)
            if any(s <= 0 for sh in sig.output_shapes(e).values() for s in sh) or not feasible(sig, shapes, e):
                continue
            return v
        except StudioError:
            continue
    return None


def _fails_without_size(sig, params, size_param) -> bool:
    """A relation over the parameters alone (not the swept size, no dim) that fails: no size can
    make it hold, so every size the scan of _minimum tries would fail."""
    from ..contract.signature import COMPARE
    fixed = set(params) - {size_param}
    for r in sig.relations:
        syms = r.left.symbols() | r.right.symbols()
        if not syms or not syms <= fixed:
            continue
        try:
            if not COMPARE[r.op](r.left.eval(params), r.right.eval(params)):
                return True
        except StudioError:
            continue
    return False
