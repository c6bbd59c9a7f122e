"""An assignment program run on the device one statement at a time, one invocation per point
(docs/assignment-programs.md "The staged path"): a ``let`` is one invocation per frame row, an
assignment one invocation per row x point of its loop box (the update: one per slot; the
contribution: one per sample x slot), each statement a dispatch of its own through the product's
executor (studio/engine/device/execution.py ``dispatch``). Between statements the frame and the
lets live in this process: the host writes each statement's values into its slots (a copy of
bits, no arithmetic), which is what makes the statement one parallel assignment (every
invocation reads the frame as the statements before it left it).

The same f32 program as the numpy reference, bit for bit:

- expressions are emitted by wgsl.py's emitter (every rounded result through ``fx``, literals from
  a buffer, reductions left to right from -0.0, innermost loops unrolled under lavapipe's loop cap:
  LOOP_BUDGET iterations per invocation);
- a statement that uses an operation WGSL does not round correctly (``/``, ``sqrt``, ``exp``,
  ``log``: accuracy.INEXACT) runs through the numpy evaluator instead, on the same frame and lets
  (``evaluate.evaluate_statement``): its bits are the reference's by construction. Every other
  statement (+ - * min max abs select, comparisons, the reductions) runs on the device.

So the staged path is bitwise the reference for finite, NaN-free data (docs/assignment-programs.md
"Limits": min/max/select on NaN, subnormals on a flushing device)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.bindings import parse_bindings
from ..contract.expr import parse_expr
from ..device.execution import KernelProgram, dispatch
from ..errors import StudioError
from ..precision import CANARY_WORDS
from .accuracy import INEXACT
from .evaluate import evaluate_statement
from .slots import Bound, affine
from .syntax import BOOL, INT, Assign, Bin, Call, Let, LetRef, Read
from .wgsl import HELPERS, LOOP_BUDGET, UNROLLS, WORKGROUP, Emitter

BINDINGS = """\
@group(0) @binding(0) frame_in : storage read f32[rows, width]
@group(0) @binding(1) lets : storage read f32[rows, nlets]
@group(0) @binding(2) out : storage read_write f32[rows, points]
@group(0) @binding(3) p : uniform { n: u32 = n, zero: u32 = zero }
@group(0) @binding(4) lits : storage read f32[literals]
"""


def inexact(expr) -> list[str]:
    """The operations of an expression that WGSL does not round correctly."""
    found = set()
    for n in expr.walk():
        if isinstance(n, Bin) and n.op == "/" and n.ty != INT:
            found.add("/")
        elif isinstance(n, Call) and n.func in INEXACT:
            found.add(n.func)
    return sorted(found)


@dataclass(frozen=True)
class Stage:
    """One statement: on the host (``source`` empty: it uses ``host_because``) or one dispatch of
    ``points`` invocations per row. ``let``: the let's column in the lets buffer (bools as 1.0/0.0);
    ``slots``: an assignment's target slots, point by point (row-major over its loops)."""
    index: int
    kind: str                          # "let" | "assign"
    points: int
    source: str = ""
    literals: tuple[float, ...] = ()
    unroll: int = 1
    iterations: int = 0
    let: int = -1
    slots: np.ndarray | None = None
    host_because: tuple[str, ...] = ()

    @property
    def on_device(self) -> bool:
        return bool(self.source)


@dataclass(frozen=True)
class Staged:
    bound: Bound
    stages: tuple[Stage, ...]
    lets: dict                         # let name -> (column, is_bool)

    @property
    def device_statements(self) -> int:
        return sum(st.on_device for st in self.stages)

    def describe(self) -> str:
        host = [st.index for st in self.stages if not st.on_device]
        return (f"{len(self.stages)} statement(s), {self.device_statements} on the device"
                + (f", statement(s) {', '.join(str(i + 1) for i in host)} on the host (numpy: "
                   f"{', '.join(sorted({op for st in self.stages for op in st.host_because}))})" if host else ""))


class _StageEmitter(Emitter):
    """wgsl.py's expression emitter over a stage's buffers: every read from ``frame_in`` (the frame
    as the statements before left it), lets from ``lets``."""

    def __init__(self, bound: Bound, unroll: int, lets: dict):
        super().__init__(bound, unroll, copy=False)
        self.let_cols = lets

    def read(self, r: Read) -> str:
        return f"frame_in[base + u32({self.int_text(self.form(r))})]"

    def ev(self, e) -> str:
        if isinstance(e, LetRef):
            col, is_bool = self.let_cols[e.name]
            return f"(lets[lbase + {col}u] != 0.0f)" if is_bool else f"lets[lbase + {col}u]"
        return super().ev(e)


def compile_staged(bound: Bound, *, loop_budget: int = LOOP_BUDGET) -> Staged:
    """The program as a sequence of stages (see the module's docstring). A statement whose
    reductions do not fit ``loop_budget`` iterations per invocation even unrolled 256x is refused."""
    lets: dict[str, tuple[int, bool]] = {}
    stages = []
    for i, st in enumerate(bound.program.statements):
        if isinstance(st, Let):
            lets[st.name] = (len(lets), st.expr.ty == BOOL)
            loops, kind = [], "let"
        else:
            loops = [(lp.var, _const(bound, lp.lo), _const(bound, lp.hi)) for lp in st.loops]
            kind = "assign"
        points = int(np.prod([max(0, hi - lo) for _, lo, hi in loops], dtype=np.int64)) if loops else 1
        slots = _target_slots(bound, st, loops) if kind == "assign" else None
        let = lets[st.name][0] if kind == "let" else -1
        why = tuple(inexact(st.expr))
        if why or points == 0:
            stages.append(Stage(i, kind, points, let=let, slots=slots, host_because=why))
            continue
        stages.append(_device_stage(bound, i, st, kind, loops, points, dict(lets), let, slots, loop_budget))
    return Staged(bound, tuple(stages), lets)


def _const(bound: Bound, e) -> int:
    return affine(e, bound.layout.sizes)[0]


def _target_slots(bound: Bound, st: Assign, loops) -> np.ndarray:
    base, _ = bound.layout.views[st.target.view]
    c, co = affine(st.target.index, bound.layout.sizes) if st.target.index is not None else (0, {})
    axes = np.meshgrid(*[np.arange(lo, hi, dtype=np.int64) for _, lo, hi in loops], indexing="ij")
    slots = np.full(axes[0].size if axes else 1, base + c, np.int64)
    for (v, _, _), ax in zip(loops, axes):
        slots += co.get(v, 0) * ax.reshape(-1)
    return slots


def _device_stage(bound, i, st, kind, loops, points, lets, let, slots, loop_budget) -> Stage:
    for u in UNROLLS:
        e = _StageEmitter(bound, u, lets)
        stride, head = 1, []
        for v, lo, hi in reversed(loops):
            head.insert(0, f"  let v_{v}: i32 = {lo} + (q / {stride}) % {hi - lo};")
            stride *= hi - lo
        for v, lo, hi in loops:
            e.scope[v] = (lo, hi)
        value = e.ev(st.expr)
        if kind == "let" and st.expr.ty == BOOL:
            value = f"select(0.0f, 1.0f, {value})"
        if e.iterations <= loop_budget:
            break
    else:
        raise StudioError(f"{bound.program.origin}: statement {i + 1} needs {e.iterations:,} loop iterations per "
                          f"invocation even unrolled {e.unroll}x; lavapipe stops an invocation after 65,535",
                          file=bound.program.origin, hint="the numpy path has no such limit (--owner-device cpu)")
    lay = bound.layout
    src = (f"// {bound.program.origin}: {lay.role} statement {i + 1} ({kind}), {points} invocation(s) per row, "
           f"unrolled {e.unroll}x, {e.iterations} loop iterations per invocation\n"
           "struct P { n: u32, zero: u32 }\n"
           "@group(0) @binding(0) var<storage, read> frame_in: array<f32>;\n"
           "@group(0) @binding(1) var<storage, read> lets: array<f32>;\n"
           "@group(0) @binding(2) var<storage, read_write> out: array<f32>;\n"
           "@group(0) @binding(3) var<uniform> p: P;\n"
           "@group(0) @binding(4) var<storage, read> lits: array<f32>;\n" + HELPERS +
           f"@compute @workgroup_size({WORKGROUP})\n"
           "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n"
           f"  let t: u32 = gid.x + gid.y * nwg.x * {WORKGROUP}u;\n"
           "  if (t >= p.n) { return; }\n"
           f"  let r: u32 = t / {points}u;\n"
           f"  let q: i32 = i32(t % {points}u);\n"
           f"  let base: u32 = r * {lay.width}u;\n"
           f"  let lbase: u32 = r * {max(1, len(lets))}u;\n" + "\n".join(head) + ("\n" if head else "") +
           "\n".join(e.lines) + ("\n" if e.lines else "") +
           f"  out[t] = {value};\n}}\n")
    return Stage(i, kind, points, src, tuple(e.literals), e.unroll, e.iterations, let, slots)


def _columns(slots: np.ndarray):
    """A statement's target slots as a slice when they are evenly spaced upwards (no gather)."""
    if slots.size > 1:
        d = np.diff(slots)
        if d[0] > 0 and (d == d[0]).all():
            return slice(int(slots[0]), int(slots[-1]) + 1, int(d[0]))
    return slots


def _program(bound: Bound, st: Stage) -> KernelProgram:
    return KernelProgram(f"assign:{bound.hash[:16]}:{st.index + 1}", st.source, f"{bound.program.origin}.wgsl",
                         "main", WORKGROUP, parse_expr("n"), parse_bindings(BINDINGS),
                         owner=f"assign@{bound.hash}")


def run_staged(staged: Staged, frame: np.ndarray, *, device, guard: bool = True) -> np.ndarray:
    """The program over every row of ``frame`` (float32 (rows, width), C-contiguous: updated in
    place and returned). Rows go to the device in batches that fit its largest binding."""
    bound, lay = staged.bound, staged.bound.layout
    if frame.dtype != np.float32 or frame.ndim != 2 or frame.shape[1] != lay.width or not frame.flags.c_contiguous:
        raise StudioError(f"a {lay.role} frame is C-contiguous float32 of shape (rows, {lay.width}); got "
                          f"{frame.dtype} {frame.shape}", field="frame")
    rows = frame.shape[0]
    nlets = max(1, len(staged.lets))
    lets = np.zeros((rows, nlets), np.float32)
    cap = int(device.profile.limits.get("max-storage-buffer-binding-size", 1 << 27)) // 4 - CANARY_WORDS - 64
    for st in staged.stages:
        if st.points == 0:
            continue
        if not st.on_device:
            values = evaluate_statement(bound, frame, st.index, {n: (lets[:, c] != 0) if b else lets[:, c]
                                                                 for n, (c, b) in staged.lets.items()})
            if st.kind == "let":
                lets[:, st.let] = values
            continue
        step = max(1, min(cap // lay.width, cap // st.points, cap // nlets))
        if lay.width > cap or st.points > cap:
            raise StudioError(f"one {lay.role} frame row ({lay.width:,} words) or statement {st.index + 1}'s "
                              f"{st.points:,} values per row is more than the device binds at once ({cap:,} words)",
                              field="frame", hint="use the numpy path (--owner-device cpu)")
        lits = np.array(st.literals or (0.0,), np.float32)
        cases = []
        for r0 in range(0, rows, step):
            n = min(step, rows - r0)
            env = {"rows": n, "width": lay.width, "nlets": nlets, "points": st.points, "n": n * st.points,
                   "zero": 0, "literals": lits.size}
            cases.append((env, {"out": (n, st.points)}, {"frame_in": frame[r0:r0 + n], "lets": lets[r0:r0 + n],
                                                          "lits": lits}))
        results = dispatch(_program(bound, st), cases, device=device, guard=guard)
        r0 = 0
        for (env, _, _), res in zip(cases, results):
            if guard:
                hits, unwritten = res.canary_hits.get("out", ()), res.unwritten.get("out", ())
                if len(hits) or len(unwritten):
                    raise StudioError(f"{bound.program.origin}: statement {st.index + 1} on the device left "
                                      f"{len(unwritten)} value(s) unwritten and wrote {len(hits)} past its output",
                                      hint="the device cut the kernel short; use the numpy path (--owner-device cpu)")
            out, n = res.outputs["out"], env["rows"]
            if st.kind == "let":
                lets[r0:r0 + n, st.let] = out[:, 0]
            else:
                frame[r0:r0 + n, _columns(st.slots)] = out
            r0 += n
    return frame


__all__ = ["compile_staged", "run_staged", "Staged", "Stage", "inexact", "BINDINGS"]
