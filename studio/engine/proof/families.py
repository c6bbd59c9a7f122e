"""The corpus's case families, each a named step of ``corpus.generate`` (docs/verification.md):
the size sweep per parameter combination, every small-domain parameter value with every value
kind, every value kind at a mid size, the value bands, the domain's extremes (extremes.py) and
the planned large sizes (sizes.py); and the shape helpers they share (the swept size, its
minimum)."""
from __future__ import annotations

import math

import numpy as np

from ..contract.expr import Sym
from ..contract.signature import Signature
from ..errors import StudioError
from ..precision import is_float
from . import extremes
from .bands import BINADES_PER_CASE, PER_BINADE, band_groups, band_values, kink_values
from .indices import feasible

BOUNDARY_SIZES = (63, 64, 65, 255, 256, 257)
MIN_COMBOS = 4             # the shape sweep runs at least this often (fresh values each time)
PAIRWISE_SPAN = 48         # the pairwise cases' sizes: the minimum plus up to this much
EXTREME_BIG_BYTES = 32 << 20   # a domain extreme past SMALL_ELEMENTS is made (once) when its arrays fit this


class Shape:
    """What every family needs to place a case: the swept size (a dim, or for an op without inputs
    an integer param), the other dims, and how a size lands in (dims, params)."""

    def __init__(self, sig: Signature):
        self.sig = sig
        self.primary, self.size_param = _primary(sig)
        self.other_dims = [s for s in _dim_symbols(sig) if s != self.primary]

    def minimum(self, dims: dict, params: dict) -> int | None:
        return _minimum(self.sig, self.primary, self.size_param, dims, params)

    def at(self, dims: dict, params: dict, v: int) -> tuple[dict, dict]:
        if self.size_param:
            return dims, {**params, self.size_param: v}
        return {**dims, self.primary: v}, params

    def small_dims(self, rng) -> dict:
        return {s: int(rng.integers(1, 9)) for s in self.other_dims}


def sweep(shape: Shape, combos: list[dict], kinds: list[str], rng, add) -> None:
    """Per parameter combination: the minimum, one above, the workgroup boundaries, a random size."""
    for ci, params in enumerate(combos):
        dims = shape.small_dims(rng)
        smallest = shape.minimum(dims, params)
        if smallest is None:
            continue
        rot = ci % len(kinds)
        add("minimum", kinds[rot], *shape.at(dims, params, smallest))
        add("above_minimum", kinds[(rot + 1) % len(kinds)], *shape.at(dims, params, smallest + 1))
        for j, b in enumerate(BOUNDARY_SIZES):
            if b > smallest + 1:
                add("boundary", kinds[(rot + 2 + j) % len(kinds)], *shape.at(dims, params, b))
        r = int(rng.integers(smallest, smallest + 2000))
        add("random", kinds[(rot + 8) % len(kinds)], *shape.at(dims, params, r))


def value_pairs(shape: Shape, combos: list[dict], kinds: list[str], rng, add) -> None:
    """Every value of a small parameter domain meets every value kind, on small inputs."""
    for params in _distinct(combos):
        dims = shape.small_dims(rng)
        smallest = shape.minimum(dims, params)
        if smallest is None:
            continue
        for k in kinds:
            add("pairwise", k, *shape.at(dims, params, smallest + int(rng.integers(0, PAIRWISE_SPAN + 1))))


def every_kind(shape: Shape, combos: list[dict], kinds: list[str], rng, add) -> None:
    """Every value kind on a mid-sized input, for the first few parameter combinations."""
    for params in combos[:3]:
        dims = shape.small_dims(rng)
        smallest = shape.minimum(dims, params)
        if smallest is None:
            continue
        for k in kinds:
            add("random", k, *shape.at(dims, params, max(smallest, 97)))


def large(shape: Shape, sizes: dict, combos: list[dict], axis_env, add, run_params: dict | None = None) -> None:
    """The planned large sizes (sizes.py): the swept size's (``fold``, ``big``, ...: the other dims
    at 1), and each axis's own (``fold@h``, ``big@w``: the other axes > 1, ``axis_env``). Normal
    values, and constant ones: a long sum of equal terms shows a loop the driver cut short
    (lavapipe ends a loop after 65,535 iterations) or a dropped tail, where a bound on Σ|terms| of
    random signs cannot."""
    for kind, v in sorted(sizes.items(), key=lambda kv: (kv[1], kv[0])):   # ties by name: a receipt sorts its keys
        if not combos or v is None:
            continue
        base, _, axis = kind.partition("@")
        if axis:
            env = axis_env(axis)
            if env is None:
                continue
            dims = {s: env[s] for s in [shape.primary, *shape.other_dims] if s and s in env}
            add({"big": "large"}.get(base, base), "normal", {**dims, axis: v},
                {p.name: env[p.name] for p in shape.sig.params if p.name in env})
            continue
        params, dims = combos[0], {s: 1 for s in shape.other_dims}
        if kind == "run" and run_params:          # a run's own parameter values (reliance.py)
            params = {**params, **{k: v for k, v in run_params.items() if k in params}}
        for vk in (("normal", "constant") if kind in ("fold", "big") else ("constant",)):
            add({"big": "large"}.get(kind, kind), vk, *shape.at(dims, params, v))


def extreme(shape: Shape, axes: list, kinds: list[str], rng, add, *, first: bool, large_corpus: bool):
    """The domain's extremes (extremes.py). A case past SMALL_ELEMENTS is made by the first seed
    only, and only when its arrays fit EXTREME_BIG_BYTES (or ``large_corpus``)."""
    params = {p.name for p in shape.sig.params}
    turn = iter(range(1 << 30))

    def split(env):
        return ({k: v for k, v in env.items() if k not in params}, {k: v for k, v in env.items() if k in params})

    def emit(kind, env):
        return add(kind, kinds[next(turn) % len(kinds)], *split(env))

    def big(kind, env):
        if not first:
            return True          # the first seed made it
        if not large_corpus and extremes.bytes_of(shape.sig, env) > EXTREME_BIG_BYTES:
            return False
        return add(kind, "normal", *split(env))
    return extremes.extreme_cases(shape.sig, axes, rng, emit, big)


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
    if _fails_without_size(sig, {**dims, **params}, size_param):   # dims too: k <= n fixed and false
        return None          # what the scan below finds, without its 4,097 failing tries
    for v in range(_lower_bound(sig, primary, {**dims, **params}), 4097):
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


def _lower_bound(sig, primary: str, fixed: dict) -> int:
    """A size below which every try of _minimum's scan fails, so the scan may start there and find the
    same first size: the largest bound of a relation that names the swept size alone on one side
    (`n >= w`, `2 * w + 1 <= n`, `n > k`) with the other side fixed. Its tries cost a whole resolve
    and a refused one an error message: a scan from 0 to w = 255 was most of generating a corpus."""
    lo = 0
    for r in sig.relations:
        if isinstance(r.left, Sym) and r.left.name == primary and r.op in (">=", ">"):
            other, strict = r.right, r.op == ">"
        elif isinstance(r.right, Sym) and r.right.name == primary and r.op in ("<=", "<"):
            other, strict = r.left, r.op == "<"
        else:
            continue
        if not other.symbols() <= fixed.keys():
            continue
        try:
            b = other.eval(fixed)
        except (StudioError, ZeroDivisionError, OverflowError, ValueError, TypeError):
            continue
        if not isinstance(b, (int, float)) or b != b or b in (float("inf"), float("-inf")):
            continue
        need = math.floor(b) + 1 if strict else math.ceil(b)
        lo = max(lo, min(need, 4097))
    return lo


def _fails_without_size(sig, params, size_param) -> bool:
    """A relation over the parameters and the fixed dims alone (not the swept size) that fails: no size can
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
