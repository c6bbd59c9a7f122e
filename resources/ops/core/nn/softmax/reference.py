"""Reference for core/nn/softmax@1: y[r, i] = exp(x[r, i] - m_r) / sum_j exp(x[r, j] - m_r), m_r = max_j x[r, j].

``terms`` and ``vjp_terms`` give, per output, the bound's inputs from this f64 evaluation of that
output (docs/tolerance.md, "The bound, per output"): k, the roundings that reach it; the
magnitude they are relative to; and, for WGSL's `exp`, the weights of every call that reaches it.
The kernel evaluates exp twice per element (in the row's sum and in the numerator), so both calls
are counted."""
import numpy as np


def _parts(x):
    d = x - x.max(axis=1, keepdims=True)
    e = np.exp(d)
    return d, e / e.sum(axis=1, keepdims=True)


def forward(x):
    return _parts(np.asarray(x, dtype=np.float64))[1]


def terms(x):
    """y_i = e_i / S: S sums cols terms (cols - 1 roundings), the division is within 2.5 ulp (5 u):
    k = cols + 4 relative to y_i. Each exp's relative error reaches y_i with weight y_i * s_j (the
    sum's call) and y_i (the numerator's call), at argument d_j = x_j - m."""
    d, s = _parts(np.asarray(x, dtype=np.float64))
    cols = x.shape[1]
    row_arg = (s * np.abs(d)).sum(axis=1, keepdims=True)
    return {"terms": cols + 4.0, "magnitude": s,
            "exp": {"weight": 2 * s, "weighted_arg": s * (np.abs(d) + row_arg)}}


def vjp(x, dy):
    """dx_i = s_i * (dy_i - sum_j dy_j s_j)"""
    x = np.asarray(x)
    dy = np.asarray(dy)
    s = _parts(x.astype(np.float64))[1]
    c = (dy * s).sum(axis=1, keepdims=True)
    return s * (dy - c)


def vjp_terms(x, dy):
    """The device VJP recomputes s (each s_j = e_j / S, its own exp call) and c = sum_j dy_j s_j,
    then dx_i = s_i dy_i - s_i c. Relative to M_i = s_i (|dy_i - c| + |c| + sum_j |dy_j| s_j), the
    sum S (cols - 1), the divisions (5 u each), c (cols products and sums) and the last steps give
    at most k = cols + 5 roundings. An exp call's relative error reaches dx_i with weight
    s_j s_i (|dy_i - c| + |c|) through S, and |dx_i| (j = i) or s_i |dy_j| s_j through s_j."""
    d, s = _parts(np.asarray(x, dtype=np.float64))
    dy = np.asarray(dy, dtype=np.float64)
    cols = x.shape[1]
    c = (dy * s).sum(axis=1, keepdims=True)
    dx = s * (dy - c)
    through_sum = s * (np.abs(dy - c) + np.abs(c))
    gs = (np.abs(dy) * s).sum(axis=1, keepdims=True)
    gsd = (np.abs(dy) * s * np.abs(d)).sum(axis=1, keepdims=True)
    sd = (s * np.abs(d)).sum(axis=1, keepdims=True)
    # the kernel scales dy by 2^-e (e: the row's largest |dy|): a product below 2^-126 there may be
    # flushed to zero, an absolute 2^-126 * 2^e for each of the few products that reach dx_i
    tiny = 4 * 2.0 ** -126 * 2 * np.abs(dy).max(axis=1, keepdims=True) / ((cols + 7) * 2.0 ** -24)
    return {"terms": cols + 5.0, "magnitude": through_sum + s * gs + tiny,
            "exp": {"weight": through_sum + np.abs(dx) + s * gs,
                    "weighted_arg": through_sum * sd + np.abs(dx) * np.abs(d) + s * gsd}}
