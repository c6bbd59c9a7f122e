"""Random assignment programs: the WGSL compilation and the numpy reference agree on every one
(bit for bit where only + - * select min max abs and comparisons appear), the canonical text
reads back to the same hash, and forced unrolling (with a remainder) changes no bit."""
import random

import numpy as np
import pytest

from studio.engine.learner.agreement import agree
from studio.engine.learner.program import check_program, parse_program, slot_width
from studio.engine.learner.wgsl import compile_wgsl

K, S = 7, 9


def expr(rng: random.Random, depth: int, var: str | None, inexact: bool) -> str:
    leaves = [f"sample[{rng.randrange(S)}]", f"param[{rng.randrange(K)}]", f"{rng.uniform(-3, 3):.3f}"]
    if var:
        leaves += [f"sample[{var}]", f"param[{var}]", f"param[k - 1 - {var}]"]
    if depth == 0:
        return rng.choice(leaves)
    a, b = expr(rng, depth - 1, var, inexact), expr(rng, depth - 1, var, inexact)
    forms = [f"({a} + {b})", f"({a} - {b})", f"({a} * {b})", f"min({a}, {b})", f"max({a}, {b})", f"abs({a})",
             f"-{a}", f"select({a} < {b}, {a}, {b})", f"select({a} >= 0.5 and not {b} > {a}, {b}, 1.5)",
             f"sum(j in 0..s: {a} * sample[j])" if depth > 1 else a,
             f"sum(j in 0..s, pairwise: {a} * sample[j])" if depth > 1 else a]
    if inexact:
        forms += [f"({a} / {b})", f"exp({a} * 0.1)", f"sqrt(abs({a}))", f"log(abs({a}) + 0.5)"]
    return rng.choice(forms)


def program(rng: random.Random, inexact: bool) -> str:
    lines = [f"let t{n} = {expr(rng, 2, None, inexact)}" for n in range(rng.randrange(3))]
    lets = [f"t{n}" for n in range(len(lines))]
    body = expr(rng, 3, "i", inexact)
    if lets:
        body = f"({body}) * {rng.choice(lets)}"
    lines.append(f"for i in 0..k: contrib[i] := {body}")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(24))
def test_random_programs_agree(device, seed):
    rng = random.Random(seed)
    inexact = seed % 3 == 2
    text = program(rng, inexact)
    prog = parse_program(text, origin=f"fuzz{seed}.assign")
    assert parse_program(prog.canonical).hash == prog.hash, text
    b = check_program(prog, role="contribution", k=K, s=S, m=0)
    f = np.random.default_rng(seed).standard_normal((64, slot_width("contribution", K, S, 0))).astype(np.float32)
    rep = agree(b, f, device=device)
    assert rep.ok, f"{text}\n{rep.describe()}"
    if not inexact:
        assert rep.exact_slots == 64 * K, text
    unrolled = agree(b, f, device=device, kernel=compile_wgsl(b, unroll=4))      # 7 and 9: remainders
    assert unrolled.ok, f"{text}\n{unrolled.describe()}"
