"""A sum that declares ``pairwise`` on the device (the learner's WGSL, wgsl.py): the tree of
evaluate.pairwise_sum, emitted into one invocation by the kernel's Emitter (``em``: its scope,
fresh names and lines). The same additions of the same operands as numpy's level-by-level
evaluation, so the same bits (docs/assignment-programs.md, "The order of a sum")."""
from __future__ import annotations

from .syntax import Reduce


def pairwise(em, e: Reduce, lo: int, hi: int, b: int) -> str:
    """sum(j in lo..hi, pairwise: body): the tree of evaluate.pairwise_sum, computed in one
    invocation. Node i of level L covers terms [i 2^L, min((i + 1) 2^L, n)) (n = hi - lo), so
    the tree is a full binary tree over each aligned block of 2^L terms, and the whole sum
    splits the terms into the blocks of n's binary digits, largest first, added right to left:
    b1 + (b2 + (... + bt)). The kernel walks the terms in blocks of ``b`` (the unroll factor, a
    power of two; 1 when the body has loops of its own): each block's tree is straight-line
    code, and a block's sum joins a stack of finished blocks as a binary counter does (block t
    merges with the top of the stack once per trailing one bit of t; left + right). After the
    last full block the stack holds the blocks of n // B's binary digits; the tail (n mod B
    terms) is its own binary digits' blocks, straight-line; then the right-to-left fold. The
    same additions of the same operands as level by level, so the same bits."""
    n = hi - lo
    blocks, tail = n // b, n % b
    depth = max(1, blocks.bit_length())
    name = em.fresh("pw")
    parts: list[str] = []                          # finished block sums, left to right
    em.scope[e.var] = (lo, hi)
    if blocks:
        em.out(f"var {name}_stk: array<f32, {depth}>;")
        em.out(f"var {name}_sp: i32 = 0;")
        em.iterations += em.mult * blocks
        em.out(f"for (var {name}_t: i32 = 0; {name}_t < {blocks}; {name}_t = {name}_t + 1) {{")
        em.depth += 1
        em.mult, outer = em.mult * blocks, em.mult
        v = block(em, e, f"{lo} + {name}_t * {b}", b)
        em.mult = outer
        em.out(f"var {name}_v: f32 = {v};")
        em.out(f"let {name}_ones: u32 = countTrailingZeros(~u32({name}_t));")
        for d in range(depth - 1):                 # at most depth - 1 merges: the stack is that deep
            em.out(f"if ({name}_ones > {d}u) {{ {name}_sp = {name}_sp - 1; "
                     f"{name}_v = fx({name}_stk[{name}_sp] + {name}_v); }}")
        em.out(f"{name}_stk[{name}_sp] = {name}_v;")
        em.out(f"{name}_sp = {name}_sp + 1;")
        em.depth -= 1
        em.out("}")
        parts += [f"{name}_stk[{i}]" for i in range(bin(blocks).count("1"))]
    start = lo + blocks * b
    for bit in reversed(range(max(1, tail.bit_length()))):
        size = 1 << bit
        if tail & size:
            parts.append(block(em, e, str(start), size))
            start += size
    del em.scope[e.var]
    acc = parts[-1]
    for left in reversed(parts[:-1]):
        nxt = em.fresh("pwf")
        em.out(f"let {nxt}: f32 = fx({left} + {acc});")
        acc = nxt
    return acc

def block(em, e: Reduce, first: str, size: int) -> str:
    """The full binary tree over the ``size`` (a power of two) terms from index ``first``:
    straight-line, each pair added as soon as both halves exist (a value for each level alive)."""
    stack: list[tuple[int, str]] = []              # (level, value), levels strictly decreasing
    for c in range(size):
        term = em.fresh("pwt")
        em.out(f"var {term}: f32;")
        em.out(f"{{ let v_{e.var}: i32 = {first} + {c};")
        em.depth += 1
        em.out(f"{term} = {em.ev(e.body)};")
        em.depth -= 1
        em.out("}")
        level, value = 0, term
        while stack and stack[-1][0] == level:
            _, left = stack.pop()
            node = em.fresh("pwn")
            em.out(f"let {node}: f32 = fx({left} + {value});")
            level, value = level + 1, node
        stack.append((level, value))
    assert len(stack) == 1
    return stack[0][1]
