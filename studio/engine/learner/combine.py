"""The ordered combine (docs/requirements.md L5, docs/learner.md "The combine trees"): the sum of the
per-sample contributions is evaluated by an explicit tree, and the numerical contract names it.

canonical  A binary tree over the GLOBAL sample order 0..N-1. The node over the samples
           [lo, lo+n) is a leaf when n = 1 (that sample's contribution); otherwise it is
           node[lo, lo+p) + node[lo+p, lo+n) with p the largest power of two below n. Every node is
           one IEEE-754 binary32 addition per element (round to nearest even), left operand first.
           The tree depends on N alone, so the result is the same bits for any owners and split:
           an owner computes the maximal nodes whose samples it holds entirely, and the remaining
           nodes are added in the tree's own shape (``plan``), each the same addition of the same
           operands wherever it runs.
per-owner  Each non-empty owner sums its own samples, in the order of its list, by the same tree
           shape over list positions; the owners' partial sums are then combined by that tree
           shape over the non-empty owners in owner order. The result depends on the partition,
           so the contract names it (its hash).

The mean is numerator / mass with mass = f32(N) (exact: N < 2^24), one binary32 division per
element. Nothing reassociates: a different tree is a different contract hash.

precision  "f32": every node is an f32 addition (above). "bf16" (docs/requirements.md L11, docs/learner.md
           "bf16 combine"): the batch-contracting node rounded per owner — each non-empty owner's
           partial sum S_r (its f32 tree over its list) is rounded once to bfloat16 (rnd,
           studio.engine.bfloat16, correct rounding of the f32 value), the rounded partials are
           combined by f32 additions in the per-owner tree over owners, and the mean divides by
           f32(N). The partials are the owners', so bf16 needs the per-owner tree (the contract
           names the partition); the canonical tree is refused with bf16 (system.py)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .. import bfloat16
from .fingerprint import digest
from .syntax import ORDER_TEXT, SEQUENTIAL, sum_orders
from .system import System

CANONICAL = ("binary tree over the global sample order 0..N-1: node[lo, lo+n) = node[lo, lo+p) + "
             "node[lo+p, lo+n), p the largest power of two below n; a leaf is one sample's contribution")
PER_OWNER = ("per owner: the same tree shape over the positions of the owner's sample list; then the same tree "
             "shape over the non-empty owners in owner order")
PRECISION = "f32: every node is one IEEE-754 binary32 addition per element, round to nearest even, left operand first"
BF16 = ("bf16: each non-empty owner's partial sum (its f32 tree over its list) is rounded once to bfloat16 "
        "(round to nearest, ties to even, 8 significant bits, f32's exponent range, NaN quiet) and carried as that "
        "exact f32; the rounded partials are combined by the tree over owners, each node one IEEE-754 binary32 "
        "addition per element, round to nearest even, left operand first")
PRECISIONS = {"f32": PRECISION, "bf16": BF16}
MEAN = "mean = numerator / f32(N): one binary32 division per element; N exact in f32 (N < 2^24)"


def contract(system: System) -> dict:
    """The numerical contract of one update (what the contract hash covers)."""
    c = {"learner": "scellis.learner/v1", "k": system.k, "s": system.s, "m": system.m, "samples": int(system.samples.shape[0]),
         "contribution": system.contribution.hash, "update": system.update.hash,
         "combine": {"tree": system.tree, "order": CANONICAL if system.tree == "canonical" else PER_OWNER,
                     "precision": PRECISIONS[system.precision], "mean": MEAN}}
    if system.tree == "per-owner":
        c["combine"]["partition"] = system.partition_hash()
    sums = _sum_orders(system)
    if sums:                            # named where a program declares an order other than the default
        c["sums"] = sums
    return c


def _sum_orders(system: System) -> dict:
    """Each program's sums' orders in words, when one of them is not sequential (the default: a
    learner without one keeps the contract, and so the hash, it always had)."""
    found = {}
    for role in ("contribution", "update"):
        prog = getattr(getattr(system, role), "program", None)
        orders = sum_orders(prog.statements) if prog is not None else set()
        if orders - {SEQUENTIAL}:
            found[role] = [ORDER_TEXT[o] for o in sorted(orders)]
    return found


def contract_hash(system: System) -> str:
    return digest(json.dumps(contract(system), sort_keys=True, separators=(",", ":")))


def order_text(system: System) -> str:
    """The combine order in words, as checkpoints and reports record it."""
    c = contract(system)["combine"]
    return (f"{system.tree}: {c['order']}" + (f" (partition {c['partition'][:16]})" if "partition" in c else "")
            + (f"; {c['precision']}" if system.precision != "f32" else ""))


def split_point(n: int) -> int:
    """The largest power of two below n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def tree_sum(rows: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """The tree's value over a run of n >= 1 rows (its shape depends on n alone), in f32.
    A power-of-two run is added pairwise level by level, which is the same tree. ``overwrite``:
    ``rows`` (f32) is the caller's scratch, and its levels are added in place in it (no new array
    of n/2 rows, whose fresh pages an owner would fault in again every step)."""
    n = rows.shape[0]
    if n == 1:
        return np.array(rows[0], np.float32, copy=True)
    if n & (n - 1) == 0:                # level 1 into a new array (or in place), each level above in place
        x = np.add(rows[0::2], rows[1::2], out=rows[0::2] if overwrite else None, dtype=np.float32)
        s = 1
        while s < x.shape[0]:           # row 2si of level L + 1 = rows 2si and 2si + s of level L
            np.add(x[0::2 * s], x[s::2 * s], out=x[0::2 * s], dtype=np.float32)
            s *= 2
        return x[0] if x.shape[0] == 1 and not overwrite else x[0].copy()   # not a view holding other rows
    p = split_point(n)
    return np.add(tree_sum(rows[:p], overwrite), tree_sum(rows[p:], overwrite), dtype=np.float32)


# ------------------------------------------------------------------ the plan: who computes which node
@dataclass(frozen=True)
class Block:
    """A node an owner computes entirely: ``tree_sum`` over its rows ``[start, start + n)`` of the
    owner's contributions (the owner's samples in its canonical order, see ``owner_order``)."""
    owner: int
    start: int
    n: int
    lo: int = -1                       # canonical: the node's first global sample


@dataclass(frozen=True)
class Add:
    left: object                       # Block | Add
    right: object


def owner_order(system: System, owner: int) -> np.ndarray:
    """The order in which an owner holds its samples: ascending global index (canonical), its list
    order (per-owner)."""
    idx = system.owners[owner]
    return np.sort(idx) if system.tree == "canonical" else idx


def owner_samples(system: System, owner: int) -> np.ndarray:
    """The owner's samples in ``owner_order``: a view of the samples where they are one run of
    consecutive rows (no copy), else the rows gathered."""
    order = owner_order(system, owner)
    if order.size and int(order[-1]) - int(order[0]) == order.size - 1 and (np.diff(order) == 1).all():
        return system.samples[int(order[0]):int(order[-1]) + 1]
    return system.samples[order]


def plan(system: System):
    """The combine as a tree of Blocks (computed on their owner) and Adds (combined in this shape
    wherever the run places them): the root, and per owner its list of Blocks in order."""
    blocks: dict[int, list[Block]] = {o: [] for o in range(len(system.owners))}
    if system.tree == "canonical":
        a = system.assignment()
        change = np.flatnonzero(a[1:] != a[:-1]) + 1          # global positions where the owner changes
        sorted_idx = {o: np.sort(idx) for o, idx in enumerate(system.owners)}

        def node(lo: int, n: int):
            lo_c, hi_c = np.searchsorted(change, [lo + 1, lo + n])
            if lo_c == hi_c:                                  # one owner holds [lo, lo+n) entirely
                o = int(a[lo])
                b = Block(o, int(np.searchsorted(sorted_idx[o], lo)), n, lo)
                blocks[o].append(b)
                return b
            p = split_point(n)
            return Add(node(lo, p), node(lo + p, n - p))

        return node(0, int(a.size)), blocks
    parts = []
    for o, idx in enumerate(system.owners):
        if idx.size:
            b = Block(o, 0, int(idx.size))
            blocks[o].append(b)
            parts.append(b)

    def over(items):
        if len(items) == 1:
            return items[0]
        p = split_point(len(items))
        return Add(over(items[:p]), over(items[p:]))

    return over(parts), blocks


def block_sums(contribs: np.ndarray, blocks: list[Block], precision: str = "f32",
               overwrite: bool = False) -> list[np.ndarray]:
    """An owner's part of the combine: each of its blocks' tree value; at bf16 (per-owner: one block,
    the owner's whole list) that value rounded once to bfloat16, as the exact f32 it is.
    ``overwrite``: ``contribs`` (f32) is scratch, the tree added in place in it (tree_sum)."""
    sums = [tree_sum(contribs[b.start:b.start + b.n], overwrite) for b in blocks]
    return [rnd(s) for s in sums] if precision == "bf16" else sums


def rnd(a: np.ndarray) -> np.ndarray:
    """bfloat16's rounding of f32 values (studio.engine.bfloat16), back as f32: exact."""
    return bfloat16.to_f32(bfloat16.from_f32(np.asarray(a, np.float32)))


def evaluate_plan(root, values: dict[Block, np.ndarray], add=None):
    """The root's value, each Add evaluated left then right then added (``add``: how an addition
    runs, e.g. a Dask task; default: here)."""
    add = add or (lambda x, y: np.add(x, y, dtype=np.float32))
    if isinstance(root, Block):
        return values[root]
    return add(evaluate_plan(root.left, values, add), evaluate_plan(root.right, values, add))


def mean(numerator: np.ndarray, n: int) -> np.ndarray:
    return np.divide(np.asarray(numerator, np.float32), np.float32(n), dtype=np.float32)


def local_numerator(system: System, params: np.ndarray) -> np.ndarray:
    """The combine run in this process (every owner's part here, in the same plan): what the
    distributed run must reproduce bit for bit."""
    root, blocks = plan(system)
    values = {}
    for o, bl in blocks.items():
        if not bl:
            continue
        c = system.contribution.contributions(params, owner_samples(system, o))
        values.update(zip(bl, block_sums(c, bl, system.precision)))
    return evaluate_plan(root, values)


def local_step(system: System, params: np.ndarray, state: np.ndarray):
    """One update in this process: (params, state, mean)."""
    mu = mean(local_numerator(system, params), system.samples.shape[0])
    p, s = system.update.apply(params, state, mu, system.rate)
    return np.asarray(p, np.float32), np.asarray(s, np.float32), mu
