"""The race sanitizer: conformance runs an instrumented copy of the kernel once, on one corpus case,
and fails an element of an output or of scratch that two invocations wrote, or that an invocation
of one workgroup wrote and one of another workgroup read, naming both invocations. Backward
conformance does the same with the device VJP (the `[backward]` kernel: ``check_backward``), whose
outputs are its gradients, on one of the cases whose forward and backward values passed.

lavapipe runs a workgroup's invocations one after another, so a kernel whose invocation also writes
its neighbour's output element (or whose invocations share one scratch area) gives the right answer
there and a wrong one on a GPU that runs them in parallel. The values cannot show it; the writers can.

**The rewrite** (``instrument``; the kernel is read with the product's WGSL grammar, proof/
wgsl_reader.py). Every storage buffer the kernel writes (`read_write`: outputs, in-place buffers and
scratch), except those the descriptor declares ``atomic``, is tracked. Before each statement that
writes one of its elements (`y[i] = v;`, `y[i] += v;`, `y[i]++;`, and an atomic update of an
undeclared buffer, `atomicAdd(&y[i], v)`), on the same line, a call records the invocation as a
writer of that element: ``sc_race_w(slot, arrayLength(&y), u32(i));``; before each statement that
reads one by value, ``sc_race_r(...)`` records it as a reader. The invocation's id (its
`global_invocation_id` numbered workgroup by workgroup, so a workgroup's ids are contiguous) is set
first thing in the entry point, on the line of
its `{`; the entry point gains a `@builtin(global_invocation_id)` parameter, on the line of its
parameter list's `)`, when it has none. The counter buffer, the id and the recording function are appended after the last line.
No line moves, so naga's line:col still point at the author's text. Per element, the counter buffer
keeps the smallest and the largest id that wrote it (two different ids: two writers) and that read
it (one outside the writer's workgroup: a read no barrier can order; within a workgroup a barrier
can, so those reads pass).

**The counter buffer** is one `array<atomic<u32>>` at a binding the descriptor leaves free (the
last group, its highest binding plus one): the grid in workgroups (x, y), the workgroup size (x, y,
z), one region base per tracked buffer, then per element a (min, max + 1) pair of writer ids and one
of reader ids. It travels in place through
the one executor (device/execution.py), so nothing about running a kernel changes for it.

**Not seen** (docs/verification.md, "Races"): writes through a pointer (`let p = &y[i]; *p = v;`),
accesses in a `for` header, reads under `&` (an atomic's operand), a `while` condition's reads after
its first evaluation, and workgroup memory."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..contract.bindings import Binding
from ..contract.expr import Sym
from ..device.execution import Case, dispatch, forward_program, prepare
from ..device.launch import of_spec as launch_of
from ..errors import StudioError
from ..grad.vjp import backward_prepared
from ..precision import to_device
from .wgsl_reader import Module, attrs, kids, name_of, read_module, subtrees, text_of, toks

NAME = "sc_race"
WORDS = "sc_race_words"            # the counter buffer's length, a symbol of the run's env only
OUT = "sc_race_out"
CASE_ELEMENTS = 1 << 16            # the sanitizer's case: the largest with at most this many elements in all
RANDOM_KINDS = ("normal", "uniform")
HEADER = 5                         # the counter buffer's header: grid (x, y) in workgroups, workgroup (x, y, z)
ATOMIC_WRITES = {"atomicStore", "atomicAdd", "atomicSub", "atomicMax", "atomicMin", "atomicAnd", "atomicOr",
                 "atomicXor", "atomicExchange", "atomicCompareExchangeWeak"}


@dataclass
class Instrumented:
    source: str
    tracked: list[str]                          # the tracked buffers' WGSL names, in slot order
    slots: list[tuple[int, int]] = field(default_factory=list)   # and their (group, binding)
    sites: dict[str, int] = field(default_factory=dict)   # WGSL name -> write sites instrumented


def _target(t) -> tuple[str, object] | None:
    """(buffer, index subtree) when ``t`` is `name[index]` (through parentheses)."""
    while t is not None and getattr(t, "data", None) == "paren":
        t = kids(t)[0]
    if getattr(t, "data", None) != "index":
        return None
    base, index = kids(t)
    if base.data != "name":
        return None
    return str(base.children[0]), index


def _writes(stmt, tracked: set[str]):
    """The (buffer, index) written by one statement of a block (nested blocks aside)."""
    if stmt.data in ("assign", "incdec"):
        hit = _target(kids(stmt)[0])
        if hit and hit[0] in tracked:
            yield hit
    for part in _scope(stmt):
        for call in subtrees(part, "call"):
            if str(call.children[0]) not in ATOMIC_WRITES or not kids(call):
                continue
            first = kids(call)[0]
            first = kids(first)[0] if first.data == "args" else first
            if first.data == "prefix" and str(kids(first)[0].children[0]) == "&":
                hit = _target(kids(first)[1])
                if hit and hit[0] in tracked:
                    yield hit


def _scope(stmt) -> list:
    """The parts of one statement of a block that it evaluates itself (nested blocks aside)."""
    if stmt.data in ("if_stmt", "while_stmt", "switch_stmt"):
        return kids(stmt)[:1]
    return [stmt] if stmt.data in ("assign", "incdec", "call_stmt", "decl", "exit") else []


def _reads(stmt, tracked: set[str]):
    """The (buffer, index) one statement reads by value: `y[i]` anywhere but as the assignment's
    target or under `&` (an atomic's or a pointer's operand)."""
    target = kids(stmt)[0] if stmt.data in ("assign", "incdec") else None
    skip = set()
    for part in _scope(stmt):
        for pre in subtrees(part, "prefix"):
            if str(kids(pre)[0].children[0]) == "&":
                skip |= {id(t) for t in subtrees(kids(pre)[1], "index")}
        for ix in subtrees(part, "index"):
            hit = _target(ix)
            if hit and hit[0] in tracked and ix is not target and id(ix) not in skip:
                yield hit


def _builtin(m: Module, fn, builtin: str) -> str | None:
    """The expression that holds ``builtin`` in the entry point's parameters, if any."""
    for p in fn.params:
        at = {str(a.children[1]): kids(a) for a in kids(p) if a.data == "attr"}
        if at.get("builtin") and toks(at["builtin"][0])[0].v == builtin:
            return str(name_of(p))
        ty = toks(next((c for c in kids(p) if c.data == "type"), None))
        if len(ty) == 1 and ty[0].v in m.structs:
            for member in (c for c in kids(m.structs[ty[0].v]) if c.data == "member"):
                mat = {str(a.children[1]): kids(a) for a in kids(member) if a.data == "attr"}
                if mat.get("builtin") and toks(mat["builtin"][0])[0].v == builtin:
                    return f"{name_of(p)}.{name_of(member)}"
    return None


def _int(t) -> int | None:
    v = toks(t)
    return int(v[0].v.rstrip("iu"), 0) if len(v) == 1 and v[0].v.rstrip("iu").isdigit() else None


def instrument(source: str, entry: str, tracked: list[tuple[int, int]], group: int, binding: int) -> Instrumented:
    """The kernel with every write to the buffers bound at the ``tracked`` (group, binding) slots
    recorded (no line moved); raises StudioError when the text cannot be read or has no such entry
    point. ``Instrumented.tracked`` names their WGSL variables."""
    m = read_module(source)
    if entry not in m.functions:
        raise StudioError(f"no entry point '{entry}' in the kernel")
    at_slot = {}                 # (group, binding) -> the WGSL variable bound there
    for name, d in m.globals.items():
        at = attrs(d)
        if at.get("group") and at.get("binding") and m.storage.get(name) == "read_write":
            at_slot[_int(at["group"][0]), _int(at["binding"][0])] = name
    names = [at_slot[s] for s in tracked if s in at_slot]
    if any(t.v.startswith(NAME) for t in toks(m.tree)):
        raise StudioError(f"the kernel names '{NAME}...', which the sanitizer's rewrite uses")
    slot = {n: k for k, n in enumerate(names)}
    out = Instrumented(source, names, [s for s in tracked if s in at_slot], {n: 0 for n in names})
    edits: list[tuple[int, str]] = []
    for fn in m.functions.values():
        for block in subtrees(fn.tree, "block"):
            for stmt in kids(block):
                calls = []
                for buf, index in _writes(stmt, set(names)):
                    calls.append(f"{NAME}_w({slot[buf]}u, arrayLength(&{buf}), u32({text_of(index)}));")
                    out.sites[buf] += 1
                for buf, index in _reads(stmt, set(names)):
                    calls.append(f"{NAME}_r({slot[buf]}u, arrayLength(&{buf}), u32({text_of(index)}));")
                if calls:
                    edits.append((stmt.meta.start_pos, " ".join(calls) + " "))
    fn = m.functions[entry]
    gid = _builtin(m, fn, "global_invocation_id")
    if gid is None:
        close = next(c for c in fn.tree.children if str(c) == ")" and not hasattr(c, "data"))
        before = fn.tree.children[fn.tree.children.index(close) - 1]
        comma = "" if before is None or str(before) in ("(", ",") else ", "
        edits.append((close.start_pos, f"{comma}@builtin(global_invocation_id) {NAME}_gid: vec3<u32>"))
        gid = f"{NAME}_gid"
    brace = kids(fn.tree)[-1].children[0]
    edits.append((brace.end_pos, f" {NAME}_id = {NAME}_of({gid});"))
    text = source
    for at, add in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:at] + add + text[at:]
    out.source = text + ("" if text.endswith("\n") else "\n") + (
        f"var<private> {NAME}_id: u32;\n"
        f"@group({group}) @binding({binding}) var<storage, read_write> {NAME}: array<atomic<u32>>;\n"
        f"fn {NAME}_of(g: vec3<u32>) -> u32 {{\n"    # workgroup-major: a workgroup's ids are contiguous
        f"    let gx = atomicLoad(&{NAME}[0]); let gy = atomicLoad(&{NAME}[1]);\n"
        f"    let wx = atomicLoad(&{NAME}[2]); let wy = atomicLoad(&{NAME}[3]); let wz = atomicLoad(&{NAME}[4]);\n"
        f"    return ((g.z / wz * gy + g.y / wy) * gx + g.x / wx) * (wx * wy * wz) + "
        f"((g.z % wz) * wy + g.y % wy) * wx + g.x % wx;\n}}\n"
        f"fn {NAME}_mark(slot: u32, len: u32, i: u32, k: u32) {{\n"
        f"    if (i < len) {{\n"
        f"        let at = atomicLoad(&{NAME}[{HEADER}u + slot]) + 4u * i + k;\n"
        f"        atomicMin(&{NAME}[at], {NAME}_id);\n"
        f"        atomicMax(&{NAME}[at + 1u], {NAME}_id + 1u);\n"
        f"    }}\n}}\n"
        f"fn {NAME}_w(slot: u32, len: u32, i: u32) {{ {NAME}_mark(slot, len, i, 0u); }}\n"
        f"fn {NAME}_r(slot: u32, len: u32, i: u32) {{ {NAME}_mark(slot, len, i, 2u); }}\n")
    return out


def pick_case(pkg, cases: list):
    """One small-to-medium case: of those whose inputs and outputs hold at most CASE_ELEMENTS
    elements, one with every dim above 1 where there is one (a race between rows, or within a row,
    needs both to be wider than one), then with values drawn at random (``normal``, ``uniform``:
    index inputs spread over their whole range, so many invocations meet), then the largest."""
    sig = pkg.contract.signature
    best, key = None, None
    for c in cases:
        try:
            env = sig.resolve({k: np.shape(v) for k, v in c.inputs.items()}, dict(c.params))
            n = sum(int(np.prod(s)) for s in sig.output_shapes(env).values())
        except StudioError:
            continue
        n += sum(int(np.size(v)) for v in c.inputs.values())
        k = (all(int(v) > 1 for v in c.dims.values()), c.value_kind in RANDOM_KINDS, n)
        if n <= CASE_ELEMENTS and (key is None or k > key):
            best, key = c, k
    return best


@dataclass
class Race:
    buffer: str            # the output (or scratch) two invocations wrote, or one wrote and another read
    scratch: bool
    index: int
    first: tuple[int, int, int]       # a writer's global_invocation_id
    second: tuple[int, int, int]      # another writer's, or (kind "read") a reader's in another workgroup
    elements: int          # elements with such a pair
    kind: str = "write"    # write: two writers · read: written in one workgroup, read in another
    workgroups: tuple = ()            # kind "read": the writer's and the reader's workgroup ids

    def describe(self) -> str:
        what = f"scratch '{self.buffer}'" if self.scratch else self.buffer
        if self.kind == "read":
            return (f"{what}[{self.index}] was written by global_invocation_id {self.first} (workgroup "
                    f"{self.workgroups[0]}) and read by {self.second} (workgroup {self.workgroups[1]}) "
                    f"({self.elements} such element(s)): workgroups do not wait for each other within a dispatch, "
                    "so on a GPU that runs them in parallel the read sees the value before or after the write; "
                    "read only what your own workgroup wrote (after a barrier), or split the work into two ops")
        return (f"{what}[{self.index}] was written by two invocations, global_invocation_id {self.first} and "
                f"{self.second} ({self.elements} element(s) written by more than one invocation): on a GPU "
                "that runs invocations in parallel the result depends on which write lands last; "
                + ("give each invocation a region of its own (index the scratch by the invocation) or use a "
                   "function-scope `var`" if self.scratch else
                   "give each element one writer (the invocation whose index it is), or, for a buffer built up "
                   "through WGSL atomics, declare it `atomic` in [bindings] (judged by value only)"))


def check(device, pkg, case) -> tuple[list[Race], dict]:
    """Run the instrumented forward kernel on ``case``; (the races found, a summary for the report)."""
    program = forward_program(pkg)
    sig = pkg.contract.signature
    env, shapes = prepare(pkg, Case(case.inputs, case.params), device=device)
    inputs = {t.name: to_device(np.asarray(case.inputs[t.name]), t.dtype) for t in sig.inputs}
    return _run(device, program, env, shapes, inputs, {t.name for t in sig.outputs}, case.index)


def check_backward(ctx, pkg, case, outputs: dict, cotangents: dict) -> tuple[list[Race], dict]:
    """Run the instrumented device VJP (the `[backward]` kernel) on ``case``, with the forward's
    ``outputs`` of it and ``cotangents``; its gradients are its outputs, any other `read_write`
    buffer its scratch. (the races found, a summary for the report)."""
    program, [(env, shapes, arrays)] = backward_prepared(ctx, pkg, [(case.inputs, case.params, cotangents, outputs)])
    return _run(ctx.device, program, env, shapes, arrays, set(shapes), case.index)


def _run(device, program, env: dict, shapes: dict, inputs: dict, outputs: set[str], index: int):
    """The instrumented ``program`` once: its read_write buffers' writers and readers per element."""
    desc = program.bindings
    tracked = [b for b in desc if b.kind == "storage" and b.access == "read_write" and not b.atomic]
    group = max((b.group for b in desc), default=0)
    free = max((b.binding for b in desc if b.group == group), default=-1) + 1
    inst = instrument(program.source, program.entry, [(b.group, b.binding) for b in tracked], group, free)
    by_slot = {(b.group, b.binding): b for b in tracked}
    counts = [by_slot[sl].element_count(env) for sl in inst.slots]
    launch = launch_of(program, env, device.profile.limits.get("max-compute-workgroups-per-dimension", 65535),
                       op=program.op)
    size = tuple(launch.workgroup) + (1,) * (3 - len(launch.workgroup))
    grid = _Grid(launch.grid, size)
    bases = list(np.cumsum([HEADER + len(counts)] + [4 * c for c in counts]))
    words = np.zeros(int(bases[-1]), np.uint32)
    words[:HEADER] = launch.grid[0], launch.grid[1], *size
    words[HEADER:HEADER + len(counts)] = bases[:-1]
    for base, c in zip(bases[:-1], counts):
        words[base:base + 4 * c:2] = 0xFFFFFFFF          # each pair's smallest id starts past any id
    counter = Binding(group, free, NAME, "storage", "read_write", "u32", (Sym(WORDS),), (), 0, 0, writes=OUT)
    run = dataclasses.replace(program, source=inst.source,
                              bindings=dataclasses.replace(desc, bindings=desc.bindings + (counter,)))
    inputs = {**inputs, NAME: words}
    res = dispatch(run, [({**env, WORDS: words.size}, {**shapes, OUT: (words.size,)}, inputs)], device=device,
                   guard=True)[0]
    got = np.asarray(res.outputs[OUT]).astype(np.uint32)
    races = []
    for sl, base, c in zip(inst.slots, bases[:-1], counts):
        w = got[base:base + 4 * c].reshape(-1, 4).astype(np.int64)   # writers (min, max + 1), readers (min, max + 1)
        b = by_slot[sl]
        written, read = w[:, 1] != 0, w[:, 3] != 0
        two = np.flatnonzero(written & (w[:, 0] != w[:, 1] - 1))
        if two.size:
            i = int(two[0])
            races.append(Race(b.output, b.output not in outputs, i, grid.gid(w[i, 0]), grid.gid(w[i, 1] - 1),
                              int(two.size)))
            continue
        def group_of(ids):
            return ids // grid.per_workgroup
        far = np.flatnonzero(written & read & ((group_of(w[:, 2]) != group_of(w[:, 0]))
                                               | (group_of(w[:, 3] - 1) != group_of(w[:, 0]))))
        if far.size:
            i = int(far[0])
            reader = w[i, 2] if group_of(w[i, 2]) != group_of(w[i, 0]) else w[i, 3] - 1
            races.append(Race(b.output, b.output not in outputs, i, grid.gid(w[i, 0]), grid.gid(reader),
                              int(far.size), "read", (grid.workgroup(w[i, 0]), grid.workgroup(reader))))
    summary = {"case": index, "tracked": [by_slot[sl].output for sl in inst.slots],
               "write_sites": {by_slot[sl].output: inst.sites[n] for sl, n in zip(inst.slots, inst.tracked)},
               "atomic": [b.name for b in desc if b.kind == "storage" and b.atomic],
               "races": [r.describe() for r in races]}
    return races, summary


@dataclass
class _Grid:
    """The rewrite's invocation ids (workgroup-major: a workgroup's ids are contiguous) decoded."""
    grid: tuple            # workgroups per axis
    size: tuple            # the workgroup size per axis

    @property
    def per_workgroup(self) -> int:
        return self.size[0] * self.size[1] * self.size[2]

    def workgroup(self, i) -> tuple[int, int, int]:
        g = int(i) // self.per_workgroup
        return g % self.grid[0], (g // self.grid[0]) % self.grid[1], g // (self.grid[0] * self.grid[1])

    def gid(self, i) -> tuple[int, int, int]:
        (gx, gy, gz), local = self.workgroup(i), int(i) % self.per_workgroup
        sx, sy, sz = self.size
        return gx * sx + local % sx, gy * sy + (local // sx) % sy, gz * sz + local // (sx * sy)


def sanitize(device, pkg, cases: list, *, check_case=None) -> tuple[list[tuple[object, Race]], dict]:
    """Conformance's one sanitizer run: the instrumented kernel on one small-to-medium case
    (pick_case). A kernel the rewrite cannot instrument is reported as not checked, with why.
    ``check_case``: how one case is checked (default: the forward kernel, ``check``; backward
    conformance passes the device VJP's, ``check_backward``)."""
    case = pick_case(pkg, cases)
    if case is None:
        return [], {"not_checked": "no case with outputs of at most "
                                   f"{CASE_ELEMENTS:,} elements"}
    try:
        found, summary = check_case(case) if check_case is not None else check(device, pkg, case)
    except StudioError as e:
        return [], {"case": case.index, "not_checked": e.message}
    except RecursionError:
        return [], {"case": case.index, "not_checked": "the kernel nests too deeply for the rewrite"}
    return [(case, r) for r in found], summary


def lines(summary: dict | None, what: str = "races") -> list[str]:
    """The report's line for one sanitizer run (``what``: "races" for the forward kernel, "vjp races"
    for the device VJP's)."""
    if not summary:
        return []
    label = f"  {what:<10}:"
    if "not_checked" in summary:
        return [f"{label} not checked: {summary['not_checked']}"]
    sites = ", ".join(f"{k} ({v} write site(s))" for k, v in summary["write_sites"].items()) or "no buffer"
    verdict = f"{len(summary['races'])} buffer(s) with a race" if summary["races"] else \
        "no element written by two invocations, or written and read in two workgroups"
    atomic = f"; judged by value only (atomic): {', '.join(summary['atomic'])}" if summary["atomic"] else ""
    return [f"{label} case {summary['case']}: {verdict}; writers and readers counted in {sites}{atomic}"]
