"""The value kinds of the corpus: what the inputs and parameters of a case hold (docs/verification.md,
"value kinds", "float parameters"). Seeded: the same generator state gives the same values."""
from __future__ import annotations

import numpy as np

from ..contract.signature import Domain, Signature
from ..errors import StudioError
from ..precision import numpy_dtype

SMALL_DOMAIN = 64          # an integer param with at most this many admissible values is enumerated
VALUE_KINDS = ("normal", "uniform", "constant", "duplicates", "ascending", "descending", "spikes",
               "signed_zeros", "subnormal", "huge", "extreme")
SPECIAL_KINDS = ("inf", "nan")   # only where the input's value domain admits them
FLT_MAX = float(np.finfo(np.float32).max)


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
    def f(v):
        return float(np.float32(v))
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


def cotangent_values(kind: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """Values of one kind for a cotangent (finite f32: a cotangent is a gradient)."""
    return _values(kind, tuple(shape), "f32", Domain("finite"), rng)
