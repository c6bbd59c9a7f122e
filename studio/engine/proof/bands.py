"""Value bands: for every float input, cases whose values lie in one narrow band of binades, from
the subnormals to the declared domain's edge, both signs (a kernel wrong only on (-87, -80), or
one that drops terms below 1e-30, is wrong on a whole band that random values seldom reach and
mixed magnitudes hide under the bound); and dense sweeps around the domain's edges and the kinks
(zero, each float parameter and its negation), a few ulps and then halving distances away.

Values in a band are stratified, not random: each binade holds ``PER_BINADE`` evenly spaced
mantissas per sign, so a wrong interval wider than 1/PER_BINADE of its binade is always hit."""
from __future__ import annotations

import numpy as np

FLT_MAX = float(np.finfo(np.float32).max)
MIN_EXP = -149             # the smallest subnormal, 2^-149
BINADES_PER_CASE = 4
PER_BINADE = 16            # evenly spaced mantissas per binade and sign


def domain_edge(domain) -> float:
    """The largest magnitude the input's value domain admits."""
    if domain.kind == "in":
        return max(abs(float(domain.lo)), abs(float(domain.hi)))
    return FLT_MAX


def signs(domain) -> tuple[float, ...]:
    if domain.kind == "nonneg" or (domain.kind == "in" and float(domain.lo) >= 0):
        return (1.0,)
    if domain.kind == "in" and float(domain.hi) <= 0:
        return (-1.0,)
    return (1.0, -1.0)


def band_groups(domain) -> list[tuple[int, int]]:
    """[lo_exp, hi_exp) groups of binades from 2^-149 up to the domain's edge."""
    top = int(np.floor(np.log2(domain_edge(domain)))) + 1 if domain_edge(domain) > 0 else MIN_EXP + 1
    return [(e, min(e + BINADES_PER_CASE, top)) for e in range(MIN_EXP, top, BINADES_PER_CASE)]


def band_values(group: tuple[int, int], domain, size: int, rng: np.random.Generator, flip: bool = False) -> np.ndarray:
    """``size`` f32 values stratified over the group's binades and the domain's signs, clipped to
    the domain, in a seeded order."""
    lo, hi = group
    mant = 1.0 + np.arange(PER_BINADE) / PER_BINADE
    vals = np.concatenate([s * np.ldexp(mant, e) for e in range(lo, hi) for s in signs(domain)])
    if band_groups(domain)[-1][1] == hi:                 # the top band reaches the domain's edge itself
        vals = np.concatenate([vals, [s * domain_edge(domain) for s in signs(domain)]])
    vals = _in_domain(vals, domain)
    vals = vals[np.argsort(np.abs(vals), kind="stable")]
    if size < vals.size and len(signs(domain)) == 2:      # a short input: both signs, alternately
        spread = np.abs(vals[np.unique(np.linspace(0, vals.size - 1, size).round().astype(int))])
        spread[int(flip)::2] *= -1                  # ``flip``: which sign the first one has
        vals = _in_domain(spread, domain)
    return _fit(vals, size, rng)


def _fit(vals: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` of ``vals`` in a seeded order: all of them (repeated) when they fit, else an even
    spread over them (the first and the last included), so a short input still spans its band."""
    if size < vals.size:
        vals = vals[np.unique(np.linspace(0, vals.size - 1, size).round().astype(int))]
    vals = np.array(vals, copy=True)
    rng.shuffle(vals)
    return np.resize(vals, size).astype(np.float32)


def kink_values(domain, params: dict, size: int, rng: np.random.Generator) -> np.ndarray:
    """Dense sweeps around the domain's edges and the kinks: each point, its float neighbours up to
    4 ulp away, and points at halving relative distances (2^-1 ... 2^-22) on both sides."""
    points = [float(domain.lo), float(domain.hi)] if domain.kind == "in" else [FLT_MAX, -FLT_MAX]
    points += [0.0, 2.0 ** -149, -(2.0 ** -149), 2.0 ** -126, -(2.0 ** -126)]
    for v in params.values():
        if isinstance(v, float) and np.isfinite(v):
            points += [v, -v]
    out = [np.float32(p) for p in points]          # the points themselves first: a short input gets them
    for p in points:
        p32 = np.float32(p)
        up = down = p32
        with np.errstate(over="ignore"):
            for _ in range(4):
                up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
                out += [up, down]
        out.append(p32)
        scale = abs(p) if p != 0 else 1.0
        out += [p + s * scale * 2.0 ** -k for k in range(1, 23) for s in (1, -1)]
    vals = _in_domain(np.asarray(out, np.float64), domain).astype(np.float32)
    _, first = np.unique(vals, return_index=True)
    vals = vals[np.sort(first)]                    # distinct, in priority order
    if size < vals.size:
        vals = vals[:size]
    vals = np.array(vals, copy=True)
    rng.shuffle(vals)
    return np.resize(vals, size).astype(np.float32)


def _in_domain(vals: np.ndarray, domain) -> np.ndarray:
    vals = np.clip(vals, -FLT_MAX, FLT_MAX)
    if domain.kind == "nonneg":
        vals = vals[vals >= 0]
    elif domain.kind == "in":
        vals = vals[(vals >= float(domain.lo)) & (vals <= float(domain.hi))]
    return vals if vals.size else np.zeros(1)
