"""Static control-flow checks over a kernel's WGSL, for two faults conformance used to find late.

1. **A barrier in non-uniform control flow** (an error). WGSL requires `workgroupBarrier()`,
   `storageBarrier()`, `textureBarrier()` and `workgroupUniformLoad()` to be reached by every
   invocation of the workgroup together. An early `return` that depends on the invocation (e.g.
   `if (gid.x >= n) { return; }`) before a barrier breaks that: the pinned wgpu/naga accepts such a
   kernel, and lavapipe then runs it with a silently wrong result. This check reports the barrier at
   its line:col and the `return` that made it non-uniform.
2. **A read of a storage array not dominated by a bounds guard** (a warning). An index that is
   derived from the invocation id (`global_invocation_id`, `local_invocation_id`/`_index`,
   `workgroup_id`) with no comparison of it (`if (i < arrayLength(&x))`, `if (i >= p.n) { return; }`,
   a loop condition) on the way to the read. The launch rounds up to whole workgroups, so such a
   read runs past the end: lavapipe returns 0 there, other GPUs may not.

What the analysis is (and is not): a walk over the entry point's statements as the product's WGSL
grammar parses them (proof/wgsl_reader.py): reads are its `index` nodes, barriers its `call` nodes,
guards its comparison nodes, and the names an expression mentions its tokens. It tracks which
names carry invocation-dependent values. A value is non-uniform if its expression names an
invocation builtin, a `read_write` storage or workgroup variable, an atomic, or a name assigned
inside non-uniform control flow. A name counts as guarded once any comparison (`<`, `<=`, `>`,
`>=`, `==`) mentions it in an enclosing `if`/loop condition, or in an `if` whose body ends in
`return`/`break` earlier in the block; `min(...)`/`clamp(...)`/
`a % b` as a whole initialiser count as clamps. It does not judge that a guard compares against
the right bound (conformance does), judges names whole (`gid.x` compared counts for `gid.y`), does
not follow reads into helper functions (a helper that contains a barrier counts as one at its
call), and does not see through pointers. docs/porting.md, "What `scellis check` looks for"."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import StudioError
from .wgsl_reader import RELATIONAL, Module, Tok, builtin_params, is_clamp, operator, read_module, subtrees, toks

BARRIERS = {"workgroupBarrier", "storageBarrier", "textureBarrier", "workgroupUniformLoad"}
INVOCATION = {"global_invocation_id", "local_invocation_id", "local_invocation_index",
              "subgroup_invocation_id"}
INDEXING = INVOCATION | {"workgroup_id"}            # workgroup_id is uniform, but it indexes
ATOMICS = {"atomicLoad", "atomicAdd", "atomicSub", "atomicMax", "atomicMin", "atomicAnd", "atomicOr",
           "atomicXor", "atomicExchange", "atomicCompareExchangeWeak"}


def _barrier_functions(m: Module) -> set[str]:
    """Names that act as a barrier at a call: the builtins and helpers that reach one."""
    names = set(BARRIERS)
    changed = True
    while changed:
        changed = False
        for fname, fn in m.functions.items():
            if fname not in names and any(t.v in names for t in fn.toks):
                names.add(fname)
                changed = True
    return names


# ---- the walk ------------------------------------------------------------------------------------

@dataclass
class _State:
    guarded: set[str]
    unguarded: dict[str, set[str]]   # invocation-derived name -> the names it was computed from (shared)
    nonuniform: set[str]         # names with non-uniform values (shared, grows)
    in_nonuniform: bool = False
    loop_diverged: Tok | None = None


class _Walk:
    def __init__(self, m: Module, entry: str, file: str):
        self.m, self.file = m, file
        fn = m.functions[entry]
        builtins = builtin_params(m, fn)
        self.barrier_names = _barrier_functions(m)
        self.errors: list[StudioError] = []
        self.warnings: list[StudioError] = []
        self.seen: set[tuple[int, int]] = set()
        self.diverged: Tok | None = None
        self.depth = 0                     # loops around the statement being walked
        self.body = fn.body
        self.state = _State(set(), {n: set() for n, b in builtins.items() if b & INDEXING},
                            {n for n, b in builtins.items() if b & INVOCATION})

    def run(self):
        self.walk(self.body, self.state)
        return self.errors, self.warnings

    def names(self, toks: list[Tok]) -> set[str]:
        return {t.v for k, t in enumerate(toks) if (t.v[:1].isalpha() or t.v[:1] == "_")
                and not (k > 0 and toks[k - 1].v == ".")}

    def is_nonuniform(self, toks: list[Tok], st: _State) -> bool:
        ns = self.names(toks)
        rw = {n for n, a in self.m.storage.items() if a == "read_write"}
        return bool(ns & (st.nonuniform | rw | self.m.workgroup | ATOMICS))

    def compared(self, cond: list[Tok]) -> set[str]:
        """Names a condition compares (either side of each comparison node of its parse tree)."""
        out: set[str] = set()
        for rel in subtrees(getattr(cond, "tree", None), "relation"):
            if operator(rel) in RELATIONAL:
                lhs, _, rhs = rel.children
                out |= self.names(toks(lhs)) | self.names(toks(rhs))
        return out

    def expr(self, expr: list[Tok], st: _State, *, written: bool = False):
        """Reads in the expression (a bounds check each) and barriers (a uniformity check each), found
        in its parse tree; with ``written``, it is an assignment's target, whose own access is a write."""
        tree = getattr(expr, "tree", None)
        if tree is None:
            return
        for call in subtrees(tree, "call"):
            if str(call.children[0]) in self.barrier_names:
                self.barrier(toks(call.children[0])[0], st)
        skip = {id(tree)} if written else set()
        for pre in subtrees(tree, "prefix"):         # `&x[i]`: an address (an atomic's operand), not a read
            if operator(pre) == "&":
                skip.add(id(pre.children[1]))
        for ix in subtrees(tree, "index"):
            base, index = ix.children[0], ix.children[2]
            if base.data == "member" and base.children[0].data == "name":     # `s.field[i]`
                base = base.children[0]
            if id(ix) in skip or base.data != "name" or str(base.children[0]) not in self.m.storage:
                continue
            t = toks(base)[0]
            loose = {n for n in self.names(toks(index)) if self.loose(n, st)}
            if loose and (t.line, t.col) not in self.seen:
                self.seen.add((t.line, t.col))
                self.warnings.append(StudioError(
                    f"read of '{t.v}' at an index from the invocation id ({', '.join(sorted(loose))}) "
                    f"with no bounds guard before it: lavapipe returns 0 here; other GPUs may not",
                    file=self.file, line=t.line, col=t.col,
                    hint=f"guard it: `if ({sorted(loose)[0]} >= n) {{ return; }}` or "
                         f"`if ({sorted(loose)[0]} < arrayLength(&{t.v})) {{ ... }}` before the read"))

    def loose(self, name: str, st: _State, seen: frozenset = frozenset()) -> bool:
        """``name`` holds an invocation-derived value that no guard in scope bounds: neither it nor
        (for a derived name) every invocation-derived name it was computed from is compared."""
        if name not in st.unguarded or name in st.guarded or name in seen:
            return False
        roots = [n for n in st.unguarded[name] if n in st.unguarded]
        return not roots or any(self.loose(n, st, seen | {name}) for n in roots)

    def barrier(self, t: Tok, st: _State):
        if (t.line, t.col) in self.seen:
            return
        cause = self.diverged or st.loop_diverged
        if cause is not None:
            self.seen.add((t.line, t.col))
            self.errors.append(StudioError(
                f"{t.v}() is reached after a non-uniform '{cause.v}' (line {cause.line}): invocations that "
                f"left early never arrive, so the barrier is in non-uniform control flow (WGSL's uniformity "
                f"rule); the result is undefined (lavapipe silently leaves elements unwritten)",
                file=self.file, line=t.line, col=t.col,
                related=[StudioError(f"this '{cause.v}' depends on the invocation", file=self.file,
                                     line=cause.line, col=cause.col)],
                hint="do not return before the barrier: keep every invocation running to the barrier and guard only "
                     "its reads and writes (e.g. load 0 past the end: `var v = 0u; if (i < n) { v = x[i]; }`)"))
        elif st.in_nonuniform:
            self.seen.add((t.line, t.col))
            self.errors.append(StudioError(
                f"{t.v}() is inside a branch or loop whose condition depends on the invocation: the barrier "
                f"is in non-uniform control flow (WGSL's uniformity rule); the result is undefined",
                file=self.file, line=t.line, col=t.col,
                hint="move the barrier out of the branch, so that every invocation of the workgroup reaches it"))

    def walk(self, node, st: _State):
        kind = node[0]
        if kind == "block":
            inner = _State(set(st.guarded), st.unguarded, st.nonuniform, st.in_nonuniform, st.loop_diverged)
            for s in node[1]:
                self.walk(s, inner)
            st.loop_diverged = st.loop_diverged or inner.loop_diverged
        elif kind == "decl":
            self.decl(node[1].v, node[2], st)
        elif kind == "assign":
            self.expr(node[1], st, written=node[2] == "=")
            self.expr(node[3], st)
            base = node[1][0].v if node[1] else ""
            if base:
                self.decl(base, node[3] if node[2] == "=" else node[1] + node[3], st, assign=True)
        elif kind == "expr":
            self.expr(node[1], st)
        elif kind == "exit":
            self.expr(node[2], st)
            tok = node[1]
            if st.in_nonuniform and tok.v in ("return", "discard") and self.diverged is None:
                self.diverged = tok
            elif st.in_nonuniform and tok.v in ("break", "continue") and st.loop_diverged is None:
                st.loop_diverged = tok
        elif kind == "breakif":
            self.expr(node[1], st)
            if node[1] and st.loop_diverged is None and (st.in_nonuniform or self.is_nonuniform(node[1], st)):
                st.loop_diverged = Tok("break if", node[1][0].line, node[1][0].col)
        elif kind == "if":
            self.cond_branch(node, st)
        elif kind == "loop":
            self.loop(node, st)

    def decl(self, name: str, toks: list[Tok], st: _State, *, assign: bool = False):
        self.expr(toks, st) if not assign else None
        ns = self.names(toks)
        if self.is_nonuniform(toks, st) or st.in_nonuniform:
            st.nonuniform.add(name)
        elif not assign:
            st.nonuniform.discard(name)      # a new declaration (it may shadow an older name)
        if any(self.loose(n, st) for n in ns) and not is_clamp(toks):
            st.unguarded[name] = (st.unguarded.get(name, set()) if assign else set()) | (ns - {name})
            st.guarded.discard(name)
        elif not assign:
            st.unguarded.pop(name, None)

    def cond_branch(self, node, st: _State):
        _, cond, then, other = node
        self.expr(cond, st)
        nonuni = st.in_nonuniform or self.is_nonuniform(cond, st)
        compared = self.compared(cond)
        inner = _State(st.guarded | compared, st.unguarded, st.nonuniform, nonuni, st.loop_diverged)
        self.walk(then, inner)
        if other is not None:
            self.walk(other, _State(st.guarded | compared, st.unguarded, st.nonuniform, nonuni, st.loop_diverged))
        st.loop_diverged = st.loop_diverged or inner.loop_diverged
        body = then[1]
        if body and body[-1][0] == "exit" and body[-1][1].v in ("return", "break", "continue"):
            st.guarded |= compared                     # `if (i >= n) { return; }`: guarded from here on

    def loop(self, node, st: _State):
        _, cond, init, body, update = node
        outer = _State(set(st.guarded), st.unguarded, st.nonuniform, st.in_nonuniform, None)
        if init is not None:
            self.walk(init, outer)
        if cond is not None:
            self.expr(cond, outer)
        # a condition on a non-uniform value (or one assigned in the body) makes the body non-uniform;
        # the body is walked twice so that what one iteration leaves reaches the next (in the outer
        # loops only: walking every level twice would cost 2^depth)
        self.depth += 1
        for _ in range(2 if self.depth <= 3 else 1):
            nonuni = outer.in_nonuniform or (cond is not None and self.is_nonuniform(cond, outer)) or \
                outer.loop_diverged is not None
            inner = _State(outer.guarded | (self.compared(cond) if cond else set()), st.unguarded,
                           st.nonuniform, nonuni, outer.loop_diverged)
            self.walk(body, inner)
            if update is not None:
                self.walk(update, inner)
            outer.loop_diverged = outer.loop_diverged or inner.loop_diverged
        self.depth -= 1


def check_kernel_flow(source: str, entry: str, *, kernel_file: str) -> tuple[list[StudioError], list[StudioError]]:
    """(errors, warnings) for one entry point: barriers in non-uniform control flow (errors) and
    unguarded storage reads at invocation-derived indexes (warnings). An entry point that is not
    found, or that cannot be read, gets none here (the compiler reports it)."""
    try:
        m = read_module(source, file=kernel_file)
        if entry not in m.functions:
            return [], []
        return _Walk(m, entry, kernel_file).run()
    except (StudioError, RecursionError):     # text the grammar (and the compiler) will refuse
        return [], []
