"""Where gradcheck probes an op, chosen by the engine from the signature (the author does not pick
the exam): parameter values, sizes and input values.

- parameters (`param_values`, `sweep`): every admissible value of a small integer domain, else its
  boundaries and a seeded sample; a float across its domain: its boundaries, zero, ±tiny, ±huge
  and seeded random values. One factor at a time around the main parameter set, so every value
  is checked once (with the others at their main values, or the nearest ones the relations allow).
- sizes (`shapes_at`): the swept dimension at its smallest admissible value, one above it, EXTRA
  above it, and past WORKGROUPS_PAST workgroups of the op's kernel; every other dim (a filter's
  length) at each of DIM_CLASSES (1, 2, 3, 4: one, odd and even lengths), past WORKGROUPS_PAST
  workgroups along it and at its declared maximum (`extreme_shapes`).
- values: a *plain* point (normal values) and an *edge* point (values planted within h of each
  other, of zero and of each float parameter, some exactly on them) (`points`); values at several
  distances from every kink, just beyond h and then across decades up to the input's scale
  (`plants`); exact ties whose tied values differ in bits, +0.0 and -0.0, so that the forward's
  output shows which element it selected (`tie_cases`)."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..contract.expr import Sym
from ..contract.signature import COMPARE, Signature
from ..errors import StudioError
from ..precision import is_float, numpy_dtype

FLOAT_DEFAULTS = (-0.5, 0.75, 1.25, 2.0, -1.5, 0.3)
OTHER_DIMS = (5, 3, 7, 4, 6, 2, 1, 9)
EXTRA = 24              # the main size: the smallest the signature admits, plus this
SIZE_STEPS = (EXTRA, 0, 1)   # the sizes checked: EXTRA above the smallest, the smallest, one above it
WORKGROUPS_PAST = 2     # and one size past this many workgroups of the op's kernel (a VJP wrong only for n > 64)
DIM_CLASSES = (1, 2, 3, 4)   # every other dim (a filter length) at each: 1, even, odd, and the smallest ones
MAX_SIZE = 4096
SMALL_DOMAIN = 64       # an integer param with at most this many admissible values: every one is checked
INT_SAMPLES = 6         # a larger integer domain: its boundaries and this many seeded values
UNBOUNDED_SPAN = 1000   # an integer without a constant upper bound is sampled in [lo, lo + this]
TINY = float(np.finfo(np.float32).tiny)
FLT_MAX = float(np.finfo(np.float32).max)
HUGE = 1e4              # large, yet f64 central differences with h = 1e-3 still resolve 1e-9 next to it
FLOAT_SAMPLES = 2       # seeded random values of a float param
RESOLVE = 1e3           # a value is planted at anchor + d only where d exceeds this many ulps of the anchor


def _const(e):
    try:
        return e.eval({}) if e is not None else None
    except StudioError:
        return None


def _f32(v) -> float:
    return float(np.float32(v))


# ------------------------------------------------------------------ parameters

def default_params(sig: Signature, given: dict) -> list[dict]:
    """Candidate main parameter sets (given values kept): integers a few steps above their lower
    bound (w odd in [1, 31] -> 7), floats from a fixed list (the first inside the domain), in two
    orders."""
    ints, floats = {}, []
    for p in sig.params:
        if p.name in given:
            continue
        if p.dtype in ("u32", "i32"):
            lo, hi = _const(p.lo), _const(p.hi)
            lo = int(lo) if lo is not None else (1 if p.dtype == "u32" else 0)
            v = lo + 6 if hi is None else min(int(hi), lo + 6)
            if p.parity and (v % 2 == 1) != (p.parity == "odd"):
                v = v + 1 if hi is None or v + 1 <= hi else v - 1
            ints[p.name] = v
        else:
            floats.append(p)
    out = []
    for order in (FLOAT_DEFAULTS, FLOAT_DEFAULTS[::-1]):
        fl = {}
        for k, p in enumerate(floats):
            lo, hi = _const(p.lo), _const(p.hi)
            inside = [v for v in order[k % len(order):] + order[:k % len(order)]
                      if (lo is None or v >= lo) and (hi is None or v <= hi)]
            v = inside[0] if inside else order[k % len(order)]
            fl[p.name] = float(min(max(v, lo if lo is not None else v), hi if hi is not None else v))
        out.append({**given, **ints, **fl})
    return out


def _int_values(p, rng) -> tuple[list[int], str]:
    lo, hi = _const(p.lo), _const(p.hi)
    lo = int(lo) if lo is not None else (0 if p.dtype == "u32" else -UNBOUNDED_SPAN)
    top = int(hi) if hi is not None else lo + (UNBOUNDED_SPAN if p.dtype == "u32" else 2 * UNBOUNDED_SPAN)
    ok = (lambda v: (v % 2 == 1) == (p.parity == "odd")) if p.parity else (lambda v: True)
    r = 1 if p.parity == "odd" else 0
    count = (top - r) // 2 - (lo - 1 - r) // 2 if p.parity else top - lo + 1
    if hi is not None and count <= SMALL_DOMAIN:
        vals = [v for v in range(lo, top + 1) if ok(v)]
        return vals, f"every admissible value ({len(vals)})"
    edge = [v for v in (lo, lo + 1, lo + 2, lo + 3) if ok(v)][:2] + [v for v in (top, top - 1, top - 2, top - 3) if ok(v)][:2]
    sample = [int(v) for v in rng.integers(lo, top, size=4 * INT_SAMPLES, endpoint=True) if ok(int(v))][:INT_SAMPLES]
    vals = sorted(set(edge + sample))
    where = f"[{lo}, {top}]" + ("" if hi is not None else f" (no constant upper bound: sampled up to {top})")
    return vals, f"its boundaries and {len(vals) - len(set(edge))} seeded values of {where}"


def _float_values(p, rng) -> tuple[list[float], str]:
    lo, hi = _const(p.lo), _const(p.hi)
    lo_ = -FLT_MAX if lo is None else float(lo)
    hi_ = FLT_MAX if hi is None else float(hi)
    cands = [lo_, hi_, 0.0, TINY, -TINY, HUGE, -HUGE]
    if math.isfinite(hi_ - lo_) and hi_ - lo_ <= 2 * HUGE:
        rand = list(rng.uniform(lo_, hi_, size=FLOAT_SAMPLES))
    else:                                  # log-uniform magnitudes, of the signs the domain admits
        draws = [s * 10 ** m for s, m in zip(rng.choice([-1.0, 1.0], size=8 * FLOAT_SAMPLES),
                                              rng.uniform(-3, 3, size=8 * FLOAT_SAMPLES))]
        rand = [v for v in draws if lo_ <= _f32(v) <= hi_][:FLOAT_SAMPLES]
    vals = list(dict.fromkeys(_f32(v) for v in cands + rand if lo_ <= _f32(v) <= hi_))
    return vals, "its boundaries" + (" (the f32 range)" if lo is None or hi is None else "") + \
        f", 0, +-tiny ({TINY:.3g}), +-huge ({HUGE:g}) where the domain admits them, {FLOAT_SAMPLES} seeded random values"


def param_values(sig: Signature, main: dict, given: dict, rng) -> dict[str, tuple[list, str]]:
    """Per param: the values gradcheck checks, and the rule that chose them."""
    out = {}
    for p in sig.params:
        if p.name in given:
            out[p.name] = ([given[p.name]], "given")
            continue
        vals, rule = _int_values(p, rng) if p.dtype in ("u32", "i32") else _float_values(p, rng)
        out[p.name] = (list(dict.fromkeys([main[p.name], *vals])), rule)
    return out


def _params_ok(sig: Signature, params: dict) -> bool:
    """The constraints that involve params alone (parity, constant ranges, relations like lo <= hi)."""
    names = set(params)
    for p in sig.params:
        v, lo, hi = params[p.name], _const(p.lo), _const(p.hi)
        if (p.parity and (v % 2 == 1) != (p.parity == "odd")) or (lo is not None and v < lo) or (hi is not None and v > hi):
            return False
    for r in sig.relations:
        try:
            if (r.left.symbols() | r.right.symbols()) <= names and not COMPARE[r.op](r.left.eval(params),
                                                                                    r.right.eval(params)):
                return False
        except (StudioError, ZeroDivisionError, ValueError, TypeError):
            return False
    return True


def sweep(sig: Signature, main: dict, values: dict) -> list[dict]:
    """The parameter sets to check: the main one, then each value of each param with the others at
    their main values (or, where a relation between params forbids that, the first of their values
    that fits). A set no size admits is dropped later (shapes_at gives None)."""
    combos = [dict(main)]
    for name, (vals, _) in values.items():
        for v in vals:
            c = {**main, name: v}
            if not _params_ok(sig, c):
                others = [n for n in values if n != name]
                tries = itertools.islice(itertools.product(*(values[n][0] for n in others)), 4096)
                c = next((t for t in ({**main, **dict(zip(others, t)), name: v} for t in tries) if _params_ok(sig, t)), None)
            if c is not None and c not in combos:
                combos.append(c)
    return combos


# ------------------------------------------------------------------ sizes

def _dim_symbols(sig: Signature) -> list[str]:
    params = {p.name for p in sig.params}
    return list(dict.fromkeys(d.name for t in sig.inputs for d in t.dims if isinstance(d, Sym) and d.name not in params))


def _valid(sig: Signature, dims: dict, params: dict) -> dict | None:
    try:
        shapes = {t.name: tuple(int(d.eval({**dims, **params})) for d in t.dims) for t in sig.inputs}
        if any(s < 0 for sh in shapes.values() for s in sh):
            return None
        env = sig.resolve(shapes, params)
        if any(s <= 0 for sh in sig.output_shapes(env).values() for s in sh):
            return None
        return shapes
    except (StudioError, ZeroDivisionError, ValueError, TypeError):
        return None


def _smallest(ok) -> int | None:
    """The smallest v in [1, MAX_SIZE] with ok(v): every v up to 64, then by doubling and a scan
    of the last octave (sizes that large come from relations like w <= n, which hold upward)."""
    for v in range(1, 65):
        if ok(v):
            return v
    p = 128
    while p <= 2 * MAX_SIZE and not ok(min(p, MAX_SIZE)):
        p *= 2
    if p > 2 * MAX_SIZE:
        return None
    return next((v for v in range(p // 2 + 1, min(p, MAX_SIZE) + 1) if ok(v)), None)


def other_dims(sig: Signature) -> list[str]:
    """The dims besides the swept one (a filter's length k, a batch b): each gets its own classes."""
    return _dim_symbols(sig)[1:]


def shapes_at(sig: Signature, params: dict, extra: int, fixed: dict | None = None) -> dict | None:
    """Input shapes with the swept (first) size at its smallest admissible value + extra; ``fixed``
    pins other dims (a filter length of 1, 2, 3 ...)."""
    syms = _dim_symbols(sig)
    if not syms:
        return _valid(sig, {}, params)
    primary, others = syms[0], [s for s in syms[1:] if s not in (fixed or {})]
    for combo in itertools.islice(itertools.product(OTHER_DIMS, repeat=len(others)), 16):
        dims = {**dict(zip(others, combo)), **(fixed or {})}
        v = _smallest(lambda v, dims=dims: _valid(sig, {**dims, primary: v}, params) is not None)
        if v is not None:
            return _valid(sig, {**dims, primary: v + extra}, params) or _valid(sig, {**dims, primary: v}, params)
    return None


def extreme_shapes(sig: Signature, params: dict, workgroups: dict[str, int]) -> list[dict]:
    """Every other dim past WORKGROUPS_PAST workgroups of the kernel along it, and every dim at its
    declared maximum (``cols <= 256``: 256) where that is at most MAX_SIZE (extremes.py)."""
    from .extremes import axes
    dims, out = other_dims(sig), []
    for a in axes(sig, _dim_symbols(sig), workgroups):
        for v in (WORKGROUPS_PAST * a.workgroup + 1 if a.workgroup else None, a.hi):
            if a.name in dims and v is not None and v <= MAX_SIZE:
                out.append(shapes_at(sig, params, EXTRA, {a.name: int(v)}))
        if a.name not in dims and a.hi is not None and a.hi <= MAX_SIZE:     # the swept size at its maximum
            out.append(next((at for combo in itertools.islice(itertools.product(OTHER_DIMS, repeat=len(dims)), 16)
                             if (at := _valid(sig, {**dict(zip(dims, combo)), a.name: int(a.hi)}, params))), None))
    return [s for s in out if s is not None]


def choose(sig: Signature, given: dict) -> tuple[dict, dict]:
    """The main params and input shapes (the swept size at its smallest admissible value + EXTRA)."""
    for params in default_params(sig, given):
        shapes = shapes_at(sig, params, EXTRA)
        if shapes is not None:
            return params, shapes
    try:                                   # say why, in the signature's own words
        sig.resolve({t.name: tuple(1 for _ in t.dims) for t in sig.inputs}, default_params(sig, given)[0])
    except StudioError as e:
        raise StudioError(f"gradcheck cannot build an input for {sig.name}: {e.message}", field=e.field,
                          hint=e.hint or "give the params with --param NAME=VALUE") from None
    raise StudioError(f"gradcheck cannot build an input for {sig.name} with these params",
                      hint="give other params with --param NAME=VALUE")


# ------------------------------------------------------------------ values

def _domain(a: np.ndarray, domain, h: float) -> np.ndarray:
    """Keep every value and its whole probe interval (+-h) inside the input's value domain."""
    if domain.kind == "nonneg":
        return np.abs(a) + 4 * h
    if domain.kind == "in":
        lo, hi = float(domain.lo), float(domain.hi)
        margin = min(4 * h, (hi - lo) / 4)
        return np.clip(a, lo + margin, hi - margin)
    return a


def _fits(v: float, domain, h: float) -> bool:
    if domain.kind == "nonneg":
        return v >= 4 * h
    if domain.kind == "in":
        return float(domain.lo) + 4 * h <= v <= float(domain.hi) - 4 * h
    return math.isfinite(v)


def _plain(sig: Signature, shapes: dict, h: float, rng) -> dict:
    out = {}
    for t in sig.inputs:
        if is_float(t.dtype):
            out[t.name] = _domain(rng.standard_normal(shapes[t.name]), t.domain, h)
        else:
            out[t.name] = rng.integers(0, 10, size=shapes[t.name]).astype(numpy_dtype(t.dtype))
    return out


def anchors(sig: Signature, params: dict, h: float) -> list[tuple[str, float]]:
    """Where kinks of an elementwise piece sit: zero and each float param (and its negation, as a
    soft threshold's -t), when a step of h next to it is resolvable in f64."""
    out = [("0", 0.0)]
    for p in sig.params:
        if p.dtype not in ("u32", "i32"):
            v = float(params[p.name])
            out += [(f"{p.name} = {v:g}", v), (f"-{p.name} = {-v:g}", -v)]
    seen, keep = set(), []
    for label, v in out:
        if v not in seen and RESOLVE * np.spacing(abs(v)) < h:
            seen.add(v)
            keep.append((label, v))
    return keep


def points(sig: Signature, params: dict, shapes: dict, differentiable: list[str], h: float,
           rng: np.random.Generator) -> list[tuple[str, dict]]:
    """[("edge", inputs), ("plain", inputs)], values in f64."""
    plain = _plain(sig, shapes, h, rng)
    edge = dict(plain)
    near = [float(params[p.name]) for p in sig.params if p.dtype not in ("u32", "i32")
            and RESOLVE * np.spacing(abs(float(params[p.name]))) < h]
    for t in sig.inputs:
        if not (is_float(t.dtype) and t.name in differentiable and plain[t.name].size):
            continue
        e = plain[t.name].copy().reshape(-1)
        n = e.size
        for k, j in enumerate(rng.permutation(n)[: max(1, (3 * n) // 8)]):
            off = 0.0 if k % 3 == 0 else rng.uniform(-0.6, 0.6) * h
            kind = k % (3 if near else 2)
            if kind == 0 and n > 1:          # a near-tie with a neighbour: an order crossing
                e[j] = e[j - 1 if j > 0 else 1] + off
            elif kind == 1:                  # near zero: relu / abs kinks
                e[j] = off
            elif near:                       # near a float parameter: clip's bounds
                e[j] = near[(k // 3) % len(near)] + off
        e = _domain(e, t.domain, h) if t.domain.kind != "nonneg" else np.maximum(e, 4 * h)
        edge[t.name] = e.reshape(shapes[t.name])
    return [("edge", edge), ("plain", plain)]


def distances(h: float, scale: float, rng, start: float = 1.5) -> list[float]:
    """Just beyond h (start x h), then per decade up to the input's scale: the decade's start and a
    seeded log-uniform value within it; the scale itself last."""
    out, lo = [], start * h
    while lo < scale:
        hi = min(10 * lo, scale)
        out += [lo, float(np.exp(rng.uniform(np.log(lo), np.log(hi))))]
        lo = hi
    return out + [scale]


def _scale(domain) -> float:
    return min(1.0, (float(domain.hi) - float(domain.lo)) / 4) if domain.kind == "in" else 1.0


def plants(sig: Signature, params: dict, shapes: dict, differentiable: list[str], h: float, rng, *,
           ties: bool, limit: int | None = None, start: float = 1.5) -> tuple[dict, list[tuple[str, int, str, float]]]:
    """Plain values with some elements planted at signed distances from a kink: (inputs, [(input,
    flat index, the kink, signed distance)]). Kinks: zero and the float params (`anchors`), and
    with ``ties`` the element's left neighbour (an order crossing). Planted elements are two apart,
    so a neighbour is never itself planted; `limit` keeps a seeded subset; `start`: the nearest
    distance, in units of h."""
    x = _plain(sig, shapes, h, rng)
    floats = [t for t in sig.inputs if is_float(t.dtype) and t.name in differentiable and x[t.name].size]
    if not floats:
        return x, []
    t = max(floats, key=lambda s: x[s.name].size)
    flat = x[t.name].reshape(-1).copy()
    kinks = [(label, v, False) for label, v in anchors(sig, params, h)] + ([("a tie with its neighbour", 0.0, True)]
                                                                          if ties and flat.size > 1 else [])
    ds = distances(h, _scale(t.domain), rng, start)
    want = [(label, v, rel, s * d) for label, v, rel in kinks for d in ds for s in (1.0, -1.0)]
    slots = list(range(1, flat.size, 2)) or [0]
    if limit is not None or len(want) > len(slots):
        keep = sorted(rng.permutation(len(want))[: min(len(slots), limit if limit is not None else len(want))])
        want = [want[i] for i in keep]
    done = []
    for j, (label, v, rel, d) in zip(rng.permutation(slots), want):
        value = (flat[j - 1] if rel else v) + d
        if _fits(value, t.domain, h) and (rel or RESOLVE * np.spacing(abs(v)) < abs(d)):
            flat[j] = value
            done.append((t.name, int(j), label, float(d)))
    x[t.name] = flat.reshape(shapes[t.name])
    return x, done


def tie_cases(sig: Signature, shapes: dict, differentiable: list[str], h: float, rng) -> list[tuple[str, dict, tuple]]:
    """Inputs whose only equal values are one +0.0 and one -0.0 side by side (every other value
    distinct and nonzero), so an output that is a zero names the selected element by its sign bit.
    The other values lie below the pair (the zeros are a maximum), above it (a minimum), or on
    both sides (a middle rank); both orders of the pair. [(label, inputs, (input, i, j))]."""
    floats = [t for t in sig.inputs if is_float(t.dtype) and t.name in differentiable and int(np.prod(shapes[t.name])) > 1]
    if not floats:
        return []
    t = max(floats, key=lambda s: int(np.prod(shapes[s.name])))
    d = t.domain
    lo, hi = (float(d.lo), float(d.hi)) if d.kind == "in" else (0.0 if d.kind == "nonneg" else -4.0, 4.0)
    if not lo <= 0.0 <= hi:
        return []
    cases = []
    for k, side in enumerate(("below", "above", "both", "both")):
        if (side == "below" and lo >= 0) or (side == "above" and hi <= 0) or (side == "both" and (lo >= 0 or hi <= 0)):
            continue
        x = _plain(sig, shapes, h, rng)
        n = int(np.prod(shapes[t.name]))
        mag = np.abs(rng.standard_normal(n)) + 1e-2
        sign = {"below": -1.0, "above": 1.0}.get(side) or rng.choice([-1.0, 1.0], size=n)
        a = np.clip(sign * mag, lo if lo < 0 else 1e-2, hi if hi > 0 else -1e-2)
        a = a - np.arange(n) * 1e-9 * np.sign(a)          # distinct even where clipped, still inside
        i = int(rng.integers(0, n - 1))
        a[i], a[i + 1] = (0.0, -0.0) if k % 2 == 0 else (-0.0, 0.0)
        x[t.name] = a.reshape(shapes[t.name])
        cases.append((f"{side}, {'+0 then -0' if k % 2 == 0 else '-0 then +0'} at {t.name}[{i}]", x, (t.name, i, i + 1)))
    return cases
