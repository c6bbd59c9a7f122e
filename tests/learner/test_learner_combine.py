"""The ordered combine (docs/learner.md "The combine trees"): the canonical tree over the global
sample order gives the same bits for any owners and any split, and an independent implementation
written here from the contract's words alone (combine.CANONICAL, combine.MEAN) gives those bits
too; the per-owner tree depends on the partition and its contract hash names it; a reassociated
sum is a different result, so these comparisons can fail."""
import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.learner import combine
from studio.engine.learner.system import System


class Identity:
    """contribution(sample) = the sample itself (k = s): the combine sees the data directly."""
    hash = "identity"

    def contributions(self, params, samples):
        return np.array(samples, np.float32, copy=True)


class Descent:
    hash = "descent"

    def apply(self, params, state, mean, rate):
        return np.float32(params - rate * mean).astype(np.float32), state


def independent_tree(rows, lo, n):
    """From the contract's words: 'node[lo, lo+n) = node[lo, lo+p) + node[lo+p, lo+n), p the largest
    power of two below n; a leaf is one sample's contribution'; each node one binary32 addition."""
    if n == 1:
        return rows[lo].astype(np.float32)
    p = 1
    while p * 2 < n:
        p *= 2
    left = independent_tree(rows, lo, p)
    right = independent_tree(rows, lo + p, n - p)
    return np.array([np.float32(a) + np.float32(b) for a, b in zip(left, right)], np.float32)


def hard_data(n=301, k=3, seed=0):
    """Values of very different magnitudes: any other order of the additions rounds differently."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, k)) * 10.0 ** rng.integers(-6, 7, size=(n, k))).astype(np.float32)


def system(samples, owners, tree="canonical"):
    k = samples.shape[1]
    return System.build(k=k, s=k, m=0, contribution=Identity(), update=Descent(), params=np.zeros(k),
                        state=np.zeros(0), rate=0.5, samples=samples, owners=owners, tree=tree)


def splits(n, rng):
    yield [np.arange(n)]                                           # one owner
    yield [np.arange(0, 100), np.arange(100, n)]                   # two, uneven
    yield [np.arange(0, 7), np.arange(7, 7), np.arange(7, n)]      # three, one with nothing
    cuts = np.sort(rng.choice(np.arange(1, n), 6, replace=False))
    yield np.split(np.arange(n), cuts)                             # seven, random contiguous
    a = rng.integers(0, 7, n)
    yield [np.flatnonzero(a == o) for o in range(7)]               # seven, interleaved at random
    yield [np.arange(n)[::-1][i::3] for i in range(3)]             # lists in descending order


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def test_the_canonical_tree_is_the_same_bits_for_any_owners_and_split():
    rng = np.random.default_rng(1)
    data = hard_data()
    want = independent_tree(data, 0, data.shape[0])
    for owners in splits(data.shape[0], rng):
        got = combine.local_numerator(system(data, owners), np.zeros(3, np.float32))
        assert (bits(got) == bits(want)).all(), [o.size for o in owners]


def test_the_mean_is_one_f32_division_by_the_mass():
    data = hard_data(n=77)
    s = system(data, [np.arange(40), np.arange(40, 77)])
    _, _, mu = combine.local_step(s, np.zeros(3, np.float32), np.zeros(0, np.float32))
    want = np.array([np.float32(x) / np.float32(77) for x in independent_tree(data, 0, 77)], np.float32)
    assert (bits(mu) == bits(want)).all()


def test_a_reassociated_sum_differs_so_the_comparison_can_fail():
    data = hard_data()
    tree = combine.local_numerator(system(data, [np.arange(301)]), np.zeros(3, np.float32))
    seq = np.zeros(3, np.float32)
    for r in data:                                                 # the sequential order
        seq = np.float32(seq + r)
    assert (bits(seq) != bits(tree)).any()
    assert (bits(data.sum(axis=0, dtype=np.float32)) != bits(tree)).any() or (bits(seq) != bits(tree)).any()


def test_the_per_owner_tree_depends_on_the_partition_and_its_contract_names_it():
    data = hard_data()
    a = system(data, [np.arange(0, 100), np.arange(100, 301)], tree="per-owner")
    b = system(data, [np.arange(0, 7), np.arange(7, 301)], tree="per-owner")
    na = combine.local_numerator(a, np.zeros(3, np.float32))
    nb = combine.local_numerator(b, np.zeros(3, np.float32))
    assert (bits(na) != bits(nb)).any()                                       # a different program ...
    assert combine.contract_hash(a) != combine.contract_hash(b)               # ... and a different contract
    assert combine.contract(a)["combine"]["partition"] == a.partition_hash()
    # by its words: each owner's list by the tree shape, then the owners in owner order
    want = independent_tree(np.stack([independent_tree(data[:100], 0, 100), independent_tree(data[100:], 0, 201)]), 0, 2)
    assert (bits(na) == bits(want)).all()
    ca = system(data, a.owners)
    cb = system(data, b.owners)
    assert combine.contract_hash(ca) == combine.contract_hash(cb)             # canonical: placement-free
    assert combine.contract_hash(ca) != combine.contract_hash(a)              # the tree is in the hash


def test_every_sample_is_in_exactly_one_maximal_block():
    rng = np.random.default_rng(3)
    data = hard_data(n=123)
    for owners in splits(123, rng):
        s = system(data, owners)
        _, blocks = combine.plan(s)
        covered = np.zeros(123, int)
        for o, bl in blocks.items():
            for b in bl:
                covered[b.lo:b.lo + b.n] += 1
                assert (s.assignment()[b.lo:b.lo + b.n] == o).all()
        assert (covered == 1).all()


def test_a_partition_that_loses_or_doubles_a_sample_is_refused():
    data = hard_data(n=10)
    with pytest.raises(StudioError, match="sample 4 has no owner"):
        system(data, [np.arange(4), np.arange(5, 10)])
    with pytest.raises(StudioError, match="sample 3 is held by owner 0 and owner 1"):
        system(data, [np.arange(4), np.arange(3, 10)])
    with pytest.raises(StudioError, match="outside"):
        system(data, [np.arange(11)])
