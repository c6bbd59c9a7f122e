"""A kernel's WGSL read with the product's grammar (resources/grammars/wgsl.lark; the parse tree is
contract/wgsl.py's, shared with the checks of module-scope declarations), for the static
checks of proof/kernel_flow.py and proof/array_bounds.py and the race sanitizer's rewrite
(proof/races.py): module-scope storage, workgroup and private variables, structs, functions, and a
function body as nested statements whose expressions keep both their parse tree and their tokens
(each at its 1-based line:col). It is not a compiler (naga is): a text the grammar refuses is
reported by naga, and ``parse_wgsl`` says where the grammar stopped."""
from __future__ import annotations

from dataclasses import dataclass, field

from lark import Token, Tree

from ..contract.wgsl import attrs, kids, name_of, parse_wgsl, type_of
from ..contract.wgsl import text_of as text_of   # re-exported: races and array_bounds print the indices they check

RELATIONAL = {"<", "<=", ">", ">=", "=="}


@dataclass(frozen=True)
class Tok:
    v: str
    line: int
    col: int


class Toks(list):
    """An expression's tokens in order, with the subtree they came from (``tree``; None when empty)."""
    tree: Tree | None = None


def toks(node) -> Toks:
    out = Toks()
    if node is None:
        return out
    if isinstance(node, Token):
        out.append(Tok(str(node), node.line, node.column))
        return out
    out.extend(Tok(str(t), t.line, t.column) for t in node.scan_values(lambda v: isinstance(v, Token)))
    out.tree = node
    return out


def subtrees(node: Tree, name: str):
    """Every subtree named ``name`` under ``node`` (itself included), in source order."""
    if not isinstance(node, Tree):
        return
    stack = [node]
    while stack:
        t = stack.pop()
        if t.data == name:
            yield t
        stack.extend(c for c in reversed(t.children) if isinstance(c, Tree))


# ---- statements ----------------------------------------------------------------------------------
# ("block", [stmt]) · ("if", cond, then, else|None) · ("loop", cond|None, init|None, body, update)
# ("exit", tok, expr) return/break/continue/discard · ("decl", name_tok, expr) ·
# ("assign", target, op, expr) · ("expr", toks) · ("breakif", cond); every expression a Toks.

def statement(t):
    if not isinstance(t, Tree):
        return None
    k, parts = t.data, kids(t)
    if k == "block":
        return ("block", [s for s in map(statement, parts) if s is not None])
    if k == "if_stmt":
        return ("if", toks(parts[0]), statement(parts[1]), statement(parts[2]) if len(parts) > 2 else None)
    if k == "for_stmt":
        slots = [c for c in t.children if not (isinstance(c, Token) and str(c) in ("for", "(", ";", ")"))]
        init, cond, update, body = slots
        return ("loop", toks(cond), statement(init), statement(body), statement(update))
    if k == "while_stmt":
        return ("loop", toks(parts[0]), None, statement(parts[1]), None)
    if k == "loop_stmt":
        return ("loop", None, None, statement(parts[0]), None)
    if k == "continuing":
        return statement(parts[0])
    if k == "switch_stmt":
        cases = [statement(kids(c)[-1]) for c in parts[1:] if c.data == "case"]
        return ("if", toks(parts[0]), ("block", cases), None)
    if k == "exit":
        word = t.children[0]
        return ("exit", Tok(str(word), word.line, word.column), toks(parts[0] if parts else None))
    if k == "break_if":
        return ("breakif", toks(parts[0]))
    if k == "decl":
        value = next((c for c in parts if c.data not in ("space", "type")), None)
        return ("decl", toks(name_of(t))[0], toks(value))
    if k == "assign":
        return ("assign", toks(parts[0]), "".join(map(str, parts[1].children)), toks(parts[2]))
    if k == "incdec":
        return ("assign", toks(parts[0]), str(parts[1].children[0]), toks(parts[0]))
    if k in ("call_stmt", "const_assert"):
        return ("expr", toks(parts[0]))
    # attributes before a statement: the statement itself
    inner = [c for c in parts if c.data != "attr"]
    return statement(inner[0]) if inner else None


# ---- the module: globals and functions ----------------------------------------------------------

@dataclass
class Function:
    name: str
    tree: Tree
    params: list[Tree]               # the `param` subtrees
    toks: list[Tok]

    @property
    def body(self) -> tuple:
        return statement(kids(self.tree)[-1])


@dataclass
class Module:
    tree: Tree | None = None
    storage: dict[str, str] = field(default_factory=dict)     # name -> "read" | "read_write"
    workgroup: set[str] = field(default_factory=set)
    globals: dict[str, Tree] = field(default_factory=dict)    # every module-scope var, by name
    structs: dict[str, Tree] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)


def read_module(source: str, *, file: str | None = None) -> Module:
    """The module's declarations (raises StudioError where the grammar refuses the text)."""
    tree = parse_wgsl(source, file=file)
    m = Module(tree=tree)
    for d in kids(tree):
        if d.data == "global_var":
            name = str(name_of(d))
            m.globals[name] = d
            space = next((c for c in kids(d) if c.data == "space"), None)
            words = [str(c) for c in space.children if isinstance(c, Token) and c.type == "NAME"] if space else []
            if words[:1] == ["storage"]:
                m.storage[name] = "read_write" if "read_write" in words else "read"
            elif words[:1] == ["workgroup"]:
                m.workgroup.add(name)
        elif d.data == "struct_decl":
            m.structs[str(name_of(d))] = d
        elif d.data == "function":
            m.functions[str(name_of(d))] = Function(str(name_of(d)), d, [c for c in kids(d) if c.data == "param"],
                                                    toks(d))
    return m


def builtin_params(m: Module, fn: Function) -> dict[str, set[str]]:
    """{parameter name: its builtins} for `@builtin(X) name: T` parameters, and for a parameter whose
    type is a struct with `@builtin(X)` members (`fn main(in: Inputs)`: `in.gid` names `in`)."""
    out: dict[str, set[str]] = {}
    for p in fn.params:
        at = attrs(p)
        if "builtin" in at and at["builtin"]:
            out[str(name_of(p))] = {toks(at["builtin"][0])[0].v}
            continue
        ty = toks(type_of(p))
        if len(ty) == 1 and ty[0].v in m.structs:
            members = [c for c in kids(m.structs[ty[0].v]) if c.data == "member"]
            found = {toks(attrs(c)["builtin"][0])[0].v for c in members if attrs(c).get("builtin")}
            if found:
                out[str(name_of(p))] = found
    return out


def is_clamp(expr: list[Tok]) -> bool:
    """The whole initialiser is `min(...)`, `clamp(...)` or `a % b`: its value is bounded."""
    t = getattr(expr, "tree", None)
    while t is not None and t.data == "paren":
        t = kids(t)[0]
    if t is None:
        return False
    if t.data == "call" and str(t.children[0]) in ("min", "clamp"):
        return True
    return t.data == "binary" and operator(t) == "%"


def operator(t: Tree) -> str:
    """The operator of a binary, relation or prefix node (an anonymous token or an `*_op` rule)."""
    op = t.children[0] if t.data == "prefix" else t.children[1]
    return "".join(map(str, op.children)) if isinstance(op, Tree) else str(op)
