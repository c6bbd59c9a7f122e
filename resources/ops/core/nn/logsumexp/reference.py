"""Reference for core/nn/logsumexp@1: y[r] = m_r + log(sum_j exp(x[r, j] - m_r)), m_r = max_j x[r, j].

``terms`` and ``vjp_terms`` give, per output, the bound's inputs from this f64 evaluation of that
output (docs/tolerance.md, "The bound, per output"): k, the magnitude the roundings are relative
to, and for WGSL's `exp` and `log` the weights of every call that reaches it."""
import numpy as np


def _parts(x):
    m = x.max(axis=1, keepdims=True)
    d = x - m
    e = np.exp(d)
    S = e.sum(axis=1, keepdims=True)
    return m, d, e / S, S


def forward(x):
    m, _, _, S = _parts(np.asarray(x, dtype=np.float64))
    return (m + np.log(S))[:, 0]


def terms(x):
    """y = m + log(S): the sum S of cols exps (cols - 1 roundings) reaches y as its relative error
    (magnitude 1); each exp call's relative error reaches y with weight s_j = e_j / S (sum 1) at
    argument d_j; log's error reaches y with weight |log S| (relative) and 1 (absolute)."""
    x = np.asarray(x, dtype=np.float64)
    _, d, s, S = _parts(x)
    cols = x.shape[1]
    return {"terms": cols - 1.0, "magnitude": 1.0,      # one number stands for every row
            "exp": {"weight": 1.0, "weighted_arg": (s * np.abs(d)).sum(axis=1)},
            "log": {"weight": np.abs(np.log(S[:, 0])), "abs_weight": 1.0}}


def vjp(x, dy):
    """dx[r, j] = dy[r] * softmax(x[r])_j"""
    x = np.asarray(x)
    dy = np.asarray(dy)
    s = _parts(x.astype(np.float64))[2]
    return s * dy[:, None]


def vjp_terms(x, dy):
    """The device VJP recomputes s_j = e_j / S as softmax does (cols - 1 roundings in S, the
    division 5 u), then dx = dy * s_j: k = cols + 4 relative to |dx|; each exp call reaches dx_j
    with weight |dx_j| s_k (the sum's) and |dx_j| (the numerator's)."""
    x = np.asarray(x, dtype=np.float64)
    _, d, s, _ = _parts(x)
    dx = np.abs(s * np.asarray(dy, dtype=np.float64)[:, None])
    sd = (s * np.abs(d)).sum(axis=1, keepdims=True)
    # an exp or a quotient below 2^-126 may be flushed to zero: an absolute 2^-126 (twice) times |dy|
    tiny = 2 * 2.0 ** -126 * np.abs(np.asarray(dy, dtype=np.float64))[:, None] / ((x.shape[1] + 6) * 2.0 ** -24)
    return {"terms": x.shape[1] + 4.0, "magnitude": dx + tiny,
            "exp": {"weight": 2 * dx, "weighted_arg": dx * (np.abs(d) + sd)}}
