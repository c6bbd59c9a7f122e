"""Reference for core/reduce/median_rows@1: sort each row (stable), take the middle.

The VJP routes each row's cotangent to the column the forward selected (numpy's stable
argsort, the same permutation as the kernel's insertion sort) and is zero elsewhere.
"""
import numpy as np


def forward(u):
    """sort each row -> middle"""
    u = np.asarray(u)
    return np.sort(u, axis=-1, kind="stable")[:, u.shape[1] // 2]


def argmedian(u):
    u = np.asarray(u)
    return np.argsort(u, axis=-1, kind="stable")[:, u.shape[1] // 2]


def vjp(u, dy):
    """cotangent routed to the median's column"""
    u = np.asarray(u)
    dy = np.asarray(dy)
    du = np.zeros(u.shape, dtype=np.result_type(dy.dtype, np.float32))
    du[np.arange(u.shape[0]), argmedian(u)] = dy
    return du


def kinks(u, *, h):
    """Per row: True where moving every element by at most h can make another element the median."""
    s = np.sort(np.asarray(u, dtype=np.float64), axis=-1)
    mid = s.shape[1] // 2
    near = np.zeros(s.shape[0], dtype=bool)
    if mid > 0:
        near |= s[:, mid] - s[:, mid - 1] <= 2 * h
    if mid + 1 < s.shape[1]:
        near |= s[:, mid + 1] - s[:, mid] <= 2 * h
    return near
