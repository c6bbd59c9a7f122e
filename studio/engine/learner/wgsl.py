"""An assignment program compiled to a WGSL compute kernel: one invocation per frame row (the
contribution: one per sample; the update: its single row), statements in program order.

What keeps the kernel the same f32 program as the numpy reference (docs/assignment-programs.md):
- WGSL compilers rewrite float expressions: naga's SPIR-V marks nothing exact, and Mesa's NIR
  then contracts a*b + c into an FMA, reassociates constants ((0.001*m)*m for 0.001*(m*m)) and
  factors shared operands (c*x + c*y into c*(x + y)), all measured on lavapipe. So every rounded
  result passes through ``fx``: its bits XORed with ``p.zero`` (0 from a uniform, unknown to the
  compiler), an integer operation no float rewrite can see through or match across; and literals
  are read from a buffer (``lits``), so no constant is there to fold or move;
- reductions run left to right from -0.0 (which adds nothing: -0 + x = x) in the program's order;
  a sum that declares ``pairwise`` adds the same tree as ``evaluate.pairwise_sum`` (``pairwise``);
- a statement that reads slots it also writes (other than each iteration its own slot) first
  computes all its values into ``scratch``, then writes them: one parallel assignment.

The kernel writes only the role's writable slots, into ``out`` (rows x (b - a) for the writable
[a, b)); reads of those slots read ``out``, every other read reads ``frame_in``. The update's
``out`` starts as a copy of its slots (unwritten slots keep their values); a contribution writes
every one of its slots (the checker sees to it), so its ``out`` needs no copy, and a slot the
kernel failed to write still holds the executor's poison.

lavapipe counts the loop iterations of an invocation, all loops together, and stops it silently
after 65,535. So innermost loops are unrolled (UNROLLS, the smallest that fits) until the
kernel's static count of loop iterations per row is at most LOOP_BUDGET; a program that does not
fit even unrolled 256 times is refused before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..contract.bindings import parse_bindings
from ..contract.expr import parse_expr
from ..device.execution import KernelProgram
from ..errors import StudioError
from . import tree_sum
from .slots import Bound, affine, slot_set, span
from .syntax import BOOL, F32, INT, PAIRWISE, Assign, Bin, Call, Int, Let, LetRef, Num, Read, Reduce, Size, ToF32, Unary, Var

LOOP_BUDGET = 60_000
UNROLLS = (1, 4, 16, 64, 128, 256)
WORKGROUP = 64
BINDINGS = """\
@group(0) @binding(0) frame_in : storage read f32[rows, width]
@group(0) @binding(1) out : storage read_write f32[rows, written]
@group(0) @binding(2) scratch : storage read_write f32[rows, scratch]
@group(0) @binding(3) p : uniform { rows: u32 = rows, zero: u32 = zero }
@group(0) @binding(4) lits : storage read f32[literals]
"""
HELPERS = """\
fn fx(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ p.zero); }
fn mn(a: f32, b: f32) -> f32 { return select(a, b, b < a); }
fn mx(a: f32, b: f32) -> f32 { return select(a, b, b > a); }
"""


@dataclass(frozen=True)
class Kernel:
    """The compiled program: WGSL source, the frame's width, the writable slots [lo, hi) that
    ``out`` holds per row and which of them the kernel writes (``mask``), scratch words per row,
    the literals (bound as a buffer), the unroll factor and its loop count per row."""
    source: str
    width: int
    written: tuple[int, int]
    scratch: int
    unroll: int
    iterations: int
    origin: str
    program_hash: str
    literals: tuple[float, ...] = ()
    mask: np.ndarray = field(default=None, compare=False, repr=False)

    def inputs(self, frame: np.ndarray) -> dict:
        return {"frame_in": frame, "lits": np.array(self.literals or (0.0,), np.float32)}

    def program(self) -> KernelProgram:
        """What the product's executor (studio/engine/device/execution.py: dispatch) runs."""
        return KernelProgram(f"assign:{self.program_hash[:16]}", self.source, f"{self.origin}.wgsl", "main",
                             WORKGROUP, parse_expr("rows"), parse_bindings(BINDINGS), owner=f"assign@{self.program_hash}")

    def env(self, rows: int) -> dict:
        lo, hi = self.written
        return {"rows": rows, "width": self.width, "written": max(1, hi - lo), "scratch": max(1, self.scratch),
                "zero": 0, "literals": max(1, len(self.literals))}


def compile_wgsl(bound: Bound, *, unroll: int | None = None, loop_budget: int | None = LOOP_BUDGET) -> Kernel:
    """The kernel of a checked program. ``unroll``: force one factor (None: the smallest of
    UNROLLS within ``loop_budget``; a budget of None: no limit, for the test that shows the cut)."""
    lay = bound.layout
    tried = [unroll] if unroll is not None else list(UNROLLS)
    for u in tried:
        e = Emitter(bound, u, copy=False)
        body = e.program()
        if e.mixed:                                 # a read that may or may not see an earlier write
            e = Emitter(bound, u, copy=True)
            body = e.program()
        if loop_budget is None or e.iterations <= loop_budget or u == tried[-1]:
            break
    if loop_budget is not None and e.iterations > loop_budget:
        raise StudioError(f"{bound.program.origin}: the {lay.role} kernel needs {e.iterations:,} loop iterations per "
                          f"row even unrolled {e.unroll}x (k={lay.k}, s={lay.s}, m={lay.m}); lavapipe stops an "
                          f"invocation after 65,535", file=bound.program.origin,
                          hint="use smaller k, or fewer nested loops and reductions; the numpy reference has no limit")
    a, b = lay.write
    src = (f"// {bound.program.origin}: {lay.role} program {bound.hash[:16]}, k={lay.k} s={lay.s} m={lay.m}, "
           f"unrolled {e.unroll}x, {e.iterations} loop iterations per row\n"
           "struct P { rows: u32, zero: u32 }\n"
           "@group(0) @binding(0) var<storage, read> frame_in: array<f32>;\n"
           "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
           "@group(0) @binding(2) var<storage, read_write> scratch: array<f32>;\n"
           "@group(0) @binding(3) var<uniform> p: P;\n"
           "@group(0) @binding(4) var<storage, read> lits: array<f32>;\n" + HELPERS +
           f"@compute @workgroup_size({WORKGROUP})\n"
           "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n"
           f"  let r: u32 = gid.x + gid.y * nwg.x * {WORKGROUP}u;\n"
           "  if (r >= p.rows) { return; }\n"
           f"  let base: u32 = r * {lay.width}u;\n"
           f"  let obase: u32 = r * {max(1, b - a)}u;\n"
           f"  let sbase: u32 = r * {max(1, e.scratch)}u;\n" + body + "}\n")
    mask = np.ones(b - a, bool) if e.copy else e.written[a:b].copy()
    return Kernel(src, lay.width, (a, b), e.scratch, e.unroll, e.iterations, bound.program.origin, bound.hash,
                  tuple(e.literals), mask)


def _count(scope: dict, form) -> int:
    n = 1
    for v in form[1]:
        n *= max(0, scope[v][1] - scope[v][0])
    return n


def _has_loop(e) -> bool:
    return any(isinstance(n, Reduce) for n in e.walk())


class Emitter:
    """The WGSL text of a program's statements and expressions (each rounded result through ``fx``,
    literals from ``lits``, loops unrolled under the loop cap). staged.py subclasses it for the
    one-invocation-per-point path (its reads and lets come from other buffers)."""

    def __init__(self, bound: Bound, unroll: int, copy: bool):
        self.unroll = max(1, int(unroll))
        self.copy = copy and bound.layout.role == "update"   # out starts as a copy of the writable slots
        self.mixed = False
        self.written = np.zeros(bound.layout.width, bool)      # slots written by the statements so far
        self.literals: list[float] = []
        self.seen: dict = {}                                   # read -> "in" | "out" | "" (mixed)
        self.statement = 0
        self.lay, self.sizes = bound.layout, bound.layout.sizes
        self.statements = bound.program.statements
        self.lines: list[str] = []
        self.depth = 1
        self.tmp = 0
        self.scratch = 0
        self.iterations = 0                         # loop iterations per row, all loops together
        self.mult = 1                               # trips of the enclosing loops
        self.scope: dict[str, tuple[int, int]] = {}

    def out(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def fresh(self, stem: str) -> str:
        self.tmp += 1
        return f"{stem}{self.tmp}"

    def program(self) -> str:
        a, b = self.lay.write
        if self.copy:                               # unwritten slots keep their values; reads see writes
            self.out("// out starts as the frame's writable slots")
            self.loop("t_copy", 0, b - a, True,
                      lambda: self.out(f"out[obase + u32(t_copy)] = frame_in[base + u32({a} + t_copy)];"))
        for i, st in enumerate(self.statements):
            self.statement = i
            self.out(f"// {st}")
            if isinstance(st, Let):
                self.out(f"let l_{st.name}: {'bool' if st.expr.ty == BOOL else 'f32'} = {self.ev(st.expr)};")
            else:
                self.assign(st)
        return "\n".join(self.lines) + "\n"

    # ---------------------------------------------------------------- loops
    def loop(self, var: str, lo: int, hi: int, innermost: bool, body) -> None:
        """for var in lo..hi (i32); an innermost loop is unrolled ``unroll`` times."""
        n = hi - lo
        if n <= 0:
            return
        u = min(self.unroll, n) if innermost else 1
        trips = -(-n // u)
        self.iterations += self.mult * trips
        if u == 1:
            self.out(f"for (var {var}: i32 = {lo}; {var} < {hi}; {var} = {var} + 1) {{")
            self.depth += 1
            self.mult, outer = self.mult * n, self.mult
            body()
            self.mult = outer
            self.depth -= 1
            self.out("}")
            return
        self.out(f"for (var {var}_u: i32 = 0; {var}_u < {trips}; {var}_u = {var}_u + 1) {{")
        self.depth += 1
        for c in range(u):
            self.out(f"{{ let {var}: i32 = {lo} + {var}_u * {u} + {c};" + ("" if n % u == 0 else f" if ({var} < {hi}) {{"))
            self.depth += 1
            body()
            self.depth -= 1
            self.out("}" if n % u == 0 else "} }")
        self.depth -= 1
        self.out("}")

    def nest(self, loops: list[tuple[str, int, int]], inner_loops: bool, body) -> None:
        if not loops:
            body()
            return
        (v, lo, hi), rest = loops[0], loops[1:]
        self.scope[v] = (lo, hi)
        self.loop(f"v_{v}", lo, hi, not rest and not inner_loops, lambda: self.nest(rest, inner_loops, body))
        del self.scope[v]

    # ---------------------------------------------------------------- statements
    def assign(self, st: Assign) -> None:
        loops = [(lp.var, self.const(lp.lo), self.const(lp.hi)) for lp in st.loops]
        if any(hi <= lo for _, lo, hi in loops):
            return
        inner = _has_loop(st.expr)
        a = self.lay.write[0]
        self.emit_assign(st, loops, inner, a)
        box = {v: (lo, hi) for v, lo, hi in loops}
        self.written[slot_set(self.form(st.target), box)] = True

    def emit_assign(self, st: Assign, loops, inner: bool, a: int) -> None:
        def target():
            return f"out[obase + u32({self.int_text(self.form(st.target), -a)})]"
        if not self.hazard(st, loops):
            self.nest(loops, inner, lambda: self.out(f"{target()} = {self.ev(st.expr)};"))
            return
        n, strides = 1, []
        for _, lo, hi in reversed(loops):
            strides.insert(0, n)
            n *= hi - lo
        self.scratch = max(self.scratch, n)
        def ordinal():
            return " + ".join([f"(v_{v} - {lo}) * {st_}" for (v, lo, _), st_ in zip(loops, strides)] or ["0"])
        self.nest(loops, inner, lambda: self.out(f"scratch[sbase + u32({ordinal()})] = {self.ev(st.expr)};"))
        self.nest(loops, False, lambda: self.out(f"{target()} = scratch[sbase + u32({ordinal()})];"))

    def hazard(self, st: Assign, loops) -> bool:
        """Does the statement read a slot it writes, other than each iteration its own slot?"""
        box = {v: (lo, hi) for v, lo, hi in loops}
        tform = self.form(st.target)
        wlo, whi = span(tform, box)
        def visit(e, box):
            if isinstance(e, Reduce):
                lo, hi = self.const(e.lo), self.const(e.hi)
                return hi > lo and visit(e.body, {**box, e.var: (lo, hi)})
            if isinstance(e, Read):
                f = self.form(e)
                if f == tform and all(v in [lp[0] for lp in loops] for v in f[1]):
                    return False
                lo, hi = span(f, box)
                return not (hi < wlo or lo > whi)
            return any(visit(c, box) for c in e.children())
        return visit(st.expr, box)

    # ---------------------------------------------------------------- expressions
    def form(self, r: Read):
        base, _ = self.lay.views[r.view]
        c, co = affine(r.index, self.sizes) if r.index is not None else (0, {})
        return base + c, co

    def const(self, e) -> int:
        return affine(e, self.sizes)[0]

    def read(self, r: Read) -> str:
        """frame_in for slots the program never writes, out for the writable ones."""
        a, b = self.lay.write
        form = self.form(r)
        lo, hi = span(form, self.scope)
        if not self.copy and not (hi < a or lo >= b):       # which of these slots were written before?
            key = (form[0], tuple(form[1].items()), tuple(self.scope.get(v) for v in form[1]), self.statement)
            if key not in self.seen:                           # (unrolled copies ask the same question)
                seen = self.written[slot_set(form, self.scope)] if _count(self.scope, form) <= 1 << 22 else \
                    self.written[lo:hi + 1]
                self.seen[key] = "out" if seen.all() and a <= lo and hi < b else "in" if not seen.any() else ""
            if self.seen[key] == "out":
                return f"out[obase + u32({self.int_text(form, -a)})]"
            if self.seen[key] == "in":
                return f"frame_in[base + u32({self.int_text(form)})]"
            self.mixed = True
        if a <= lo and hi < b:
            return f"out[obase + u32({self.int_text(form, -a)})]"
        if hi < a or lo >= b:
            return f"frame_in[base + u32({self.int_text(form)})]"
        s = self.int_text(form)
        return (f"select(frame_in[base + u32(clamp({s}, 0, {self.lay.width - 1}))], "
                f"out[obase + u32(clamp({s} - {a}, 0, {b - a - 1}))], {s} >= {a} && {s} < {b})")

    @staticmethod
    def int_text(form, shift: int = 0) -> str:
        c, co = form
        terms = [str(c + shift)] + [f"{x} * v_{v}" for v, x in co.items()]
        return "(" + " + ".join(terms) + ")" if co else str(c + shift)

    def ev(self, e) -> str:
        if isinstance(e, (Int, Size, Var)) or (e.ty == INT and not isinstance(e, ToF32)):
            return self.int_text(affine(e, self.sizes))
        if isinstance(e, Num):                    # from a buffer: no constant for the compiler to reassociate
            bits = np.float32(e.value).view(np.uint32)
            index = next((i for i, v in enumerate(self.literals) if np.float32(v).view(np.uint32) == bits), None)
            if index is None:
                index = len(self.literals)
                self.literals.append(float(e.value))
            return f"lits[{index}]"
        if isinstance(e, LetRef):
            return f"l_{e.name}"
        if isinstance(e, Read):
            return self.read(e)
        if isinstance(e, ToF32):
            return f"f32({self.ev(e.operand)})"
        if isinstance(e, Unary):
            return f"(!{self.ev(e.operand)})" if e.op == "not" else f"(-{self.ev(e.operand)})"
        if isinstance(e, Bin):
            a, b = self.ev(e.left), self.ev(e.right)
            if e.op in ("and", "or"):
                return f"({a} {'&&' if e.op == 'and' else '||'} {b})"
            if e.ty != F32:                            # integer arithmetic, comparisons
                return f"({a} {e.op} {b})"
            return f"fx({a} {e.op} {b})"            # rounded here: nothing may fuse, move or factor it
        if isinstance(e, Call):
            xs = [self.ev(a) for a in e.args]
            if e.func == "select":
                return f"select({xs[2]}, {xs[1]}, {xs[0]})"
            name = {"min": "mn", "max": "mx"}.get(e.func, e.func)
            call = f"{name}({', '.join(xs)})"
            return call if e.func == "abs" else f"fx({call})"
        if isinstance(e, Reduce):
            return self.reduce(e)
        raise TypeError(f"cannot compile {e!r}")    # pragma: no cover

    def reduce(self, e: Reduce) -> str:
        lo, hi = self.const(e.lo), self.const(e.hi)
        if hi <= lo:
            return {"sum": "0.0f", "min": "bitcast<f32>(0x7f800000u)", "max": "bitcast<f32>(0xff800000u)",
                    "argmin": "-1.0f", "argmax": "-1.0f"}[e.func]
        if e.func == "sum" and e.order == PAIRWISE:
            return tree_sum.pairwise(self, e, lo, hi, self.unroll if not _has_loop(e.body) else 1)
        acc = self.fresh("acc")
        if e.func == "sum":
            self.out(f"var {acc}: f32 = -0.0f;")
        else:
            self.out(f"var {acc}: f32 = 0.0f;")
            self.out(f"var {acc}_i: i32 = {lo};")
            self.out(f"var {acc}_first: bool = true;")

        def body():
            term = self.fresh("term")
            self.out(f"let {term}: f32 = {self.ev(e.body)};")
            if e.func == "sum":
                self.out(f"{acc} = fx({acc} + {term});")
            else:
                cmp = "<" if e.func in ("min", "argmin") else ">"
                self.out(f"if ({acc}_first || {term} {cmp} {acc}) {{ {acc} = {term}; {acc}_i = v_{e.var}; "
                         f"{acc}_first = false; }}")
        self.nest([(e.var, lo, hi)], _has_loop(e.body), body)
        return f"f32({acc}_i)" if e.func.startswith("arg") else acc


__all__ = ["compile_wgsl", "Kernel", "Emitter", "HELPERS", "LOOP_BUDGET", "UNROLLS", "BINDINGS"]
