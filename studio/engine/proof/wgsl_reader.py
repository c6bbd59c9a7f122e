"""A small reader of WGSL's statement structure, for the static checks of proof/kernel_flow.py:
pygments' WGSL tokens (comments skipped) with their line:col, module-scope storage and workgroup
variables, functions, and a function body as nested statements. It is not a compiler (naga is):
it reads what a valid kernel is made of, and a kernel naga refuses is reported by naga."""
from __future__ import annotations

from dataclasses import dataclass, field

from pygments.lexers import get_lexer_by_name
from pygments.token import Comment

RELATIONAL = {"<", "<=", ">", ">=", "=="}
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}

@dataclass(frozen=True)
class Tok:
    v: str
    line: int
    col: int


def tokens(source: str) -> list[Tok]:
    """The tokens that are code, each with its 1-based line:col (counted as the lexer goes: linear in
    the size of the source)."""
    out, line, start, seen = [], 1, 0, 0       # start: the offset of the current line; seen: scanned up to
    for index, ttype, value in get_lexer_by_name("wgsl").get_tokens_unprocessed(source):
        if ttype in Comment or not value.strip():
            continue
        lead = len(value) - len(value.lstrip())
        at = index + lead
        newlines = source.count("\n", seen, at)
        if newlines:
            line += newlines
            start = source.rfind("\n", seen, at) + 1
        seen = at
        out.append(Tok(value.strip(), line, at - start + 1))
    return _join_ops(out)


def _join_ops(toks: list[Tok]) -> list[Tok]:
    """pygments may split `<=`, `>=`, `==`, `+=`, `>>=` ... into single characters: join adjacent ones."""
    out: list[Tok] = []
    for t in toks:
        if out and out[-1].line == t.line and out[-1].col + len(out[-1].v) == t.col and \
                (out[-1].v + t.v) in RELATIONAL | ASSIGN | {"!=", "&&", "||", "<<", ">>", "->", "++", "--"} and \
                out[-1].v not in ("(", ")"):
            out[-1] = Tok(out[-1].v + t.v, out[-1].line, out[-1].col)
        else:
            out.append(t)
    return out


# ---- statements ----------------------------------------------------------------------------------
# ("block", [stmt]) · ("if", cond, then, else|None) · ("loop", cond|None, init|None, body, update)
# ("exit", tok)  return/break/continue · ("decl", name_tok, expr) · ("assign", target, op, expr)
# ("expr", toks) · ("breakif", cond)

class Parser:
    def __init__(self, toks: list[Tok]):
        self.t, self.i = toks, 0

    def peek(self, k: int = 0) -> str:
        return self.t[self.i + k].v if self.i + k < len(self.t) else ""

    def until(self, stops: set[str]) -> list[Tok]:
        """Tokens up to (not including) the first of ``stops`` at bracket depth 0."""
        out, depth = [], 0
        while self.i < len(self.t):
            v = self.t[self.i].v
            if depth == 0 and v in stops:
                break
            depth += v in ("(", "[", "{")
            depth -= v in (")", "]", "}")
            out.append(self.t[self.i])
            self.i += 1
        return out

    def block(self) -> tuple:
        self.i += 1                                      # "{"
        stmts = []
        while self.i < len(self.t) and self.peek() != "}":
            s = self.stmt()
            if s is not None:
                stmts.append(s)
        self.i += 1                                      # "}"
        return ("block", stmts)

    def stmt(self):
        v = self.peek()
        if v == ";":
            self.i += 1
            return None
        if v == "{":
            return self.block()
        if v == "if":
            self.i += 1
            cond = self.until({"{"})
            then = self.block()
            other = None
            if self.peek() == "else":
                self.i += 1
                other = self.stmt() if self.peek() == "if" else self.block()
            return ("if", cond, then, other)
        if v == "for":
            self.i += 2                                  # "for" "("
            init = self.simple(self.until({";"}))
            self.i += 1
            cond = self.until({";"})
            self.i += 1
            update = self.until({")"})
            self.i += 1
            return ("loop", cond, init, self.block(), self.simple(update))
        if v == "while":
            self.i += 1
            cond = self.until({"{"})
            return ("loop", cond, None, self.block(), None)
        if v == "loop":
            self.i += 1
            return ("loop", None, None, self.block(), None)
        if v == "continuing":
            self.i += 1
            return self.block()
        if v == "switch":
            self.i += 1
            cond = self.until({"{"})
            self.i += 1
            cases = []
            while self.i < len(self.t) and self.peek() != "}":
                self.until({"{"})
                cases.append(self.block())
            self.i += 1
            return ("if", cond, ("block", cases), None)
        if v == "break" and self.peek(1) == "if":
            self.i += 2
            cond = self.until({";"})
            self.i += 1
            return ("breakif", cond)
        if v in ("return", "break", "continue", "discard"):
            tok = self.t[self.i]
            expr = self.until({";"})
            self.i += 1
            return ("exit", tok, expr[1:])
        toks = self.until({";"})
        self.i += 1
        return self.simple(toks)

    @staticmethod
    def simple(toks: list[Tok]):
        if not toks:
            return None
        if toks[0].v in ("let", "var", "const") and len(toks) > 1:
            k = 1
            if toks[1].v == "<":                         # var<function>
                while k < len(toks) and toks[k].v != ">":
                    k += 1
                k += 1
            name = toks[k] if k < len(toks) else toks[-1]
            eq = next((j for j, t in enumerate(toks) if t.v == "="), None)
            return ("decl", name, toks[eq + 1:] if eq is not None else [])
        for j, t in enumerate(toks):
            if t.v in ASSIGN:
                return ("assign", toks[:j], t.v, toks[j + 1:])
            if t.v in ("++", "--"):
                return ("assign", toks[:j], t.v, toks[:j])
        return ("expr", toks)


# ---- the module: globals and functions ----------------------------------------------------------

@dataclass
class Module:
    storage: dict[str, str] = field(default_factory=dict)     # name -> "read" | "read_write"
    workgroup: set[str] = field(default_factory=set)
    functions: dict[str, tuple[list[Tok], int, int]] = field(default_factory=dict)   # name -> (params, body lo, hi)
    toks: list[Tok] = field(default_factory=list)


def read_module(source: str) -> Module:
    m = Module(toks=tokens(source))
    t = m.toks
    i = 0
    while i < len(t):
        if t[i].v == "var" and i + 1 < len(t) and t[i + 1].v == "<":
            j, space = i + 2, []
            while j < len(t) and t[j].v != ">":
                space.append(t[j].v)
                j += 1
            if j + 1 < len(t):
                if space and space[0] == "storage":
                    m.storage[t[j + 1].v] = "read_write" if "read_write" in space else "read"
                elif space and space[0] == "workgroup":
                    m.workgroup.add(t[j + 1].v)
            i = j
        elif t[i].v == "fn" and i + 2 < len(t):
            name, j = t[i + 1].v, i + 2
            p = Parser(t)
            p.i = j + 1
            params = p.until({")"})
            j = p.i
            while j < len(t) and t[j].v != "{":
                j += 1
            depth, k = 0, j
            while k < len(t):
                depth += t[k].v == "{"
                depth -= t[k].v == "}"
                if depth == 0:
                    break
                k += 1
            m.functions[name] = (params, j, k + 1)
            i = k
        i += 1
    return m


def operand(toks: list[Tok], k: int, step: int) -> list[Tok]:
    """The operand on one side of the operator at ``k``, up to `&&`, `||`, `,` or an open bracket."""
    opens, closes = ("(", "["), (")", "]")
    if step < 0:
        opens, closes = closes, opens
    out, depth, j = [], 0, k + step
    while 0 <= j < len(toks):
        v = toks[j].v
        if depth == 0 and v in {"&&", "||", ",", "{", ";"} | RELATIONAL:
            break
        depth += v in opens
        depth -= v in closes
        if depth < 0:
            break
        out.append(toks[j])
        j += step
    return out if step > 0 else out[::-1]


def bracket(toks: list[Tok], j: int) -> list[Tok]:
    depth, out = 0, []
    for t in toks[j:]:
        depth += t.v == "["
        depth -= t.v == "]"
        if depth == 0:
            break
        out.append(t)
    return out[1:]


def closes(toks: list[Tok], j: int) -> int:
    """The index of the bracket that closes the one at ``j``."""
    depth = 0
    for k in range(j, len(toks)):
        depth += toks[k].v in ("(", "[")
        depth -= toks[k].v in (")", "]")
        if depth == 0:
            return k
    return len(toks)


def is_clamp(toks: list[Tok]) -> bool:
    """The whole initialiser is `min(...)`, `clamp(...)` or `a % b`: its value is bounded."""
    if len(toks) > 2 and toks[0].v in ("min", "clamp") and toks[1].v == "(" and closes(toks, 1) == len(toks) - 1:
        return True
    depth = 0
    for t in toks:
        depth += t.v in ("(", "[")
        depth -= t.v in (")", "]")
        if depth == 0 and t.v == "%":
            return True
    return False
