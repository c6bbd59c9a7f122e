"""How far a correct device may land from the numpy reference: WGSL's accuracy table propagated
through the program, per row and slot (docs/assignment-programs.md, "How the two agree").

Both sides start from the same frame. + - * are correctly rounded on both (the emission keeps
products out of FMAs and reductions in order), so while every operand agrees bit for bit the
results do too: the bound stays 0 and the slot must match exactly. Past an operation WGSL does not
round correctly — x / y (2.5 ulp), sqrt (from 1/inverseSqrt: ~4.5 ulp), exp (3 + 2|x| ulp), log
(3 ulp, or 2^-21 absolute on [0.5, 2]) — a bound e with |device - reference| <= e is carried
forward, first order plus rounding:
  a ± b: ea + eb + ulp;  a * b: |a| eb + |b| ea + ea eb + ulp;  a / b: (ea + |a/b| eb) / (|b| - eb) + 3 ulp;
  min/max/abs/-: max(ea, eb) or ea;  sum: sum of e + the rounding of each partial sum after the first
  that differs (a pairwise sum: each node of its tree as a ± b);  a comparison whose operands are
  within their bounds of each other may go either way: select then allows either branch, and
  argmin/argmax any index of the range.
"""
from __future__ import annotations

import numpy as np

from .slots import Bound
from .syntax import INT, PAIRWISE, Assign, Bin, Call, Int, Let, LetRef, Num, Read, Reduce, Size, ToF32, Unary, Var

U = 2.0 ** -24
TINY = 2.0 ** -149
INEXACT = {"/": 3.0, "sqrt": 5.0, "exp": 3.5, "log": 3.5}      # device ulps + the reference's half ulp
_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}


def inexact_ops(bound: Bound) -> list[str]:
    """The operations of the program that WGSL does not round correctly."""
    found = set()
    for st in bound.program.statements:
        for n in st.expr.walk():
            if isinstance(n, Bin) and n.op == "/" and n.ty != INT:
                found.add("/")
            elif isinstance(n, Call) and n.func in INEXACT:
                found.add(n.func)
    return sorted(found)


def ulp(x) -> np.ndarray:
    """The f32 unit in the last place at magnitude x (f64 in, f64 out; subnormal floor)."""
    x = np.abs(np.asarray(x, np.float64))
    with np.errstate(all="ignore"):
        _, ex = np.frexp(np.where(np.isfinite(x), x, 0.0))
        out = np.maximum(np.ldexp(1.0, ex - 24), TINY)
    return np.where(np.isfinite(x), out, np.inf)


def error_bounds(bound: Bound, frame: np.ndarray) -> np.ndarray:
    """Per row and slot, the bound on |device - reference| after the program (0: must be equal)."""
    cur = np.array(frame, np.float32, copy=True)
    err = np.zeros(cur.shape, np.float64)
    step = max(1, (1 << 21) // max(1, bound.volume))
    with np.errstate(all="ignore"):
        for r0 in range(0, cur.shape[0], step):
            _Acc(bound, cur[r0:r0 + step], err[r0:r0 + step]).program()
    return err


def _grow(prop, z, k=1.0):
    """prop propagated from the operands plus k ulps of rounding; 0 stays 0 for exact ops."""
    prop = _clean(prop)
    mag = np.abs(np.asarray(z, np.float64)) * (1 + 4 * U) + prop
    return np.where(prop > 0, prop + k * ulp(mag), 0.0)


def _clean(bound):
    """A bound that came out NaN (inf * 0, inf - inf: an overflow upstream) is no bound: inf."""
    bound = np.asarray(bound, np.float64)
    return np.where(np.isnan(bound), np.inf, bound)


class _Acc:
    """Values (as the reference computes them) with error bounds: (value, bound) for f32,
    (value, uncertain) for bool, (value, None) for int."""

    def __init__(self, bound: Bound, cur, err):
        self.lay, self.cur, self.err, self.rows = bound.layout, cur, err, cur.shape[0]
        self.sizes, self.lets = self.lay.sizes, {}
        self.statements = bound.program.statements

    def program(self):
        for st in self.statements:
            if isinstance(st, Let):
                v, e = self.ev(st.expr, ())
                self.lets[st.name] = (np.broadcast_to(v, (self.rows,)).copy(), np.broadcast_to(e, (self.rows,)).copy())
            else:
                self.assign(st)

    def assign(self, st: Assign):
        scope = tuple((lp.var, self.const(lp.lo), self.const(lp.hi)) for lp in st.loops)
        if any(hi <= lo for _, lo, hi in scope):
            return
        shape = (self.rows,) + tuple(b - a for _, a, b in scope)
        v, e = self.ev(st.expr, scope)
        base = self.lay.views[st.target.view][0]
        idx = (np.full(shape[1:] or (1,), base, np.int64) if st.target.index is None else
               np.broadcast_to(base + self.ev(st.target.index, scope)[0][0], shape[1:])).reshape(-1)
        self.cur[:, idx] = np.broadcast_to(v, shape).reshape(self.rows, -1)
        self.err[:, idx] = np.broadcast_to(e, shape).reshape(self.rows, -1)

    def const(self, e) -> int:
        return int(self.ev(e, ())[0].reshape(-1)[0])

    def ev(self, e, scope):
        d = len(scope)
        one = (1,) * (d + 1)
        z = np.zeros(one)
        if isinstance(e, (Int, Size)):
            return np.full(one, e.value if isinstance(e, Int) else self.sizes[e.name], np.int64), None
        if isinstance(e, Var):
            p = next(i for i, (v, _, _) in enumerate(scope) if v == e.name)
            shape = [1] * (d + 1)
            shape[p + 1] = scope[p][2] - scope[p][1]
            return np.arange(scope[p][1], scope[p][2], dtype=np.int64).reshape(shape), None
        if isinstance(e, Num):
            return np.full(one, e.value, np.float32), z
        if isinstance(e, LetRef):
            v, x = self.lets[e.name]
            return v.reshape((self.rows,) + (1,) * d), x.reshape((self.rows,) + (1,) * d)
        if isinstance(e, Read):
            base = self.lay.views[e.view][0]
            if e.index is None:
                sh = (self.rows,) + (1,) * d
                return self.cur[:, base].reshape(sh), self.err[:, base].reshape(sh)
            idx = base + self.ev(e.index, scope)[0][0]
            return self.cur[:, idx], self.err[:, idx]
        if isinstance(e, ToF32):
            return self.ev(e.operand, scope)[0].astype(np.float32), z
        if isinstance(e, Unary):
            v, x = self.ev(e.operand, scope)
            return (np.logical_not(v), x) if e.op == "not" else (np.negative(v), x)
        if isinstance(e, Bin):
            return self.binary(e, scope)
        if isinstance(e, Call):
            return self.call(e, scope)
        return self.reduce(e, scope)

    def binary(self, e: Bin, scope):
        (a, ea), (b, eb) = self.ev(e.left, scope), self.ev(e.right, scope)
        if e.op in ("and", "or"):
            return (np.logical_and(a, b) if e.op == "and" else np.logical_or(a, b)), ea | eb
        if e.op in _CMP:
            if ea is None:
                return _CMP[e.op](a, b), np.zeros(np.broadcast(a, b).shape, bool)
            gap = np.abs(a.astype(np.float64) - b.astype(np.float64))
            unsure = (ea + eb > 0) & ~(gap > ea + eb)
            return _CMP[e.op](a, b), unsure
        if e.ty == INT:
            f = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod}[e.op]
            return f(a, b), None
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if e.op in ("+", "-"):
            v = a + b if e.op == "+" else a - b
            return v, _grow(ea + eb, v)
        if e.op == "*":
            v = a * b
            return v, _grow(np.abs(a64) * eb + np.abs(b64) * ea + ea * eb, v)
        v = a / b
        den = np.abs(b64) - eb
        prop = np.where(den > 0, (ea + np.abs(v.astype(np.float64)) * eb) / np.where(den > 0, den, 1.0), np.inf)
        return v, _clean(prop + INEXACT["/"] * ulp(np.abs(v.astype(np.float64)) + prop))

    def call(self, e: Call, scope):
        args = [self.ev(a, scope) for a in e.args]
        f = e.func
        if f == "select":
            (c, cu), (t, et), (o, eo) = args
            v = np.where(c, t, o).astype(np.float32, copy=False)
            x = np.where(c, et, eo)
            flip = _clean(np.abs(t.astype(np.float64) - o.astype(np.float64)) + np.maximum(et, eo))
            return v, np.where(cu, np.maximum(x, flip), x)
        if f in ("min", "max"):
            (a, ea), (b, eb) = args
            better = np.less(b, a) if f == "min" else np.greater(b, a)
            return np.where(better | np.isnan(a), b, a).astype(np.float32, copy=False), np.maximum(ea, eb)
        (a, ea), = args
        a64 = a.astype(np.float64)
        if f == "abs":
            return np.abs(a), ea
        if f == "sqrt":
            v = np.sqrt(a)
            lo = np.sqrt(np.maximum(a64 - ea, 0.0))
            den = lo + np.sqrt(np.maximum(a64, 0.0))
            prop = np.where(den > 0, ea / np.where(den > 0, den, 1.0), np.sqrt(ea))
            return v, _clean(prop + INEXACT["sqrt"] * ulp(np.abs(v.astype(np.float64)) + prop))
        if f == "exp":
            v = np.exp(a64).astype(np.float32)
            prop = _clean(np.where(ea > 0, np.exp(a64) * np.expm1(ea), 0.0))
            own = (INEXACT["exp"] + 2 * (np.abs(a64) + ea)) * ulp(np.abs(v.astype(np.float64)) + prop)
            return v, _clean(prop + own)
        v = np.log(a64).astype(np.float32)                          # log
        den = a64 - ea
        prop = np.where(den > 0, ea / np.where(den > 0, den, 1.0), np.inf)
        near_one = (a64 >= 0.5) & (a64 <= 2.0)
        own = np.where(near_one, 2.0 ** -21 + 0.5 * ulp(v), INEXACT["log"] * ulp(np.abs(v.astype(np.float64)) + prop))
        return v, _clean(prop + own)

    def reduce(self, e: Reduce, scope):
        lo, hi = self.const(e.lo), self.const(e.hi)
        d = len(scope)
        if hi <= lo:
            empty = {"sum": 0.0, "min": np.inf, "max": -np.inf, "argmin": -1.0, "argmax": -1.0}[e.func]
            return np.full((1,) * (d + 1), empty, np.float32), np.zeros((1,) * (d + 1))
        v, x = self.ev(e.body, scope + ((e.var, lo, hi),))
        shape = np.broadcast(v, x).shape[:-1] + (hi - lo,)
        v, x = np.broadcast_to(v, shape), np.broadcast_to(x, shape)
        if e.func == "sum" and e.order == PAIRWISE:        # the tree of evaluate.pairwise_sum, node by node
            while v.shape[-1] > 1:
                n, half = v.shape[-1], v.shape[-1] // 2
                a, b = v[..., 0:2 * half:2], v[..., 1:2 * half:2]
                ea, eb = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
                node = np.add(a, b, dtype=np.float32)
                err = ea + eb
                err = np.where(err > 0, err + 2 * U * (np.abs(node.astype(np.float64)) + err) + TINY, 0.0)
                if n % 2:
                    node = np.concatenate([node, v[..., n - 1:]], axis=-1)
                    err = np.concatenate([err, x[..., n - 1:]], axis=-1)
                v, x = node, err
            return v[..., 0], _clean(x[..., 0])
        if e.func == "sum":
            part = np.add.accumulate(v, axis=-1, dtype=np.float32)
            started = np.cumsum(x, axis=-1) > 0                   # partial sums that may differ
            rounding = 2 * U * np.where(started, np.abs(part.astype(np.float64)) + np.abs(v.astype(np.float64)), 0.0)
            n = hi - lo
            total = (x.sum(axis=-1) + rounding.sum(axis=-1) + started.sum(axis=-1) * TINY) / max(1e-300, 1 - 2 * U * n)
            return part[..., -1], _clean(total)
        extreme = (np.fmin if e.func in ("min", "argmin") else np.fmax).reduce(v, axis=-1)
        first = np.argmax(v == extreme[..., None], axis=-1)
        best = np.take_along_axis(v, first[..., None], axis=-1).astype(np.float64)
        ebest = np.take_along_axis(x, first[..., None], axis=-1)
        if e.func.startswith("arg"):
            v64 = v.astype(np.float64)
            reach = (v64 - x <= best + ebest) if e.func == "argmin" else (v64 + x >= best - ebest)
            others = reach & (x + ebest > 0)
            others &= np.arange(hi - lo) != first[..., None]
            return (first + lo).astype(np.float32), np.where(others.any(axis=-1), float(hi - lo - 1), 0.0)
        return best[..., 0].astype(np.float32), x.max(axis=-1)


__all__ = ["error_bounds", "inexact_ops", "ulp"]
