"""Reference for core/signal/spiky_signal@1.

y[i] = slow + fast + noise, except ~0.5% of samples replaced by a spike of
magnitude 5..10 with a random sign. Everything random comes from the
lowbias32 integer hash in wrapping u32 arithmetic (the same operations as the
WGSL kernel), and every float value is an integer below 2^24 times a power of
two, so the result is exact in f64 and in f32:

    mix   = hash(seed ^ 0x9E3779B9)
    slow  = triangle of period 4096, amplitude 1     (multiple of 2^-12)
    fast  = triangle of period 256,  amplitude 0.25  (multiple of 2^-10)
    h     = hash(i ^ mix)
    noise = ((h >> 16) * 2^-16 - 0.5) * 2^-3          (|noise| <= 1/16, multiple of 2^-19)
    g     = hash(h ^ 0x85EBCA6B)
    spike if g % 200 == 0:  +-(5 + 5 * (g >> 16) * 2^-16), sign from bit 8 of g
"""
import numpy as np

_U = np.uint32


def _hash(v):
    """lowbias32 (Chris Wellons), elementwise on uint32 with wraparound."""
    v = np.atleast_1d(np.asarray(v, dtype=np.uint32))  # arrays wrap silently; scalars would warn
    v = v ^ (v >> _U(16))
    v = v * _U(0x7FEB352D)
    v = v ^ (v >> _U(15))
    v = v * _U(0x846CA68B)
    v = v ^ (v >> _U(16))
    return v


def _triangle(t, period):
    """|2t - period| for t in [0, period): integer triangle in [0, period]."""
    t2 = t.astype(np.int64) * 2
    return np.abs(t2 - period)


def forward(*, n, seed):
    n = int(n)
    i = np.arange(n, dtype=np.uint32)
    mix = _hash(_U(int(seed) & 0xFFFFFFFF) ^ _U(0x9E3779B9))  # shape (1,), broadcasts
    ph1 = mix % _U(4096)
    ph2 = (mix >> _U(12)) % _U(256)
    # slow triangle: (|2t - 4096| * 2 - 4096) * 2^-12 in [-1, 1]
    a1 = _triangle((i + ph1) % _U(4096), 4096)
    slow = (a1 * 2 - 4096).astype(np.float64) * 2.0 ** -12
    # fast triangle: (|2t - 256| * 2 - 256) * 2^-10 in [-0.25, 0.25]
    a2 = _triangle((i + ph2) % _U(256), 256)
    fast = (a2 * 2 - 256).astype(np.float64) * 2.0 ** -10
    h = _hash(i ^ mix)
    noise = ((h >> _U(16)).astype(np.float64) * 2.0 ** -16 - 0.5) * 2.0 ** -3
    y = (slow + fast) + noise
    g = _hash(h ^ _U(0x85EBCA6B))
    spike = (g % _U(200)) == 0
    mag = 5.0 + (5 * (g >> _U(16)).astype(np.int64)).astype(np.float64) * 2.0 ** -16
    sign = np.where((g >> _U(8)) & _U(1), -1.0, 1.0)
    return np.where(spike, sign * mag, y)
