"""Reference for core/nn/softmax_xent@1: per row, m = max_j z, d = z - m, S = sum_j exp(d), L = log S;
the row's loss l_r = sum_j t_j (L - d_j) (= -sum_j t_j log_softmax(z)_j); loss = mean over rows of
l_r; dz = (exp(d) / S - t) / b. In f64; the engine rounds each result once to f32.

``terms`` gives, per output, the bound's inputs from this f64 evaluation of that output
(docs/tolerance.md, "The bound, per output"), following the kernel's evaluation (forward.wgsl):

- loss: S's k - 1 roundings reach L as an absolute error, weighted by the row's target mass T_r / b;
  d_j's rounding (absolute u|d_j| <= u (L - d_j)), the subtraction L - d_j, the product with t_j and
  the k - 1 additions of the row are relative to l_r (every term >= 0); the b - 1 additions of the
  rows relative to sum l_r; the division by b (2.5 ulp in WGSL: 4 u past the bound's own u|y|). All
  at most 2k + b + 6 roundings relative to loss + sum(t) / b. Each exp call of row r reaches the loss
  with weight (T_r / b) s_j at argument d_j; the row's log with weight (T_r / b) |L_r| (relative) and
  T_r / b (absolute).
- dz: S (k - 1), the quotient exp(d_j) / S (2.5 ulp: 5 u), the subtraction (u), the division by b
  (5 u, one of them the bound's own): k + 10 relative to (s_j + t_j) / b. The exp calls: the sum's
  (weight s_j s_i / b each) and the numerator's (s_j / b); no log.
"""
import numpy as np


def _parts(z):
    m = z.max(axis=1, keepdims=True)
    d = z - m
    e = np.exp(d)
    S = e.sum(axis=1, keepdims=True)
    return d, e / S, S


def forward(z, t):
    z = np.asarray(z, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    b = z.shape[0]
    d, s, S = _parts(z)
    rows = (t * (np.log(S) - d)).sum(axis=1)
    return {"loss": np.array([rows.sum() / b]), "dz": (s - t) / b}


def terms(z, t):
    z = np.asarray(z, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    b, k = z.shape
    d, s, S = _parts(z)
    L = np.log(S[:, 0])
    T = t.sum(axis=1) / b                           # each row's target mass, over b
    loss = (t * (L[:, None] - d)).sum() / b
    sd = (s * np.abs(d)).sum(axis=1)                # per row: sum_i s_i |d_i|
    dz_mag = (s + t) / b
    return {
        "loss": {"terms": np.array([2.0 * k + b + 6]), "magnitude": np.array([loss + T.sum()]),
                 "exp": {"weight": np.array([T.sum()]), "weighted_arg": np.array([(T * sd).sum()])},
                 "log": {"weight": np.array([(T * np.abs(L)).sum()]), "abs_weight": np.array([T.sum()])}},
        "dz": {"terms": np.full(z.shape, k + 10.0), "magnitude": dz_mag,
               "exp": {"weight": 2 * s / b, "weighted_arg": s / b * (np.abs(d) + sd[:, None])},
               "log": {"weight": np.zeros(z.shape), "abs_weight": np.zeros(z.shape)}},
    }
