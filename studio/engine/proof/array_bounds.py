"""Static check: a fixed-size array (a function-scope `var a: array<T, N>` or a `var<private>` one)
indexed by a value that the signature's ranges let reach N or more.

WGSL does not fault on such an index: the access is clamped, or reads and writes anything, so a
kernel with `var win: array<f32, 31>` and a loop `for (var j = 0u; j < p.w; j++) { win[j] = ... }`
is silently wrong for every w > 31 the signature admits. The check follows an index's largest
value through what the kernel and its contract say, with interval arithmetic:

- the signature's ranges: a param's `in [lo, hi]` (u32: at least 0), and relations between a
  symbol and a constant (`cols <= 256`, `w <= 63`);
- the binding descriptor: a uniform field (`p.w`, matched to the descriptor's field by name, else by
  its position in the WGSL struct) holds its expression (`w`, `(w - 1) / 2`), an override its value;
- the kernel: literals, module `const`s, `let`s, a `var` never assigned after its declaration, and a
  `for` loop's variable bounded by its condition (`j < B`: at most B - 1; `j <= B`: B), through
  `+ - * / %`, `min`, `max` and conversions.

An index whose largest value is unknown (it comes from the invocation id or data, or from a `var`
the kernel assigns) is not judged: conformance is. The error is at the array's name in the index
(line:col), naming the array's size, the index's largest value and the ranges it came from.
docs/verification.md, "Fixed-size arrays"."""
from __future__ import annotations

from lark import Token, Tree

from ..contract.expr import BinOp, Call, Neg, Num, Sym
from ..errors import StudioError
from .wgsl_reader import Module, attrs, kids, name_of, operator, read_module, subtrees, text_of, toks

UNKNOWN = (None, None, frozenset({"?"}))     # "?": a value the contract does not bound


def _add(a, b, sign=1):
    if sign > 0:
        lo = None if a[0] is None or b[0] is None else a[0] + b[0]
        hi = None if a[1] is None or b[1] is None else a[1] + b[1]
    else:
        lo = None if a[0] is None or b[1] is None else a[0] - b[1]
        hi = None if a[1] is None or b[0] is None else a[1] - b[0]
    return lo, hi, a[2] | b[2]


def _combine(op: str, a, b):
    why = a[2] | b[2]
    if op == "+":
        return _add(a, b)
    if op == "-":
        return _add(a, b, -1)
    nonneg = a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0
    if op == "*" and nonneg:
        return a[0] * b[0], None if a[1] is None or b[1] is None else a[1] * b[1], why
    if op in ("/", "//") and nonneg and b[0] > 0:
        return a[0] // (b[1] or a[0] + 1), None if a[1] is None else a[1] // b[0], why
    if op == "%" and b[0] is not None and b[0] > 0 and b[1] is not None:
        return 0, b[1] - 1, why
    if op in ("min", "max"):
        pick = min if op == "min" else max
        lo = None if a[0] is None or b[0] is None else pick(a[0], b[0])
        hi = (a[1] if b[1] is None else b[1] if a[1] is None else min(a[1], b[1])) if op == "min" else \
            (None if a[1] is None or b[1] is None else max(a[1], b[1]))
        return lo, hi, why
    return None, None, why | {"?"}


class _Ranges:
    """The signature's symbol ranges, and intervals of the contract's expressions over them."""

    def __init__(self, sig):
        self.sig, self.memo, self.busy = sig, {}, set()

    def symbol(self, name: str):
        if name in self.memo:
            return self.memo[name]
        if name in self.busy:
            return UNKNOWN
        self.busy.add(name)
        lo, hi = 0, None                           # dims and u32 params are never negative
        for p in self.sig.params:
            if p.name == name:
                lo = 0 if p.dtype == "u32" else None
                if p.lo is not None:
                    lo = self.expr(p.lo)[0] if lo is None else max(lo, self.expr(p.lo)[0] or lo)
                if p.hi is not None:
                    hi = self.expr(p.hi)[1]
        for r in self.sig.relations:
            for left, op, right in ((r.left, r.op, r.right), (r.right, {"<=": ">=", "<": ">", ">=": "<=", ">": "<",
                                                                         "==": "==", "!=": "!="}[r.op], r.left)):
                if isinstance(left, Sym) and left.name == name and not right.symbols() - {name}:
                    v = self.expr(right)
                    if op in ("<=", "==") and v[1] is not None:
                        hi = v[1] if hi is None else min(hi, v[1])
                    elif op == "<" and v[1] is not None:
                        hi = v[1] - 1 if hi is None else min(hi, v[1] - 1)
        self.busy.discard(name)
        self.memo[name] = (lo, hi, frozenset({name}))
        return self.memo[name]

    def expr(self, e):
        if isinstance(e, Num):
            return e.value, e.value, frozenset()
        if isinstance(e, Sym):
            return self.symbol(e.name)
        if isinstance(e, Neg):
            lo, hi, why = self.expr(e.children()[0])
            return (None if hi is None else -hi), (None if lo is None else -lo), why
        if isinstance(e, BinOp):
            return _combine(e.op, self.expr(e.left), self.expr(e.right))
        if isinstance(e, Call) and e.func in ("min", "max"):
            return _combine(e.func, *(self.expr(a) for a in e.args))
        if isinstance(e, Call) and e.func == "cdiv":
            a, b = (self.expr(x) for x in e.args)
            q = _combine("//", a, b)
            return q[0], None if q[1] is None else q[1] + 1, q[2]
        return UNKNOWN


def _literal(text: str) -> int | None:
    body = text.rstrip("iu")
    try:
        return int(body, 0)
    except ValueError:
        return None


class _Kernel:
    def __init__(self, m: Module, desc, ranges: _Ranges, file: str):
        self.m, self.ranges, self.file = m, ranges, file
        self.errors: list[StudioError] = []
        self.names: dict[str, tuple] = {}          # module scope: overrides, consts
        self.uniform: dict[str, tuple[str, list]] = {}   # WGSL uniform var -> (struct, its descriptor fields)
        self.arrays: dict[str, tuple[int, str]] = {}
        by_slot = {(b.group, b.binding): b for b in desc} if desc is not None else {}
        values = {o.name: o.value for o in getattr(desc, "overrides", ())}
        for d in kids(m.tree):
            if d.data == "override_decl" and str(name_of(d)) in values:
                self.names[str(name_of(d))] = ranges.expr(values[str(name_of(d))])
            elif d.data == "const_decl":
                self.names[str(name_of(d))] = self.value(kids(d)[-1], {})
            elif d.data == "global_var":
                at = attrs(d)
                slot = tuple(_literal(toks(at[k][0])[0].v) if at.get(k) else None for k in ("group", "binding"))
                b = by_slot.get(slot)
                ty = toks(next((c for c in kids(d) if c.data == "type"), None))
                if b is not None and b.kind == "uniform" and len(ty) == 1:
                    self.uniform[str(name_of(d))] = (ty[0].v, list(b.fields))
                self.array(d, self.arrays)

    def array(self, decl: Tree, into: dict) -> None:
        """Record ``decl``'s fixed size when it declares `array<T, N>` (function or private scope)."""
        space = next((c for c in kids(decl) if c.data == "space"), None)
        if space is not None and toks(space)[1].v not in ("private", "function"):
            return
        ty = next((c for c in kids(decl) if c.data == "type"), None)
        gen = kids(ty)[0] if ty is not None and kids(ty) else None
        if gen is None or gen.data != "templated" or str(gen.children[0]) != "array" or len(kids(gen)) < 2:
            return
        n = self.value(kids(gen)[1], {})
        if n[0] is not None and n[0] == n[1]:
            into[str(name_of(decl))] = (n[0], "".join(t.v for t in toks(ty)).replace(",", ", "))

    def member(self, base: str, field: str):
        struct, fields = self.uniform[base]
        members = [str(name_of(c)) for c in kids(self.m.structs[struct]) if c.data == "member"] \
            if struct in self.m.structs else []
        f = next((f for f in fields if f.name == field), None)        # by name, as the layout check matches
        if f is None and field in members and members.index(field) < len(fields):
            f = fields[members.index(field)]
        return self.ranges.expr(f.value) if f is not None else UNKNOWN

    def value(self, t, env: dict):
        if isinstance(t, Token) or t is None:
            return UNKNOWN
        k = t.data
        if k == "int":
            v = _literal(str(t.children[0]))
            return (v, v, frozenset()) if v is not None else UNKNOWN
        if k == "name":
            name = str(t.children[0])
            return env.get(name) or self.names.get(name) or UNKNOWN
        if k == "paren":
            return self.value(kids(t)[0], env)
        if k == "member":
            base = kids(t)[0]
            if base.data == "name" and str(base.children[0]) in self.uniform:
                return self.member(str(base.children[0]), str(t.children[-1]))
            return UNKNOWN
        if k == "binary":
            return _combine(operator(t), self.value(t.children[0], env), self.value(t.children[2], env))
        if k == "call":
            fn, args = str(t.children[0]), kids(t)
            args = kids(args[0]) if args and args[0].data == "args" else args
            if fn in ("u32", "i32") and len(args) == 1:
                return self.value(args[0], env)
            if fn in ("min", "max") and len(args) == 2:
                return _combine(fn, self.value(args[0], env), self.value(args[1], env))
        return UNKNOWN

    # ---- the walk ----------------------------------------------------------------------------------
    def function(self, fn) -> None:
        assigned = {toks(kids(s)[0])[0].v for s in subtrees(fn.tree, "assign")} | \
                   {toks(kids(s)[0])[0].v for s in subtrees(fn.tree, "incdec")}
        self.assigned = assigned
        self.block(kids(fn.tree)[-1], {}, dict(self.arrays))

    def block(self, block: Tree, env: dict, arrays: dict) -> None:
        env, arrays = dict(env), dict(arrays)
        for s in kids(block):
            self.statement(s, env, arrays)

    def statement(self, s: Tree, env: dict, arrays: dict) -> None:
        if s.data == "block":
            return self.block(s, env, arrays)
        if s.data == "for_stmt":
            inner, inner_arrays = dict(env), dict(arrays)
            parts = [c for c in s.children if not isinstance(c, Token)]
            init, cond, update, body = parts
            if init is not None:
                self.statement(init, inner, inner_arrays)
            if init is not None and init.data == "decl" and cond is not None:
                start = next((c for c in kids(init) if c.data not in ("space", "type")), None)
                inner[str(name_of(init))] = (self.value(start, inner)[0], None, frozenset({"?"}))
                self.bound(str(name_of(init)), cond, inner)
            self.check(cond, inner, inner_arrays)
            self.block(body, inner, inner_arrays)
            return None
        if s.data == "decl":
            self.array(s, arrays)
            name = str(name_of(s))
            value = next((c for c in kids(s) if c.data not in ("space", "type")), None)
            self.check(value, env, arrays)
            word = str(s.children[0])
            env[name] = self.value(value, env) if word in ("let", "const") or name not in self.assigned else UNKNOWN
            if word == "var" and name in self.assigned:
                env[name] = UNKNOWN
            return None
        for c in kids(s):
            if c.data in ("block", "if_stmt", "for_stmt", "while_stmt", "loop_stmt", "switch_stmt", "continuing",
                          "case"):
                self.statement(c, env, arrays) if c.data != "case" else self.block(kids(c)[-1], env, arrays)
            else:
                self.check(c, env, arrays)
        return None

    def bound(self, var: str, cond: Tree, env: dict) -> None:
        """Narrow ``var`` by a loop condition `var < B` / `var <= B` (or a chain of them joined by &&)."""
        for rel in subtrees(cond, "relation"):
            left, op, right = rel.children[0], operator(rel), rel.children[2]
            if op in (">", ">="):
                left, right, op = right, left, {">": "<", ">=": "<="}[op]
            if op in ("<", "<=") and getattr(left, "data", None) == "name" and str(left.children[0]) == var:
                b = self.value(right, env)
                lo = env.get(var, UNKNOWN)[0]
                if b[1] is not None:
                    env[var] = (lo, b[1] - (op == "<"), b[2])
                elif "?" not in b[2]:             # bounded by a symbol the contract leaves unbounded
                    env[var] = (lo, None, b[2])

    def check(self, t, env: dict, arrays: dict) -> None:
        if not isinstance(t, Tree):
            return
        for ix in subtrees(t, "index"):
            base, index = kids(ix)
            if base.data != "name" or str(base.children[0]) not in arrays:
                continue
            size, ty = arrays[str(base.children[0])]
            lo, hi, why = self.value(index, env)
            if (hi is None and ("?" in why or not why)) or (hi is not None and hi < size):
                continue
            name = base.children[0]
            ranges = "; ".join(self.describe(s) for s in sorted(why - {"?"})) or "the kernel's constants"
            reach = f"reaches {hi}" if hi is not None else "has no upper bound"
            self.errors.append(StudioError(
                f"{name}[{text_of(index)}] can "
                f"index past the end of '{name}' ({ty}, {size} elements): the index {reach} within the ranges "
                f"the contract allows ({ranges}); WGSL does not fault there, the result is silently wrong",
                file=self.file, line=name.line, col=name.column,
                hint=f"bound the range in the signature so that the index stays at most {size - 1}"
                     + (f", or size the array for the range (array of {hi + 1})" if hi is not None else "")))

    def describe(self, sym: str) -> str:
        p = next((p for p in self.ranges.sig.params if p.name == sym), None)
        hi = self.ranges.symbol(sym)[1]
        return (str(p) if p is not None else f"{sym} <= {hi}" if hi is not None else sym) + (
            " (no upper bound)" if hi is None else "")


def check_array_bounds(source: str, sig, desc, *, kernel_file: str) -> list[StudioError]:
    """Errors for fixed-size arrays that an index can overrun within the contract's ranges. A text
    the grammar refuses gets none here (the compiler reports it)."""
    try:
        m = read_module(source, file=kernel_file)
        k = _Kernel(m, desc, _Ranges(sig), kernel_file)
        for fn in m.functions.values():
            k.function(fn)
    except (StudioError, RecursionError, IndexError, KeyError, ValueError, TypeError, AttributeError):
        return []                 # a text the grammar reads but no compiler would: naga reports it
    seen, out = set(), []
    for e in k.errors:
        if (e.line, e.col) not in seen:
            seen.add((e.line, e.col))
            out.append(e)
    return out
