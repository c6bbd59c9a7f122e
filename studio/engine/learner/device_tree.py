"""An owner's complete blocks of the canonical tree on the device (docs/learner.md "Owners on a
device"): a fixed-shape reduction that performs the tree's additions, the same operands in the
same order, so it is bitwise the CPU tree (combine.tree_sum).

The tree over a block of n rows is combine's: a leaf is one row; node[lo, lo+n) = node[lo, lo+p) +
node[lo+p, lo+n), p the largest power of two below n. Its nodes are grouped by height (a leaf 0,
a node one more than its taller child); height h is one dispatch through the product's executor
(studio/engine/device/execution.py ``dispatch``) with one invocation per (node, element): ``out =
left + right``, one binary32 addition, left operand first. No atomics, no subgroup or workgroup
operations, no loop: an invocation's one addition is the tree's, whatever the device schedules
in parallel. The sum passes through ``fx`` (its bits XORed with a uniform 0) like every rounded
result of the programs' kernels, so no driver can fuse or move it. Between heights the values
come back to this process (the executor reads every dispatch back); the next height's operands
are gathered from them by copy, no arithmetic.

IEEE binary32 on the device: lavapipe keeps subnormals in additions (measured, and tested:
tests/learner/test_learner_device.py); a device that flushed them would differ from the CPU tree there,
which the same test would show."""
from __future__ import annotations

import numpy as np

from ..contract.bindings import parse_bindings
from ..contract.expr import parse_expr
from ..device.execution import KernelProgram, dispatch
from ..errors import StudioError
from ..precision import CANARY_WORDS
from .combine import Block, split_point

WORKGROUP = 64
BINDINGS = """\
@group(0) @binding(0) left : storage read f32[n]
@group(0) @binding(1) right : storage read f32[n]
@group(0) @binding(2) out : storage read_write f32[n]
@group(0) @binding(3) p : uniform { n: u32 = n, zero: u32 = zero }
"""
SOURCE = f"""// one node of the canonical combine tree per invocation and element: out = left + right
struct P {{ n: u32, zero: u32 }}
@group(0) @binding(0) var<storage, read> left: array<f32>;
@group(0) @binding(1) var<storage, read> right: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t: u32 = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (t >= p.n) {{ return; }}
  out[t] = bitcast<f32>(bitcast<u32>(left[t] + right[t]) ^ p.zero);
}}
"""
PROGRAM = KernelProgram("learner:tree-node", SOURCE, "learner_tree.wgsl", "main", WORKGROUP, parse_expr("n"),
                        parse_bindings(BINDINGS), owner="learner:tree-node")


def schedule(blocks: list[Block]) -> tuple[list, list]:
    """The blocks' trees as levels: ``levels[h - 1]`` lists the nodes of height h as ((height,
    index) of the left operand, (height, index) of the right); height 0 index i is row i. Returns
    (levels, where each block's value is)."""
    levels: list[list] = []

    def node(lo: int, n: int):
        if n == 1:
            return 0, lo
        p = split_point(n)
        a, b = node(lo, p), node(lo + p, n - p)
        h = max(a[0], b[0]) + 1
        while len(levels) < h:
            levels.append([])
        levels[h - 1].append((a, b))
        return h, len(levels[h - 1]) - 1
    roots = [node(b.start, b.n) for b in blocks]
    return levels, roots


CHUNK_WORDS = 1 << 24             # contribution words reduced at once (a column chunk of every row)


def block_sums(contribs: np.ndarray, blocks: list[Block], *, device, guard: bool = False) -> list[np.ndarray]:
    """Each block's tree value over the rows of ``contribs`` (f32 (rows, k)), computed on ``device``:
    bitwise combine.block_sums at f32. The elements are independent, so the tree runs over column
    chunks of about CHUNK_WORDS words in all (the memory of one chunk's levels, not all of them)."""
    contribs = np.asarray(contribs, np.float32)
    rows, k = contribs.shape
    cap = int(device.profile.limits.get("max-storage-buffer-binding-size", 1 << 27)) // 4 - CANARY_WORDS - 64
    levels, roots = schedule(blocks)
    out = [np.empty(k, np.float32) for _ in blocks]
    width = max(1, min(k, CHUNK_WORDS // max(1, rows), cap))
    for c0 in range(0, k, width):
        got = _levels(np.ascontiguousarray(contribs[:, c0:c0 + width]), levels, roots, device, cap, guard)
        for o, g in zip(out, got):
            o[c0:c0 + width] = g
    return out


def _levels(contribs: np.ndarray, levels: list, roots: list, device, cap: int, guard: bool) -> list[np.ndarray]:
    """The tree's heights over one column chunk, a dispatch per height; the roots' values."""
    k = contribs.shape[1]
    values = [contribs]
    for nodes in levels:
        m = len(nodes)
        left, right = _gather(values, [a for a, _ in nodes], k), _gather(values, [b for _, b in nodes], k)
        step = max(1, cap // max(1, k))
        cases = [({"n": min(step, m - i) * k, "zero": 0}, {"out": (min(step, m - i) * k,)},
                  {"left": left[i:i + step].reshape(-1), "right": right[i:i + step].reshape(-1)})
                 for i in range(0, m, step)]
        got = dispatch(PROGRAM, cases, device=device, guard=guard)
        if guard and any(len(r.unwritten.get("out", ())) or len(r.canary_hits.get("out", ())) for r in got):
            raise StudioError("the device's tree reduction left values unwritten or wrote past its output",
                              hint="use the numpy path (--owner-device cpu)")
        values.append(np.concatenate([r.outputs["out"] for r in got]).reshape(m, k) if len(got) > 1
                      else got[0].outputs["out"].reshape(m, k))
    return [values[h][i] for h, i in roots]


def _gather(values: list[np.ndarray], refs: list[tuple[int, int]], k: int) -> np.ndarray:
    """The operands ``refs`` ((height, index) each) as one C-contiguous (len(refs), k) array (a copy)."""
    r = np.asarray(refs, np.int64).reshape(-1, 2)
    heights = np.unique(r[:, 0])
    if heights.size == 1:
        return np.ascontiguousarray(values[int(heights[0])][r[:, 1]])
    out = np.empty((len(refs), k), np.float32)
    for h in heights:
        sel = r[:, 0] == h
        out[sel] = values[int(h)][r[sel, 1]]
    return out


__all__ = ["block_sums", "schedule", "PROGRAM", "SOURCE"]
