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
one expression are alive at once.

Three ways of doing the same arithmetic faster, none changing a bit (tests/learner/
test_pairwise_speed_paths.py checks each against the plain way, with controls that must fail):
a contribution's rows are evaluated without building their frames (``_Split``: the parameters are
read from one vector broadcast over the rows, the sample from the samples array, and the
contribution written into its own array: a contribution reads only [0, k + s) and writes only
[k + s, 2k + s), slots.py); a long pairwise sum is computed in aligned blocks of a power of two
terms (``pairwise_blocks``: the tree's own nodes, so its body's values are evaluated a block at a
time, in cache); and the row chunks of a contribution run on threads (each row's operations, and
so its bits, are the same on any thread)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import StudioError
from .slots import Bound, affine, check
from .syntax import INT, PAIRWISE, Assign, Bin, Call, Int, Let, LetRef, Num, Read, Reduce, Size, ToF32, Unary, Var

BUDGET = 1 << 22
FRAME_WORDS = 1 << 25          # a frame built by a rule, per chunk of rows (frame_rows)
LIMIT = 1 << 28                 # values of one reduction alive at once, past which evaluate refuses
PAIRWISE_BLOCK = 1 << 19        # values of one block of a long pairwise sum's terms alive at once (about L2)
PAIRWISE_TOP = 10               # ... each block brought up to 2^PAIRWISE_TOP values a row, the rest done together
THREADS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
SPLIT_PIECE = 1 << 18           # values of a contribution statement computed and written at once (_Split)
THREAD_WORDS = 1 << 20          # a contribution's row chunks go to threads when each is at least this much work
_F32 = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}
_INT = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod}
_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}


def pairwise_sum(terms: np.ndarray) -> np.ndarray:
    """The pairwise order of a sum over the last axis (docs/assignment-programs.md, "The order of a
    sum"), level by level: each level adds the pairs (0, 1), (2, 3), ... of the one before in f32,
    and an odd last element goes up unchanged, until one value is left. ``terms`` has at least one
    element on the last axis; the result has the other axes."""
    return np.array(pairwise_levels(terms, None)[..., 0], dtype=np.float32)


def pairwise_levels(terms: np.ndarray, levels: int | None) -> np.ndarray:
    """Level ``levels`` of the pairwise tree over the last axis (None: the top, one element), each
    level as in pairwise_sum; a level past the top is the top."""
    x = np.asarray(terms)
    done = 0
    while x.shape[-1] > 1 and (levels is None or done < levels):
        n = x.shape[-1]
        half = n // 2
        up = np.empty(x.shape[:-1] + (n - half,), np.float32)
        np.add(x[..., 0:2 * half:2], x[..., 1:2 * half:2], out=up[..., :half], dtype=np.float32)
        if n % 2:
            up[..., half] = x[..., n - 1]
        x, done = up, done + 1
    return x


def pairwise_blocks(block_terms, n: int, size: int, levels: int | None = None) -> np.ndarray:
    """The pairwise sum of n terms computed a block at a time: ``block_terms(a, b)`` gives the
    terms [a, b) (last axis), ``size`` is a power of two. Element i of level L of the tree is the
    full binary tree over the aligned terms [i 2^L, min((i + 1) 2^L, n)) (an odd last element
    going up unchanged keeps the alignment), so for L <= log2(size) a block's own level L is the
    tree's level L over the block's terms, the last (a shorter tail) included: every block before
    it is a whole number of pairs at each level below. Each block is brought up ``levels`` levels
    (default log2(size): one sum per block), the blocks' levels are put side by side (the tree's
    level L) and pairwise_levels finishes: the same additions of the same operands as pairwise_sum
    over all n terms, so the same bits."""
    if size < 1 or size & (size - 1):
        raise ValueError(f"a block of a pairwise sum is a power of two terms, not {size}")
    top = size.bit_length() - 1
    levels = top if levels is None else levels
    if not 0 <= levels <= top:
        raise ValueError(f"a block of {size} terms has levels 0..{top}, not {levels}")
    parts = [pairwise_levels(block_terms(a, min(a + size, n)), levels) for a in range(0, n, size)]
    if len(parts) > 1:
        lead = np.broadcast_shapes(*(q.shape[:-1] for q in parts))      # the other axes (rows) broadcast
        parts = np.concatenate([np.broadcast_to(q, lead + q.shape[-1:]) for q in parts], axis=-1)
    else:
        parts = parts[0]
    return np.array(pairwise_levels(parts, None)[..., 0], dtype=np.float32)


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
    ``rows`` (a contribution: head = the parameters, a row = a sample): the same bits as one frame.
    A contribution's own slots (``take`` = [k + s, 2k + s)) are computed without building the frames
    (``_Split``), its row chunks on threads when they are large; any other ``take`` builds the
    frames a chunk of rows at a time (frame_rows) and evaluates them in place."""
    head, rows = np.asarray(head, np.float32).reshape(-1), np.asarray(rows, np.float32)
    n, h, w = rows.shape[0], head.size, rows.shape[1]
    lay = bound.layout
    if lay.role == "contribution" and (h, w) == (lay.k, lay.s) and \
            (take.start, take.stop, take.step) in ((lay.k + lay.s, lay.width, None), (lay.k + lay.s, lay.width, 1)):
        return contributions(bound, head, rows)
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


def contributions(bound: Bound, params: np.ndarray, samples: np.ndarray, out: np.ndarray | None = None,
                  threads: int | None = None) -> np.ndarray:
    """A contribution program on every sample: (rows, k) float32, the contribution slots of the
    frames ``[params | sample | 0]`` (evaluate's bits), without building them (``_Split``). The
    rows go in the evaluator's chunks (BUDGET), on up to ``threads`` (default THREADS) threads
    when a chunk is at least THREAD_WORDS values of work. ``out``: a C-contiguous float32 (rows, k)
    array to write into (returned)."""
    lay = bound.layout
    params = np.ascontiguousarray(params, np.float32).reshape(-1)
    samples = np.asarray(samples, np.float32)
    if lay.role != "contribution" or params.size != lay.k or samples.ndim != 2 or samples.shape[1] != lay.s:
        raise StudioError(f"a contribution reads {lay.k} parameters and samples of {lay.s} values; got "
                          f"{params.size} and {samples.shape}", field="samples")
    n = samples.shape[0]
    if out is None:
        out = np.empty((n, lay.k), np.float32)      # every contribution slot is written (slots.check)
    elif out.shape != (n, lay.k) or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise StudioError(f"out is float32 C-contiguous ({n}, {lay.k}); got {out.dtype} {out.shape}", field="out")
    step = max(1, BUDGET // max(1, bound.volume))
    starts = list(range(0, n, step))

    def run(r0: int) -> None:
        with np.errstate(all="ignore"):
            _Run(bound, _Split(params, samples[r0:r0 + step], out[r0:r0 + step])).program()

    threads = THREADS if threads is None else threads
    if threads > 1 and len(starts) > 1 and min(step, n) * bound.volume >= THREAD_WORDS:
        with ThreadPoolExecutor(min(threads, len(starts)), thread_name_prefix="assign-rows") as pool:  # this call's own
            for f in [pool.submit(run, r0) for r0 in starts]:
                f.result()                           # in row order: the first chunk's error first
    else:
        for r0 in starts:
            run(r0)
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


def _reduces(e) -> bool:
    """Whether the expression has a reduction in it."""
    return any(isinstance(n, Reduce) for n in e.walk())


class _Whole:
    """A frame a _Run reads and writes: one float32 array (rows, width)."""

    def __init__(self, arr: np.ndarray):
        self.arr, self.rows = arr, arr.shape[0]

    def column(self, slot: int) -> np.ndarray:
        return self.arr[:, slot]

    def strided(self, first: int, step: int, count: int) -> np.ndarray:
        return self.arr[:, first:first + step * count:step]

    def gather(self, idx: np.ndarray) -> np.ndarray:
        return self.arr[:, idx]

    def aliases(self, vals: np.ndarray) -> bool:
        return np.may_share_memory(vals, self.arr)

    def target(self, slots: slice) -> np.ndarray:
        return self.arr[:, slots]

    def write(self, slots, vals: np.ndarray) -> None:
        self.arr[:, slots] = vals


class _Split:
    """A contribution's frames ``[params | sample | contrib]`` without building them: the
    parameters one vector (read as one row, broadcast over the rows), the samples their own array
    (rows, s), the contribution slots ``out`` (rows, k). A contribution reads only [0, k + s) and
    writes only [k + s, 2k + s) (slots.check), so nothing it reads is ever written: the values
    read are those of the built frame, and a write needs no copy of the values first."""

    def __init__(self, head: np.ndarray, rows: np.ndarray, out: np.ndarray):
        self.head, self.body, self.out = head.reshape(1, -1), rows, out
        self.h, self.rows = head.size, rows.shape[0]
        self.w = self.h + rows.shape[1]              # the first written slot

    def column(self, slot: int) -> np.ndarray:
        return self.head[:, slot] if slot < self.h else self.body[:, slot - self.h]

    def strided(self, first: int, step: int, count: int) -> np.ndarray:
        last = first + step * (count - 1)
        if last < self.h:
            return self.head[:, first:last + 1:step]
        if first >= self.h:
            return self.body[:, first - self.h:last - self.h + 1:step]
        return self.gather(np.arange(first, last + 1, step, dtype=np.int64))

    def gather(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, np.int64)
        if idx.size == 0 or idx.max() < self.h:
            return self.head[:, idx]
        if idx.min() >= self.h:
            return self.body[:, idx - self.h]
        low = idx < self.h
        return np.where(low, self.head[:, np.where(low, idx, 0)], self.body[:, np.where(low, 0, idx - self.h)])

    def aliases(self, vals: np.ndarray) -> bool:
        return np.may_share_memory(vals, self.out)

    def target(self, slots: slice) -> np.ndarray:
        """The contribution slots ``slots`` (frame positions) of every row: a view of ``out``."""
        return self.out[:, slots.start - self.w:slots.stop - self.w:slots.step]

    def write(self, slots, vals: np.ndarray) -> None:
        if isinstance(slots, slice):
            self.target(slots)[...] = vals
        else:
            self.out[:, np.asarray(slots) - self.w] = vals


class _Run:
    def __init__(self, bound: Bound, cur):
        self.cur = cur if isinstance(cur, (_Whole, _Split)) else _Whole(cur)
        self.lay, self.rows = bound.layout, self.cur.rows
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
        split = isinstance(self.cur, _Split)          # nothing it reads is written: each piece written at once
        pieces = [scope]
        if scope:                                     # the outermost loop in pieces of at most BUDGET values
            var, lo, hi = scope[0]
            inner = max(1, int(np.prod([b - a for _, a, b in scope[1:]], dtype=np.int64)))
            small = split and not _reduces(st.expr)   # smaller pieces only where no reduction's LIMIT sees them
            step = max(1, (SPLIT_PIECE if small else BUDGET) // (inner * self.rows))
            pieces = [((var, a, min(a + step, hi)),) + scope[1:] for a in range(lo, hi, step)]
        results = []
        for sc in pieces:                               # all values first: one parallel assignment
            shape = (self.rows,) + tuple(b - a for _, a, b in sc)
            if (split or len(pieces) == 1) and self.into(st, sc, shape):
                continue
            vals = np.broadcast_to(self.ev(st.expr, sc), shape).reshape(self.rows, -1)
            if split:
                self.cur.write(self.where(st.target, sc, shape[1:]), vals)
                continue
            if self.cur.aliases(vals):                # a view of the frame: keep the values before any write
                vals = vals.copy()
            results.append((self.where(st.target, sc, shape[1:]), vals))
        for slots, vals in results:
            self.cur.write(slots, vals)

    def into(self, st: Assign, scope, shape) -> bool:
        """A statement over one loop whose slots are a slice and whose value is an f32 operation:
        that operation's values written straight into the slots (the ufunc's out: the same
        operation on the same operands, so the same bits, without a temporary). Where the operands
        overlap the slots (a frame read and written by one statement, the statement in one piece),
        numpy computes as if the operands were copied first (ufuncs guarantee that since numpy
        1.13): the parallel assignment's values."""
        e = st.expr
        if len(scope) != 1 or not isinstance(e, Bin) or e.ty == INT or e.op not in _F32:
            return False
        slots = self.where(st.target, scope, shape[1:])
        if not isinstance(slots, slice):
            return False
        a, b = self.ev(e.left, scope), self.ev(e.right, scope)
        if a.dtype != np.float32 or b.dtype != np.float32 or np.broadcast_shapes(a.shape, b.shape) != shape:
            self.cur.write(slots, np.broadcast_to(_F32[e.op](a, b), shape))
            return True
        _F32[e.op](a, b, out=self.cur.target(slots))
        return True

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
                return self.cur.column(self.lay.views[e.view][0]).reshape((-1,) + (1,) * d)
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
                shape = [-1] + [1] * len(scope)
                shape[p + 1] = hi - lo
                return self.cur.strided(first, step, hi - lo).reshape(shape)
        return self.cur.gather(base + self.ev(e.index, scope)[0])

    def pairwise_terms(self, e: Reduce, scope, lo: int, hi: int) -> np.ndarray:
        """The body's values at e.var in [lo, hi) (the last axis)."""
        body = self.ev(e.body, scope + ((e.var, lo, hi),))
        return np.broadcast_to(body, body.shape[:-1] + (hi - lo,))

    @staticmethod
    def pairwise_block(per_term: int) -> int:
        """Terms per block of a long pairwise sum: a power of two, about PAIRWISE_BLOCK values alive."""
        return 1 << max(0, (max(1, PAIRWISE_BLOCK // max(1, per_term))).bit_length() - 1)

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
        if e.func == "sum" and e.order == PAIRWISE:
            size = self.pairwise_block(alive // (hi - lo))
            if hi - lo >= 2 * size and not _reduces(e.body):   # the tree's aligned blocks, each in cache (a body
                # with a reduction of its own keeps the whole range: its LIMIT check sees what it always saw)
                return pairwise_blocks(lambda a, b: self.pairwise_terms(e, scope, lo + a, lo + b), hi - lo, size,
                                       max(0, size.bit_length() - 1 - PAIRWISE_TOP))
            return pairwise_sum(self.pairwise_terms(e, scope, lo, hi))
        body = self.ev(e.body, scope + ((e.var, lo, hi),))
        body = np.broadcast_to(body, body.shape[:-1] + (hi - lo,))
        if e.func == "sum":       # a temporary of this reduction only is accumulated in place
            out = body if body.flags.owndata and body.flags.writeable and body.dtype == np.float32 else None
            return np.add.accumulate(body, axis=-1, dtype=np.float32, out=out)[..., -1]
        extreme = (np.fmin if e.func in ("min", "argmin") else np.fmax).reduce(body, axis=-1)
        first = np.argmax(body == extreme[..., None], axis=-1)        # all NaN: index 0
        if e.func.startswith("arg"):
            return (first + lo).astype(np.float32)
        return np.take_along_axis(body, first[..., None], axis=-1)[..., 0]


__all__ = ["contributions", "evaluate", "evaluate_rows", "evaluate_statement", "frame_rows", "pairwise_blocks",
           "pairwise_levels", "pairwise_sum", "BUDGET", "LIMIT"]
