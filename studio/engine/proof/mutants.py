"""Mutation score: does the corpus tell the author's kernel apart from its near misses?

Conformance also runs a fixed, seeded, named set of mutants of the author's own forward kernel
(docs/verification.md, "Mutation score") through the same corpus, small cases first, each
stopping at its first failing case. A mutant that fails is *killed*; one that passes every case
*survives*: "your corpus cannot tell these apart from your kernel". A surviving mutant that is
an equivalent rewrite can be acknowledged in the package's ``equivalent-mutants.txt`` (one
mutant id a line, ``#`` comments), which is hashed with the package and recorded on the receipt.

Mutant classes, each made at sites inside function bodies only (attributes such as
``@workgroup_size(64)`` and ``@binding(1)`` are left alone, as are the updates of loop counters,
``i = i + 1u``, ``while`` conditions and ``for`` conditions that count down or combine tests,
whose mutants might never end):

* ``operator``   arithmetic swaps: + and -, * and +, / and *
* ``comparison`` < and <=, > and >=, == and !=, && and ||
* ``off_by_one`` an integer literal ±1 (guards, indices, bounds)
* ``drop_write`` a store into a read_write storage array removed
* ``constant``   a float literal scaled by 1.5 (0.0 becomes 1.0)
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

from ..errors import StudioError

VERSION = 1
DEFAULT_COUNT = 8
ACK_FILE = "equivalent-mutants.txt"
CLASSES = ("comparison", "off_by_one", "drop_write", "operator", "constant")

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ATTR = re.compile(r"@\w+\s*(\([^)]*\))?")
_GENERIC = re.compile(r"\b(?:array|vec[234]|mat[234]x[234]|var|bitcast|ptr|atomic|texture\w*)\s*"
                      r"<[^<>;{}]*(?:<[^<>;{}]*>[^<>;{}]*)?>")
_SELF_UPDATE = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*\1\s*[-+]\s*[^;)]*")
_COMPOUND = re.compile(r"[-+*/]=|\+\+|--|->|<<|>>")
_FOR_COND = re.compile(r"\bfor\s*\([^;]*;([^;]*);([^)]*)\)")   # the update, and a condition with >, &&, ||, !=
_WHILE = re.compile(r"\bwhile\s*\([^{]*\)\s*(?=\{)")        # a mutated while condition may never end
_CMP = {"<=": "<", ">=": ">", "<": "<=", ">": ">=", "==": "!=", "!=": "==", "&&": "||", "||": "&&"}
_OPS = {"+": "-", "-": "+", "*": "+", "/": "*"}
_CMP_RE = re.compile(r"<=|>=|==|!=|&&|\|\||<|>")
_OP_RE = re.compile(r"(?<=[\w)\]])\s*([-+*/])(?![=])")
_INT_RE = re.compile(r"(?<![\w.])(\d+)([ui]?)(?![\w.])")
_FLOAT_RE = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(f?)(?![\w.])")
_STORE_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\[[^;=]*\]\s*=(?!=)[^;]*;")
_RW_RE = re.compile(r"var\s*<\s*storage\s*,\s*read_write\s*>\s*([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Mutant:
    id: str            # stable: class@line:col:old->new
    kind: str
    line: int
    col: int
    old: str
    new: str
    source: str

    def describe(self) -> str:
        return f"line {self.line}:{self.col}: `{self.old}` -> `{self.new}` ({self.kind.replace('_', ' ')})"


def _mask(source: str) -> str:
    """The source with comments, attributes, generics, compound operators and loop-counter updates
    blanked (same length, newlines kept), and everything before the first function body."""
    def keep(m):
        return re.sub(r"[^\n]", " ", m.group())
    code = _COMMENT.sub(keep, source)
    for pat in (_ATTR, _GENERIC, _SELF_UPDATE, _COMPOUND, _WHILE):
        code = pat.sub(keep, code)
    for m in _FOR_COND.finditer(code):
        code = code[:m.start(2)] + re.sub(r"[^\n]", " ", m.group(2)) + code[m.end(2):]
        if re.search(r">|&&|\|\||!=", m.group(1)):
            code = code[:m.start(1)] + re.sub(r"[^\n]", " ", m.group(1)) + code[m.end(1):]
    body = re.search(r"\bfn\b[^{]*\{", code)
    start = body.end() if body else len(code)
    return re.sub(r"[^\n]", " ", code[:start]) + code[start:]


def candidates(source: str) -> list[Mutant]:
    code = _mask(source)
    out: list[Mutant] = []

    def add(kind, start, end, new):
        old = source[start:end]
        line = source.count("\n", 0, start) + 1
        col = start - (source.rfind("\n", 0, start) + 1) + 1
        out.append(Mutant(f"{kind}@{line}:{col}:{old.strip()}->{new.strip()}", kind, line, col, old, new,
                          source[:start] + new + source[end:]))

    floats = [(m.start(), m.end()) for m in _FLOAT_RE.finditer(code)]
    def in_float(i):
        return any(a <= i < b for a, b in floats)
    for m in _CMP_RE.finditer(code):
        add("comparison", m.start(), m.end(), _CMP[m.group()])
    for m in _OP_RE.finditer(code):
        if not in_float(m.start(1)):
            add("operator", m.start(1), m.end(1), _OPS[m.group(1)])
    for m in _INT_RE.finditer(code):
        if in_float(m.start()):
            continue
        v = int(m.group(1))
        for w in ([v + 1, v - 1] if v > 0 else [v + 1]):
            add("off_by_one", m.start(), m.end(), f"{w}{m.group(2)}")
    for m in _FLOAT_RE.finditer(code):
        v = float(m.group(1))
        add("constant", m.start(), m.end(), f"{(v * 1.5 if v else 1.0)!r}{m.group(2)}")
    writable = set(_RW_RE.findall(_COMMENT.sub(" ", source)))
    for m in _STORE_RE.finditer(code):
        if m.group(1) in writable:
            add("drop_write", m.start(), m.end(), "")
    return out


def select(source: str, count: int = DEFAULT_COUNT, seed: int = 0) -> list[Mutant]:
    """A fixed, seeded choice of ``count`` mutants, round-robin over the classes."""
    rng = np.random.default_rng([seed, VERSION])
    pools = {k: [m for m in candidates(source) if m.kind == k] for k in CLASSES}
    for k in CLASSES:
        order = rng.permutation(len(pools[k])) if pools[k] else []
        pools[k] = [pools[k][i] for i in order]
    chosen: list[Mutant] = []
    while len(chosen) < count and any(pools.values()):
        for k in CLASSES:
            if pools[k] and len(chosen) < count:
                chosen.append(pools[k].pop(0))
    return chosen


def acknowledged(pkg) -> list[str]:
    raw = pkg.files.get(ACK_FILE)
    if not raw:
        return []
    lines = raw.decode("utf-8", "replace").splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def score(pkg, cases: list, run_forward, *, count: int = DEFAULT_COUNT, seed: int = 0,
          part: str = "forward") -> dict:
    """Run the mutants through ``cases``; ``run_forward(mutant_pkg, cases) -> failures`` (stopping at
    the first). ``part``: ``backward`` mutates the `[backward]` kernel instead (its ids are prefixed
    ``backward/``). The result is plain JSON, for the report and the receipt."""
    ack = acknowledged(pkg)
    killed, survivors, acked = {}, [], []
    field, prefix = ("backward_source", "backward/") if part == "backward" else ("kernel_source", "")
    mutants = [dataclasses.replace(m, id=prefix + m.id) for m in select(getattr(pkg, field) or "", count, seed)]
    for m in mutants:
        mpkg = dataclasses.replace(pkg, **{field: m.source})
        try:
            fails = run_forward(mpkg, cases)
        except StudioError as e:                  # it does not compile or cannot run: killed by the engine
            killed[m.id] = f"refused before any case ran: {e.message.splitlines()[0][:160]}"
            continue
        if fails:
            f = fails[0]
            killed[m.id] = f"case {f.case.index} ({f.case.shape_kind}, values {f.case.value_kind}): {f.kind}"
        elif m.id in ack:
            acked.append({"id": m.id, "description": m.describe()})
        else:
            survivors.append({"id": m.id, "description": m.describe()})
    judged = len(mutants) - len(acked)
    return {"version": VERSION, "seed": seed, "total": len(mutants), "killed": len(killed),
            "score": f"{len(killed)}/{judged}" if judged else "0/0", "killed_by": killed,
            "survivors": survivors, "acknowledged": acked}


def lines(mut: dict) -> list[str]:
    if not mut:
        return []
    out = [f"  mutants   : {mut['killed']} of {mut['total'] - len(mut['acknowledged'])} killed by the corpus"
           + (f" ({len(mut['acknowledged'])} acknowledged equivalent)" if mut["acknowledged"] else "")]
    if mut["survivors"]:
        out.append("  survivors : your corpus cannot tell these apart from your kernel "
                   f"(acknowledge an equivalent one in {ACK_FILE}):")
        out += [f"              {s['id']}  {s['description']}" for s in mut["survivors"]]
    if isinstance(mut.get("backward"), dict):
        out += [ln.replace("  mutants   :", "  mutants   : backward:", 1) for ln in lines(mut["backward"])]
    return out
