"""The learner's fast paths against the plain ones, bit for bit (docs/learner.md "A pairwise sum"):

- a long pairwise sum computed in aligned blocks (evaluate.pairwise_blocks, and the evaluator's
  reduce that uses it) against the level-by-level tree (evaluate.pairwise_sum, itself checked here
  against a plain-Python tree), on awkward lengths and NaN, inf and -0.0;
- a contribution evaluated without its frames (evaluate.contributions: the parameters broadcast,
  the contribution written straight into its own array, row chunks on threads) against evaluate on
  the built frames [params | sample | 0] with no blocks;
- the combine tree computed in place (combine.tree_sum) against its recursive definition, an
  owner's consecutive samples as a view, the update's frame, the replica hash without copies and
  an owner's step (resident.Resident) against the plain functions.

Each comparison has a control that must fail: blocks that are not aligned, a reassociated sum, a
read shifted by one slot, a sequential tree. A control that passed would mean the comparison could
not see the error it exists to catch."""
import numpy as np
import pytest

from studio.engine.learner import combine
from studio.engine.learner import evaluate as ev
from studio.engine.learner.fingerprint import digest
from studio.engine.learner.program import check_program, parse_program, slot_width
from studio.engine.learner.resident import Resident, apply_update, replica_hash
from studio.engine.learner.system import System

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # NaN, inf and overflow are fed on purpose

SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e38, -1e38, 1e-45], np.float32)


def bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


def same(a, b) -> bool:
    """The same bits everywhere, but that a NaN matches any NaN: numpy's own array loops do not fix
    which operand's NaN an addition of two NaNs keeps (the same call keeps the first in one row and
    the second in another: test_numpy_does_not_fix_which_nan_an_addition_keeps), so no path, the
    plain one included, has one sign for a NaN. Every other bit, -0.0 and the infinities included,
    is compared."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.shape != b.shape:
        return False
    return bool(((bits(a) == bits(b)) | (np.isnan(a) & np.isnan(b))).all())


def spread(rng, shape, special=0.0):
    """Values over many binades (the order of the additions shows in the bits); a fraction
    ``special`` of them NaN, ±inf, ±0.0, huge or subnormal."""
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-14, 14, shape))).astype(np.float32)
    if special:
        hit = rng.random(shape) < special
        x[hit] = rng.choice(SPECIAL, int(hit.sum()))
    return x


def plain_tree(terms):
    """The pairwise tree in plain Python over float32 scalars, level by level."""
    xs = [np.float32(t) for t in terms]
    while len(xs) > 1:
        up = [np.float32(xs[i] + xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        if len(xs) % 2:
            up.append(xs[-1])
        xs = up
    return xs[0]


def misaligned_blocks(terms, size):
    """A control: blocks of ``size`` terms that start one term late (the first block is size - 1
    terms), each summed pairwise, the sums added pairwise: not the tree."""
    n = terms.shape[-1]
    edges = [0] + list(range(size - 1, n, size)) + [n]
    sums = [ev.pairwise_sum(terms[..., a:b]) for a, b in zip(edges, edges[1:]) if b > a]
    return ev.pairwise_sum(np.stack(sums, axis=-1))


AWKWARD = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 1023, 1024, 1025, 4097]


# ------------------------------------------------------------------ the blocked pairwise sum
def test_numpy_does_not_fix_which_nan_an_addition_keeps():
    """Why ``same`` lets a NaN match any NaN: one np.add over rows that are all (+NaN) + (-NaN)
    gives +NaN in some rows and -NaN in others, and the level-by-level tree (pairwise_sum, the
    plain path) of a row alone and of the same row among others differ in a NaN's sign only."""
    x = np.zeros((6, 9), np.float32)
    x[:, 0], x[:, 1] = np.float32(np.nan), -np.float32(np.nan)
    with np.errstate(all="ignore"):
        signs = {int(v) >> 31 for v in bits(np.add(x[:, 0:8:2], x[:, 1:8:2])[:, 0])}
    whole_vs_alone = []
    for seed in range(12):
        y = spread(np.random.default_rng(seed), (6, 1025), 0.5)
        with np.errstate(all="ignore"):
            whole, alone = ev.pairwise_sum(y), np.array([ev.pairwise_sum(y[r:r + 1])[0] for r in range(6)])
        assert same(whole, alone)
        whole_vs_alone.append(bool((bits(whole) != bits(alone)).any()))
    assert signs == {0, 1} or any(whole_vs_alone)      # on this numpy, at least one of the two shows


def test_the_level_by_level_tree_is_the_plain_tree():
    rng = np.random.default_rng(1)
    for n in AWKWARD[:18] + [1000]:
        for special in (0.0, 0.2):
            x = spread(rng, (3, n), special)
            with np.errstate(all="ignore"):
                got = ev.pairwise_sum(x)
                assert all(same(got[r], plain_tree(x[r])) for r in range(3)), n


@pytest.mark.parametrize("n", AWKWARD + [int(np.random.default_rng(7).integers(2, 5000)) for _ in range(4)])
def test_aligned_blocks_give_the_trees_bits_on_awkward_lengths(n):
    rng = np.random.default_rng(n)
    for special in (0.0, 0.05, 0.5):
        x = spread(rng, (2, 3, n), special)
        want = ev.pairwise_sum(x)
        for size in (1, 2, 4, 16, 64, 1024, 1 << 13):
            top = size.bit_length() - 1
            for levels in sorted({0, top // 2, top}):
                got = ev.pairwise_blocks(lambda a, b, x=x: x[..., a:b], n, size, levels)
                assert same(got, want), (n, size, levels, special)


def test_aligned_blocks_at_a_million_terms_with_nan_inf_and_signed_zeros():
    rng = np.random.default_rng(10 ** 6)
    x = spread(rng, (2, 10 ** 6), 1e-5)
    x[0, :7] = [0.0, -0.0, -0.0, 0.0, -0.0, -0.0, -0.0]
    x[1] = np.where(x[1] == 0.0, -0.0, x[1])
    want = ev.pairwise_sum(x)
    for size, levels in ((1 << 15, 15), (1 << 15, 5), (1 << 17, 7), (1 << 19, 9)):
        assert same(ev.pairwise_blocks(lambda a, b: x[..., a:b], x.shape[-1], size, levels), want)
    z = np.full((1, 10 ** 6 + 3), -0.0, np.float32)               # all -0.0: the sum is -0.0, not +0.0
    got = ev.pairwise_blocks(lambda a, b: z[..., a:b], z.shape[-1], 1 << 12, 12)
    assert same(got, ev.pairwise_sum(z)) and bits(got)[0] == bits(np.float32(-0.0))


def test_blocks_whose_rows_broadcast_differently_are_put_side_by_side():
    rng = np.random.default_rng(3)
    x = spread(rng, (4, 100))
    one = spread(rng, (1, 100))
    full = np.concatenate([x[:, :64], np.broadcast_to(one[:, 64:], (4, 36))], axis=-1)
    got = ev.pairwise_blocks(lambda a, b: x[:, a:b] if b <= 64 else one[:, a:b], 100, 16, 2)
    assert same(got, ev.pairwise_sum(full))


def test_a_block_is_a_power_of_two_and_its_levels_within_it():
    for size, levels in ((3, None), (0, None), (12, None), (16, 5), (16, -1)):
        with pytest.raises(ValueError):
            ev.pairwise_blocks(lambda a, b: np.zeros((1, b - a), np.float32), 40, size, levels)


def test_control_misaligned_blocks_and_reassociated_sums_are_caught():
    """What the comparisons above would see if the blocks were not aligned or the sum reassociated."""
    rng = np.random.default_rng(5)
    for n in (1000, 4097, 10 ** 5):
        x = rng.random((32, n), np.float32)            # 32 sums: one alone may round to the same value by chance
        want = ev.pairwise_sum(x)
        assert not same(misaligned_blocks(x, 64), want), n
        assert not same(np.add.reduce(x, axis=-1), want), n                   # numpy's own pairwise
        assert not same(np.add.accumulate(x, axis=-1)[..., -1], want), n      # sequential
        assert not same(ev.pairwise_sum(x[..., ::-1]), want), n               # the same tree, reversed


# ------------------------------------------------------------------ contributions without frames
K, S = 40, 41
PROGRAMS = [
    "let r = sum(j in 0..k, pairwise: param[j] * sample[j]) - sample[k]\nfor i in 0..k: contrib[i] := r * sample[i]",
    "let r = sum(j in 0..k: param[j] * sample[j]) - sample[k]\nfor i in 0..k: contrib[i] := r * sample[i]",
    "let z = sum(j in 0..k, pairwise: param[j] * sample[j])\nlet p = 1.0 / (1.0 + exp(-z))\n"
    "for i in 0..k: contrib[i] := (p - sample[k]) * sample[i]",
    "for i in 0..k: contrib[k - 1 - i] := sample[i] * param[i] + sample[k]",                  # a scatter
    "for i in 0..k // 2: contrib[2 * i] := sample[2 * i + 1]\n"                               # stride 2
    "for i in 0..k // 2: contrib[2 * i + 1] := sum(j in 0..k, pairwise: sample[j]) * param[i]",
    "let t = sum(j in 0..k + s, pairwise: slot[j] * slot[j])\n"                               # across the views
    "for i in 0..k: contrib[i] := slot[i + 1] * t",
    "let g = sum(j in 0..k, pairwise: param[k - 1 - j] * sample[j])\n"                        # a reversed read
    "for i in 0..k: contrib[i] := g - slot[2 * i]",
    "for i in 0..k: contrib[i] := sum(j in 0..s, pairwise: sample[j] * param[i])",             # nested, 2-D
    "let c = sum(j in 0..k, pairwise: sample[k])\nfor i in 0..k: contrib[i] := c",             # not on j
    "let e = sum(j in 3..k - 1, pairwise: exp(param[j]) - log(sample[j]))\n"                  # offset bounds
    "let q = sum(j in 0..k, pairwise: select(sample[j] > 0.0, param[j], -0.0))\n"
    "for i in 0..k: contrib[i] := min(e, q) / sample[i]",
    "for i in 0..2, j in 0..k // 2: contrib[i * (k // 2) + j] := param[j] + sample[i]",       # a 2-D write
    "for i in 0..k: contrib[i] := -sample[i]",
    "for i in 0..k: contrib[i] := sample[i]",
    "for i in 0..k: contrib[i] := sum(j in 0..k, pairwise: param[j] * sample[i + j - i])",
]


def built_frames(params, samples):
    f = np.zeros((samples.shape[0], slot_width("contribution", K, S, 0)), np.float32)
    f[:, :K], f[:, K:K + S] = params, samples
    return f


def plain(m):
    """The plain evaluator: every pairwise sum level by level over all its terms, every statement's
    values computed first and then written."""
    m.setattr(ev, "PAIRWISE_BLOCK", 1 << 40)
    m.setattr(ev._Run, "into", lambda self, st, scope, shape: False)


def plain_contributions(bound, params, samples, monkeypatch):
    """evaluate on the built frames, the plain way."""
    with monkeypatch.context() as m:
        plain(m)
        return ev.evaluate(bound, built_frames(params, samples))[:, K + S:]


def data(seed, rows=23, special=0.05):
    rng = np.random.default_rng(seed)
    return spread(rng, K, special), spread(rng, (rows, S), special)


FAST = [dict(), dict(PAIRWISE_BLOCK=1), dict(PAIRWISE_BLOCK=64, PAIRWISE_TOP=1),
        dict(PAIRWISE_BLOCK=256, PAIRWISE_TOP=0, SPLIT_PIECE=7, THREAD_WORDS=0),
        dict(PAIRWISE_BLOCK=16, SPLIT_PIECE=1, THREAD_WORDS=0, BUDGET=3 * 2 * K * S)]


@pytest.mark.parametrize("text", PROGRAMS)
def test_a_contribution_without_frames_gives_the_frames_bits(text, monkeypatch):
    b = check_program(parse_program(text), role="contribution", k=K, s=S, m=0)
    for seed, special in ((0, 0.0), (1, 0.05), (2, 0.3)):
        params, samples = data(seed, special=special)
        want = plain_contributions(b, params, samples, monkeypatch)
        for knobs in FAST:
            with monkeypatch.context() as m:
                for name, v in knobs.items():
                    m.setattr(ev, name, v)
                for threads in (1, 2):
                    got = ev.contributions(b, params, samples, threads=threads)
                    assert same(got, want), (text, knobs, threads)
                    buf = np.full((samples.shape[0], K), np.nan, np.float32)
                    assert ev.contributions(b, params, samples, out=buf, threads=threads) is buf and same(buf, want)
                assert same(ev.evaluate(b, built_frames(params, samples))[:, K + S:], want), (text, knobs)
                assert same(ev.evaluate_rows(b, params, samples, slice(K + S, 2 * K + S)), want)


def test_the_rule_and_every_row_alone_agree(monkeypatch):
    """ProgramContribution (what the combine calls) on all rows, and on each row alone."""
    for text in PROGRAMS[:3]:
        sysm = System.build(k=K, s=S, m=0, contribution=parse_program(text), params=np.zeros(K), state=[],
                            update=parse_program("for i in 0..k: param[i] := param[i] - rate * mean[i]"),
                            rate=0.1, samples=data(4)[1])
        params = data(5)[0]
        whole = sysm.contribution.contributions(params, sysm.samples)
        alone = np.concatenate([sysm.contribution.contributions(params, sysm.samples[r:r + 1]) for r in range(23)])
        assert same(whole, alone) and same(whole, plain_contributions(sysm.contribution.bound, params, sysm.samples,
                                                                      monkeypatch))


def test_control_a_misaligned_block_or_a_shifted_read_is_caught(monkeypatch):
    b = check_program(parse_program(PROGRAMS[0]), role="contribution", k=K, s=S, m=0)
    params, samples = data(8, special=0.0)
    want = plain_contributions(b, params, samples, monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(ev, "PAIRWISE_BLOCK", 8 * samples.shape[0])            # blocks of 8 terms
        m.setattr(ev, "pairwise_blocks", lambda f, n, size, levels=None: misaligned_blocks(f(0, n), size))
        assert not same(ev.contributions(b, params, samples, threads=1), want)
    with monkeypatch.context() as m:
        real = ev._Split.strided                         # a parameter read one slot late
        m.setattr(ev, "PAIRWISE_BLOCK", 8 * samples.shape[0])
        m.setattr(ev._Split, "strided", lambda self, first, step, count: real(self, first + 1, step, count)
                  if first + 1 + step * (count - 1) < self.h else real(self, first, step, count))
        assert not same(ev.contributions(b, params, samples, threads=1), want)


# ------------------------------------------------------------------ the combine, the update, the owner
def recursive_tree(rows):
    n = rows.shape[0]
    if n == 1:
        return rows[0]
    p = 1 << ((n - 1).bit_length() - 1)
    return np.add(recursive_tree(rows[:p]), recursive_tree(rows[p:]), dtype=np.float32)


def test_the_tree_in_place_is_the_recursive_tree():
    rng = np.random.default_rng(11)
    for n in range(1, 35):
        for special in (0.0, 0.3):
            c = spread(rng, (n, 17), special)
            keep = c.copy()
            assert same(combine.tree_sum(c), recursive_tree(c)), n
            assert same(c, keep)                                           # the rows are not written
            got = combine.tree_sum(c, overwrite=True)                      # the owner's scratch: in place
            assert same(got, recursive_tree(keep)) and not np.shares_memory(got, c), n
            assert n == 1 or not same(c, keep)                             # ... and it was written
    c = spread(rng, (5, 1000))
    assert not same(np.add.accumulate(c, axis=0)[-1], recursive_tree(c))   # control: the sequential order


def test_an_owners_consecutive_samples_are_a_view_and_others_a_gather():
    sysm = System.build(k=K, s=S, m=0, contribution=parse_program(PROGRAMS[0]), params=np.zeros(K), state=[],
                        update=parse_program("for i in 0..k: param[i] := param[i] - rate * mean[i]"), rate=0.1,
                        samples=data(6)[1], owners=[[0, 1, 2, 3, 4, 5, 6], [7, 9, 8], list(range(10, 23))])
    for tree in ("canonical", "per-owner"):
        s = System.build(k=K, s=S, m=0, contribution=sysm.contribution.program, params=np.zeros(K), state=[],
                         update=sysm.update.program, rate=0.1, samples=sysm.samples, owners=sysm.owners, tree=tree)
        for o in range(3):
            got = combine.owner_samples(s, o)
            assert same(got, s.samples[combine.owner_order(s, o)])
            order = combine.owner_order(s, o)
            assert np.shares_memory(got, s.samples) == bool((np.diff(order) == 1).all())


@pytest.mark.parametrize("text", [
    "for i in 0..k: state[i] := 0.9 * state[i] + mean[i]\nfor i in 0..k: param[i] := param[i] - rate * state[i]",
    "for i in 1..k: param[i] := param[i - 1] + param[i]",                       # reads what it overwrites
    "for i in 0..k - 1: param[i] := param[i + 1] * state[i]\nfor i in 0..k: state[i] := param[k - 1 - i] - state[i]",
    "for i in 0..k // 2: param[2 * i] := slot[2 * i + 1] / param[2 * i]",
    "for i in 0..k: state[i] := state[i] * state[i]"])
def test_a_statement_written_straight_into_its_frame_is_the_parallel_assignment(text, monkeypatch):
    """evaluate's ``into`` on a whole frame (a statement in one piece, its operands overlapping
    its slots) against the values computed first; in several pieces it is not used."""
    k, m = 50, 50
    b = check_program(parse_program(text), role="update", k=k, s=1, m=m)
    rng = np.random.default_rng(15)
    f = spread(rng, (3, slot_width("update", k, 1, m)), 0.1)
    with monkeypatch.context() as mp:
        plain(mp)
        want = ev.evaluate(b, f)
    assert same(ev.evaluate(b, f), want)
    g = f.copy()
    assert same(ev.evaluate(b, g, in_place=True), want)
    with monkeypatch.context() as mp:
        mp.setattr(ev, "BUDGET", 3 * 7)                                 # pieces of 7 slots
        assert same(ev.evaluate(b, f), want)
    shifted = f.copy()                                                  # control: a smear, not a shift
    if "param[i - 1]" in text:
        for i in range(1, k):
            shifted[:, i] = shifted[:, i - 1] + shifted[:, i]
        assert not same(shifted, want)


def test_the_update_and_the_replica_hash_are_the_plain_ones(monkeypatch):
    k, m = 50, 50
    upd = check_program(parse_program("for i in 0..k: state[i] := 0.9 * state[i] + mean[i]\n"
                                      "for i in 0..k: param[i] := param[i] - rate * state[i]"),
                        role="update", k=k, s=1, m=m)
    sysm = System.build(k=k, s=1, m=m, contribution=parse_program("for i in 0..k: contrib[i] := sample[0]"),
                        update=upd.program, params=np.zeros(k), state=np.zeros(m), rate=0.1, samples=np.ones((2, 1)))
    rng = np.random.default_rng(12)
    p, st, mu = spread(rng, k, 0.1), spread(rng, m, 0.1), spread(rng, k, 0.1)
    f = np.zeros((1, slot_width("update", k, 1, m)), np.float32)
    f[0, :k], f[0, k:k + m], f[0, k + m:2 * k + m], f[0, -1] = p, st, mu, np.float32(0.1)
    with monkeypatch.context() as mp:
        plain(mp)
        want = ev.evaluate(upd, f)[0]
    got_p, got_s = apply_update(sysm.update, p, st, mu, 0.1)
    assert same(got_p, want[:k]) and same(got_s, want[k:k + m])
    assert replica_hash(got_p, got_s) == digest(want[:k].tobytes(), want[k:k + m].tobytes())
    assert replica_hash(got_p[::2], got_s[:0]) == digest(np.ascontiguousarray(want[:k:2]).tobytes(), b"")
    assert replica_hash(got_p, got_s) != digest(want[:k].tobytes(), want[k:k + m].tobytes()[::-1])   # control


def test_an_owners_step_is_the_plain_update_hash_and_block_sums():
    upd = parse_program("for i in 0..k: state[i] := 0.9 * state[i] + mean[i]\n"
                        "for i in 0..k: param[i] := param[i] - rate * state[i]")
    params, samples = data(13, rows=11)
    sysm = System.build(k=K, s=S, m=K, contribution=parse_program(PROGRAMS[0]), update=upd, params=params,
                        state=np.zeros(K), rate=0.01, samples=samples, owners=[list(range(11))])
    root, blocks = combine.plan(sysm)
    r = Resident(sysm.contribution, sysm.update, sysm.samples, blocks[0], "f32", sysm.rate, sysm.params, sysm.state)
    h, sums, _ = r.advance(None, None, True)
    assert h is None and all(same(a, b) for a, b in zip(sums, combine.block_sums(
        sysm.contribution.contributions(sysm.params, sysm.samples), blocks[0])))
    p, st = sysm.params, sysm.state
    for _ in range(3):                                   # the owner's buffer is reused from step to step
        mu = combine.mean(combine.evaluate_plan(root, dict(zip(blocks[0], sums))), 11)
        p, st = apply_update(sysm.update, p, st, mu, sysm.rate)
        h, sums, _ = r.advance(mu, None, True)
        assert h == replica_hash(p, st)
        want = combine.block_sums(sysm.contribution.contributions(p, sysm.samples), blocks[0])
        assert all(same(a, b) for a, b in zip(sums, want))
    h, last, _ = r.advance(mu, None, False)
    assert last is None and h == replica_hash(*apply_update(sysm.update, p, st, mu, sysm.rate))
    p0, st0 = r.replica()
    bad, _, _ = r.advance(mu, 3, True)                   # control: a flipped bit changes the hash
    assert bad != replica_hash(*apply_update(sysm.update, p0, st0, mu, sysm.rate))


@pytest.mark.parametrize("text", [
    "let t = sum(j in 0..k, pairwise: sum(i in 0..k, pairwise: param[i] * sample[j]))\nfor i in 0..k: contrib[i] := t",
    "for i in 0..k: contrib[i] := sum(j in 0..s: sample[j] * param[i])"])
def test_the_fast_paths_refuse_what_the_plain_path_refuses(text, monkeypatch):
    """The blocks and the smaller pieces never hide a reduction's size from evaluate's LIMIT check."""
    from studio.engine.errors import StudioError
    b = check_program(parse_program(text), role="contribution", k=K, s=S, m=0)
    params, samples = data(9)
    monkeypatch.setattr(ev, "LIMIT", 23 * K * K - 1)
    with pytest.raises(StudioError, match="limit"):
        ev.evaluate(b, built_frames(params, samples))
    for knobs in FAST[1:]:
        with monkeypatch.context() as m:
            for name, v in knobs.items():
                m.setattr(ev, name, v)
            if knobs.get("BUDGET"):
                continue                                 # fewer rows at once: a smaller reduction, as before
            with pytest.raises(StudioError, match="limit"):
                ev.contributions(b, params, samples, threads=1)


def test_the_in_process_combine_is_the_plain_combine():
    """combine.local_numerator (each owner's samples a view where they are consecutive, the
    contributions without frames) against each owner's fresh contributions, blocks and the plan's additions."""
    params, samples = data(14, rows=13)
    upd = parse_program("for i in 0..k: param[i] := param[i] - rate * mean[i]")
    for owners, tree in (([[0, 1, 2, 3, 4], [5, 6, 7], [8, 9, 10, 11, 12]], "canonical"),
                         ([[12, 0, 5], [1, 2, 3, 4], list(range(6, 12))], "per-owner")):
        sysm = System.build(k=K, s=S, m=0, contribution=parse_program(PROGRAMS[2]), update=upd, params=params,
                            state=[], rate=0.1, samples=samples, owners=owners, tree=tree)
        root, blocks = combine.plan(sysm)
        values = {}
        for o, bl in blocks.items():
            c = ev.evaluate(sysm.contribution.bound, built_frames(params, samples[combine.owner_order(sysm, o)]))
            values.update(zip(bl, [recursive_tree(c[b.start:b.start + b.n, K + S:]) for b in bl]))
        want = combine.evaluate_plan(root, values)
        assert same(combine.local_numerator(sysm, params), want) and same(combine.local_numerator(sysm, params), want)
