"""Where gradcheck probes an op: parameters, sizes and input values, chosen by the engine from
the signature (the author does not pick the exam). Two points per check: a *plain* one (normal
values) and an *edge* one, where kinks live: values planted within h of each other (order
crossings), of zero, and of each float parameter (e.g. clip's bounds), some exactly on them."""
from __future__ import annotations

import itertools

import numpy as np

from ..contract.expr import Sym
from ..contract.signature import Signature
from ..errors import StudioError
from ..precision import is_float, numpy_dtype

FLOAT_DEFAULTS = (-0.5, 0.75, 1.25, 2.0, -1.5, 0.3)
OTHER_DIMS = (5, 3, 7, 4, 6, 2, 1, 9)
EXTRA = 24              # the swept size: the smallest the signature admits, plus this
MAX_SIZE = 4096


def _const(e):
    try:
        return e.eval({}) if e is not None else None
    except StudioError:
        return None


def default_params(sig: Signature, given: dict) -> list[dict]:
    """Candidate parameter sets (given values kept): integers a few steps above their lower
    bound (w odd in [1, 31] -> 7), floats from a fixed ascending list, in two orders."""
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
        for p, v in zip(floats, itertools.cycle(order)):
            lo, hi = _const(p.lo), _const(p.hi)
            fl[p.name] = float(min(max(v, lo if lo is not None else v), hi if hi is not None else v))
        out.append({**given, **ints, **fl})
    return out


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
    except (StudioError, ZeroDivisionError, ValueError):
        return None


def choose(sig: Signature, given: dict) -> tuple[dict, dict]:
    """Params and input shapes: the swept (first) size at its smallest admissible value + EXTRA."""
    syms = _dim_symbols(sig)
    for params in default_params(sig, given):
        if not syms:
            shapes = _valid(sig, {}, params)
            if shapes is not None:
                return params, shapes
            continue
        primary, others = syms[0], syms[1:]
        for combo in itertools.islice(itertools.product(OTHER_DIMS, repeat=len(others)), 16):
            dims = dict(zip(others, combo))
            for v in range(1, MAX_SIZE + 1):
                if _valid(sig, {**dims, primary: v}, params) is not None:
                    bigger = _valid(sig, {**dims, primary: v + EXTRA}, params)
                    return params, bigger or _valid(sig, {**dims, primary: v}, params)
    try:                                   # say why, in the signature's own words
        sig.resolve({t.name: tuple(1 for _ in t.dims) for t in sig.inputs}, default_params(sig, given)[0])
    except StudioError as e:
        raise StudioError(f"gradcheck cannot build an input for {sig.name}: {e.message}", field=e.field,
                          hint=e.hint or "give the params with --param NAME=VALUE") from None
    raise StudioError(f"gradcheck cannot build an input for {sig.name} with these params",
                      hint="give other params with --param NAME=VALUE")


def _domain(a: np.ndarray, domain, h: float) -> np.ndarray:
    """Keep every value and its whole probe interval (+-h) inside the input's value domain."""
    if domain.kind == "nonneg":
        return np.abs(a) + 4 * h
    if domain.kind == "in":
        lo, hi = float(domain.lo), float(domain.hi)
        margin = min(4 * h, (hi - lo) / 4)
        return np.clip(a, lo + margin, hi - margin)
    return a


def points(sig: Signature, params: dict, shapes: dict, differentiable: list[str], h: float,
           rng: np.random.Generator) -> list[tuple[str, dict]]:
    """[("edge", inputs), ("plain", inputs)], values in f64."""
    plain, edge = {}, {}
    anchors = [float(v) for p in sig.params if p.dtype not in ("u32", "i32") for v in [params[p.name]]]
    for t in sig.inputs:
        shape = shapes[t.name]
        if not is_float(t.dtype):
            a = rng.integers(0, 10, size=shape).astype(numpy_dtype(t.dtype))
            plain[t.name] = edge[t.name] = a
            continue
        a = _domain(rng.standard_normal(shape), t.domain, h)
        plain[t.name] = a
        e = a.copy().reshape(-1)
        if t.name in differentiable and e.size:
            n = e.size
            picks = rng.permutation(n)[: max(1, (3 * n) // 8)]
            for k, j in enumerate(picks):
                off = 0.0 if k % 3 == 0 else rng.uniform(-0.6, 0.6) * h
                kind = k % (3 if anchors else 2)
                if kind == 0 and n > 1:          # a near-tie with a neighbour: an order crossing
                    e[j] = e[j - 1 if j > 0 else 1] + off
                elif kind == 1:                  # near zero: relu / abs kinks
                    e[j] = off
                else:                            # near a float parameter: clip's bounds
                    e[j] = anchors[(k // 3) % len(anchors)] + off
            e = _domain(e, t.domain, h) if t.domain.kind != "nonneg" else np.maximum(e, 4 * h)
        edge[t.name] = e.reshape(shape)
    return [("edge", edge), ("plain", plain)]
