"""Reference for core/nn/layernorm@1: y[r, j] = (x[r, j] - mu_r) / sqrt(var_r + eps), mu_r the row's
mean, var_r its biased variance (divided by cols), eps = 1e-5 (as an f32, the kernel's constant).

``terms`` and ``vjp_terms`` give, per output, the bound's inputs from this f64 evaluation of that
output (docs/tolerance.md, "The bound, per output"): k = cols + 8 roundings at most on any path,
the first-order magnitude they are relative to, and the weight of WGSL's `inverseSqrt`."""
import numpy as np

EPS = float(np.float32(1e-5))
U = 2.0 ** -24


def _parts(x):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[1]
    mu = x.mean(axis=1, keepdims=True)
    c = x - mu
    v = (c * c).mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(v + EPS)
    a = np.abs(x).mean(axis=1, keepdims=True)
    e_mu = (n + 4) * U * a                  # the computed mean's error: the sum, then / cols
    # the relative error of r (its built-in aside): the variance's roundings and the mean's error
    rho = 1 + (v + e_mu * e_mu / ((n + 8) * U)) / (v + EPS)
    # below 2^-126 a rounding is absolute (or a flush to zero): the mean's and x - mean's, times r
    tiny = r * 2.0 ** -124 / ((n + 8) * U)
    return n, a, e_mu, c, v, r, rho, tiny


def forward(x):
    _, _, _, c, _, r, _, _ = _parts(x)
    return c * r


def terms(x):
    """|dy_j| <= r (E_mu + u|c_j|) + |y_j| (rel. error of r) + u|y_j|: as gamma_(cols+10) * M with
    M = r (mean|x| + |c_j|) + |y_j| rho; inverseSqrt's error reaches y_j with weight |y_j|."""
    n, a, _, c, _, r, rho, tiny = _parts(x)
    y = np.abs(c * r)
    return {"terms": n + 8.0, "magnitude": r * (a + np.abs(c)) + y * rho + tiny,
            "inverseSqrt": {"weight": y}}


def vjp(x, dy):
    """dx = r * (dy - mean(dy) - y * mean(dy * y)), y the normalized row"""
    _, _, _, c, _, r, _, _ = _parts(x)
    dy = np.asarray(dy, dtype=np.float64)
    y = c * r
    return r * (dy - dy.mean(axis=1, keepdims=True) - y * (dy * y).mean(axis=1, keepdims=True))


def vjp_terms(x, dy):
    """The device VJP recomputes mu, var and r as the forward does, then gbar = sum(dy / cols),
    p = sum((dy / cols) * y) and dx = r * ((dy_j - gbar) - y_j * p). First order, relative to
    M_j below, every rounding on the way is within k = cols + 8 of them: r's relative error
    through R_j = r |dy_j - gbar| + 3 r |y_j p|, the mean's error through y, gbar's and p's sums,
    and the last few operations. inverseSqrt's error reaches dx_j with weight R_j."""
    n, a, e_mu, c, v, r, rho, tiny = _parts(x)
    dy = np.asarray(dy, dtype=np.float64)
    y = c * r
    gbar = dy.mean(axis=1, keepdims=True)
    g_abs = np.abs(dy).mean(axis=1, keepdims=True)
    p = (dy * y).mean(axis=1, keepdims=True)
    p_abs = (np.abs(dy * y)).mean(axis=1, keepdims=True)
    dx = r * (dy - gbar - y * p)
    big_r = r * np.abs(dy - gbar) + 3 * r * np.abs(y * p)
    mean_err = r * r * (np.abs(p) + np.abs(y) * g_abs) * e_mu / ((n + 8) * U)
    rest = r * (g_abs + 2 * np.abs(y) * p_abs + 4 * np.abs(y * p) + 2 * np.abs(dy - gbar)) + np.abs(dx)
    return {"terms": n + 8.0, "magnitude": big_r * rho + mean_err + rest + tiny * (1 + r * (np.abs(p) + np.abs(y) * g_abs)),
            "inverseSqrt": {"weight": big_r}}
