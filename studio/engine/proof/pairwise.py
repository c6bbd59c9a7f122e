"""A pairwise (all-pairs) covering: rows that assign every factor one of its levels so that every
pair of levels of two different factors meets in at least one row.

Greedy, in the manner of AETG/IPOG: each new row starts from the first pair not yet covered and
fills the other factors, one by one, with the level that covers the most uncovered pairs (ties:
the first level). A row is built into a case by the caller, who may find it infeasible (the
signature's relations exclude it: ``w = max`` with ``n = min - 1`` cannot be); an infeasible
row's pairs are then tried on their own (the pair alone, the other factors free), and a pair that
no row can hold is returned as unreachable, never silently dropped. Deterministic: no randomness,
so the same factors give the same rows on every machine."""
from __future__ import annotations

from itertools import combinations

Pair = tuple[tuple[str, object], tuple[str, object]]


def all_pairs(factors: dict[str, list]) -> set[Pair]:
    """Every pair of levels of two different factors (factor order as given)."""
    names = list(factors)
    return {((a, x), (b, y)) for a, b in combinations(names, 2) for x in factors[a] for y in factors[b]}


def _pairs_of(row: dict, names: list[str]) -> set[Pair]:
    return {((a, row[a]), (b, row[b])) for a, b in combinations([n for n in names if n in row], 2)}


def cover(factors: dict[str, list], build, max_rows: int = 4096) -> tuple[int, list[Pair]]:
    """``build(row) -> dict | None``: makes a case of ``row`` and returns the levels it really
    holds (every factor, filled where ``row`` left one out), or None where the row is infeasible.
    ``row`` may hold only a pair (a pair tried on its own). Returns the number of cases built and
    the pairs no feasible row holds."""
    names = [n for n in factors if factors[n]]
    todo = all_pairs({n: factors[n] for n in names})
    built, unreachable = 0, []
    if len(names) < 2:                  # no pairs: every level of the one factor once
        for n in names:
            for level in factors[n]:
                built += build({n: level}) is not None
        return built, []
    rank = {p: i for i, p in enumerate(sorted(todo, key=lambda p: (
        names.index(p[0][0]), names.index(p[1][0]), factors[p[0][0]].index(p[0][1]), factors[p[1][0]].index(p[1][1]))))}
    order = sorted(todo, key=rank.get)
    while todo and built < max_rows:
        seed = next(p for p in order if p in todo)
        pair = {seed[0][0]: seed[0][1], seed[1][0]: seed[1][1]}
        row = dict(pair)
        for n in names:
            if n not in row:
                row[n] = max(factors[n], key=lambda level: (len(todo & _pairs_of({**row, n: level}, names)),
                                                            -factors[n].index(level)))
        held = build(row)
        if held is None:
            held = build(pair)          # the pair alone, the other factors as the builder likes
        if held is None:
            todo.discard(seed)
            unreachable.append(seed)
            continue
        built += 1
        todo -= _pairs_of(held, names)
        todo.discard(seed)
    unreachable += sorted(todo, key=rank.get)        # only past max_rows
    return built, unreachable
