"""The reference path of an assignment program: numpy, f32, exactly the semantics of
docs/assignment-programs.md.

Every operation is one numpy call on float32 arrays, so it is rounded to f32 once, as WGSL's f32
is (no fused multiply-add, no wider accumulator). exp and log are computed in f64 and rounded
once to f32 (so, but for a double rounding about once in 2^29 values, the correctly rounded
result, the same on every machine whatever numpy's SIMD dispatch). A reduction runs left to
right: ``sum`` is ``np.add.accumulate`` (a sequential f32 recurrence, never numpy's pairwise
sum); min/max/argmin/argmax return the first extreme, ignoring NaNs.

Loop variables are array axes: a value inside a loop or reduction nest of depth d is an array of
ndim 1 + d (rows first), broadcast where it does not depend on a variable. Rows are evaluated
in chunks, and a statement's outermost loop in pieces, so that at most about BUDGET values of
one expression are alive at once."""
from __future__ import annotations

import numpy as np

from ..errors import StudioError
from .slots import Bound, affine, check
from .syntax import INT, PAIRWISE, Assign, Bin, Call, Int, Let, LetRef, Num, Read, Reduce, Size, ToF32, Unary, Var

BUDGET = 1 << 22
FRAME_WORDS = 1 << 25          # a frame built by a rule, per chunk of rows (frame_rows)
LIMIT = 1 << 28                 # values of one reduction alive at once, past which evaluate refuses
_F32 = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}
_INT = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod}
_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}


def pairwise_sum(terms: np.ndarray) -> np.ndarray:
    """The pairwise order of a sum over the last axis (docs/assignment-programs.md, "The order of a
    sum"), level by level: each level adds the pairs (0, 1), (2, 3), ... of the one before in f32,
    and an odd last element goes up unchanged, until one value is left. ``terms`` has at least one
    element on the last axis; the result has the other axes."""
    x = np.asarray(terms)
    while x.shape[-1] > 1:
        n = x.shape[-1]
        half = n // 2
        up = np.empty(x.shape[:-1] + (n - half,), np.float32)
        np.add(x[..., 0:2 * half:2], x[..., 1:2 * half:2], out=up[..., :half], dtype=np.float32)
        if n % 2:
            up[..., half] = x[..., n - 1]
        x = up
    return np.array(x[..., 0], dtype=np.float32)


def evaluate(prog, frame: np.ndarray, *, role: str | None = None, k: int | None = None, s: int | None = None,
             m: int | None = None, in_place: bool = False) -> np.ndarray:
    """Apply the program to every row of ``frame`` (float32, shape (rows, width)) and return the
    new frame. ``prog`` is a Bound (from check_program), or a Program with role, k, s, m given
    (then checked here first). ``in_place``: a C-contiguous float32 frame is updated and returned
    itself (no copy: the rules that build their own frame, system.py)."""
    bound = prog if isinstance(prog, Bound) else _bind(prog, role, k, s, m)
    lay = bound.layout
    arr = np.asarray(frame)
    if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[1] != lay.width:
        raise StudioError(f"a {lay.role} frame is float32 of shape (rows, {lay.width}); got {arr.dtype} {arr.shape}",
                          field="frame", hint=f"width = {'2k + s' if lay.role == 'contribution' else '2k + m + 1'} "
                                              f"with k={lay.k}, s={lay.s}, m={lay.m}")
    out = arr if in_place and arr.flags.c_contiguous and arr.flags.writeable else \
        np.array(arr, dtype=np.float32, order="C", copy=True)
    step = max(1, BUDGET // max(1, bound.volume))
    with np.errstate(all="ignore"):                    # IEEE: x/0 is ±inf or NaN, log(-1) is NaN
        for r0 in range(0, out.shape[0], step):
            _Run(bound, out[r0:r0 + step]).program()
    return out


def frame_rows(bound: Bound, words: int | None = None) -> int:
    """How many rows of a frame to build at once: whole chunks of the evaluator's row step, about
    ``words`` (default FRAME_WORDS) f32 words in all (a caller that builds frames chunk by chunk)."""
    words = FRAME_WORDS if words is None else words
    step = max(1, BUDGET // max(1, bound.volume))
    return step * max(1, words // max(1, bound.layout.width * step))


def evaluate_rows(bound: Bound, head: np.ndarray, rows: np.ndarray, take: slice) -> np.ndarray:
    """Slots ``take`` of the program run on the frames ``[head | row | 0 ...]``, one per row of
    ``rows`` (a contribution: head = the parameters, a row = a sample). The frames are built a
    chunk of rows at a time (frame_rows) and evaluated in place: the same bits as one frame."""
    head, rows = np.asarray(head, np.float32).reshape(-1), np.asarray(rows, np.float32)
    n, h, w = rows.shape[0], head.size, rows.shape[1]
    step = frame_rows(bound)
    out = None
    for r0 in range(0, n, step):
        chunk = rows[r0:r0 + step]
        frame = np.zeros((chunk.shape[0], bound.layout.width), np.float32)
        frame[:, :h] = head
        frame[:, h:h + w] = chunk
        done = evaluate(bound, frame, in_place=True)[:, take]
        if n <= step:
            return done                             # rows of the frame: a view, no copy
        if out is None:
            out = np.empty((n, done.shape[1]), np.float32)
        out[r0:r0 + chunk.shape[0]] = done
    return out


def evaluate_statement(bound: Bound, frame: np.ndarray, index: int, lets: dict) -> np.ndarray | None:
    """Statement ``index`` of the program alone on ``frame`` (float32, C-contiguous: updated in
    place), the earlier lets given (name -> one value per row): what the staged device path runs on
    the host (studio/engine/learner/staged.py). Returns a let's values (one per row), else None."""
    st = bound.program.statements[index]
    step = max(1, BUDGET // max(1, bound.volume))
    got = []
    with np.errstate(all="ignore"):
        for r0 in range(0, frame.shape[0], step):
            run = _Run(bound, frame[r0:r0 + step])
            run.lets = {n: np.asarray(v)[r0:r0 + step] for n, v in lets.items()}
            if isinstance(st, Let):
                got.append(np.broadcast_to(run.ev(st.expr, ()), (run.rows,)))
            else:
                run.assign(st)
    return np.concatenate(got) if isinstance(st, Let) and got else None


def _bind(prog, role, k, s, m) -> Bound:
    if role is None or k is None or s is None or m is None:
        raise StudioError("evaluate needs a checked program, or role, k, s and m", field="program",
                          hint="bound = check_program(prog, role=..., k=..., s=..., m=...); evaluate(bound, frame)")
    return check(prog, role=role, k=k, s=s, m=m)


class _Run:
    def __init__(self, bound: Bound, cur: np.ndarray):
        self.lay, self.cur, self.rows = bound.layout, cur, cur.shape[0]
        self.sizes = self.lay.sizes
        self.lets: dict[str, np.ndarray] = {}
        self.statements = bound.program.statements

    def program(self) -> None:
        for st in self.statements:
            if isinstance(st, Let):
                self.lets[st.name] = np.broadcast_to(self.ev(st.expr, ()), (self.rows,)).copy()
            else:
                self.assign(st)

    def assign(self, st: Assign) -> None:
        scope = tuple((lp.var, self.const(lp.lo), self.const(lp.hi)) for lp in st.loops)
        if any(hi <= lo for _, lo, hi in scope):
            return
        pieces = [scope]
        if scope:                                     # the outermost loop in pieces of at most BUDGET values
            var, lo, hi = scope[0]
            inner = max(1, int(np.prod([b - a for _, a, b in scope[1:]], dtype=np.int64)))
            step = max(1, BUDGET // (inner * self.rows))
            pieces = [((var, a, min(a + step, hi)),) + scope[1:] for a in range(lo, hi, step)]
        results = []
        for sc in pieces:                               # all values first: one parallel assignment
            shape = (self.rows,) + tuple(b - a for _, a, b in sc)
            vals = np.broadcast_to(self.ev(st.expr, sc), shape).reshape(self.rows, -1)
            if np.may_share_memory(vals, self.cur):   # a view of the frame: keep the values before any write
                vals = vals.copy()
            results.append((self.where(st.target, sc, shape[1:]), vals))
        for slots, vals in results:
            self.cur[:, slots] = vals

    def where(self, r: Read, scope, extents):
        """The slots a statement writes, in iteration order: a slice when the index is one loop
        variable (the box's only one) times c > 0 plus a constant, else their positions."""
        if r.index is not None and len(scope) == 1:
            c, co = affine(r.index, self.sizes)
            step = co.get(scope[0][0], 0)
            if len(co) == 1 and step > 0:
                _, lo, hi = scope[0]
                first = self.lay.views[r.view][0] + c + step * lo
                return slice(first, first + step * (hi - lo - 1) + 1, step)
        return self.slots(r, scope, extents).reshape(-1)

    def const(self, e) -> int:
        return int(self.ev(e, ()).reshape(-1)[0])

    def slots(self, r: Read, scope, extents) -> np.ndarray:
        base, _ = self.lay.views[r.view]
        if r.index is None:
            return np.full(extents or (1,), base, np.int64)
        return np.broadcast_to(base + self.ev(r.index, scope)[0], extents)

    def ev(self, e, scope) -> np.ndarray:
        d = len(scope)
        one = (1,) * (d + 1)
        if isinstance(e, Int):
            return np.full(one, e.value, np.int64)
        if isinstance(e, Size):
            return np.full(one, self.sizes[e.name], np.int64)
        if isinstance(e, Var):
            p = next(i for i, (v, _, _) in enumerate(scope) if v == e.name)
            _, lo, hi = scope[p]
            shape = [1] * (d + 1)
            shape[p + 1] = hi - lo
            return np.arange(lo, hi, dtype=np.int64).reshape(shape)
        if isinstance(e, Num):
            return np.full(one, e.value, np.float32)
        if isinstance(e, LetRef):
            return self.lets[e.name].reshape((self.rows,) + (1,) * d)
        if isinstance(e, Read):
            if e.index is None:
                return self.cur[:, self.lay.views[e.view][0]].reshape((self.rows,) + (1,) * d)
            return self.read(e, scope)
        if isinstance(e, ToF32):
            return self.ev(e.operand, scope).astype(np.float32)
        if isinstance(e, Unary):
            x = self.ev(e.operand, scope)
            return np.logical_not(x) if e.op == "not" else np.negative(x)
        if isinstance(e, Bin):
            a, b = self.ev(e.left, scope), self.ev(e.right, scope)
            if e.op in _CMP:
                return _CMP[e.op](a, b)
            if e.op in ("and", "or"):
                return np.logical_and(a, b) if e.op == "and" else np.logical_or(a, b)
            return (_INT if e.ty == INT else _F32)[e.op](a, b)
        if isinstance(e, Call):
            return self.call(e, scope)
        if isinstance(e, Reduce):
            return self.reduce(e, scope)
        raise TypeError(f"cannot evaluate {e!r}")       # pragma: no cover

    def read(self, e: Read, scope) -> np.ndarray:
        """Slots over the loop axes: a strided view where the index is one variable times c > 0
        (no copy: the common param[j], sample[j]), else a gather."""
        base = self.lay.views[e.view][0]
        c, co = affine(e.index, self.sizes)
        if len(co) == 1:
            (v, step), = co.items()
            p = next(i for i, (name, _, _) in enumerate(scope) if name == v)
            _, lo, hi = scope[p]
            if step > 0:
                first = base + c + step * lo
                shape = [self.rows] + [1] * len(scope)
                shape[p + 1] = hi - lo
                return self.cur[:, first:first + step * (hi - lo):step].reshape(shape)
        return self.cur[:, base + self.ev(e.index, scope)[0]]

    def call(self, e: Call, scope) -> np.ndarray:
        xs = [self.ev(a, scope) for a in e.args]
        f = e.func
        if f in ("exp", "log"):
            return getattr(np, f)(xs[0].astype(np.float64)).astype(np.float32)
        if f == "sqrt":
            return np.sqrt(xs[0])
        if f == "abs":
            return np.abs(xs[0])
        if f == "select":
            return np.where(xs[0], xs[1], xs[2]).astype(np.float32, copy=False)
        a, b = xs
        better = np.less(b, a) if f == "min" else np.greater(b, a)     # b replaces a only if strictly better
        return np.where(better | np.isnan(a), b, a).astype(np.float32, copy=False)

    def reduce(self, e: Reduce, scope) -> np.ndarray:
        lo, hi = self.const(e.lo), self.const(e.hi)
        d = len(scope)
        if hi <= lo:
            empty = {"sum": 0.0, "min": np.inf, "max": -np.inf, "argmin": -1.0, "argmax": -1.0}[e.func]
            return np.full((1,) * (d + 1), empty, np.float32)
        alive = self.rows * (hi - lo) * int(np.prod([b - a for _, a, b in scope], dtype=np.int64))
        if alive > LIMIT:
            raise StudioError(f"{e} needs {alive:,} values at once ({self.rows} row(s)); the evaluator's limit is "
                              f"{LIMIT:,}", hint="nest fewer long reductions, or use smaller k, s, m")
        body = self.ev(e.body, scope + ((e.var, lo, hi),))
        body = np.broadcast_to(body, body.shape[:-1] + (hi - lo,))
        if e.func == "sum" and e.order == PAIRWISE:
            return pairwise_sum(body)
        if e.func == "sum":       # a temporary of this reduction only is accumulated in place
            out = body if body.flags.owndata and body.flags.writeable and body.dtype == np.float32 else None
            return np.add.accumulate(body, axis=-1, dtype=np.float32, out=out)[..., -1]
        extreme = (np.fmin if e.func in ("min", "argmin") else np.fmax).reduce(body, axis=-1)
        first = np.argmax(body == extreme[..., None], axis=-1)        # all NaN: index 0
        if e.func.startswith("arg"):
            return (first + lo).astype(np.float32)
        return np.take_along_axis(body, first[..., None], axis=-1)[..., 0]


__all__ = ["evaluate", "evaluate_rows", "evaluate_statement", "frame_rows", "pairwise_sum", "BUDGET", "LIMIT"]
