"""Mutation-scored receipts: a fixed, seeded, named set of mutants of the
author's kernel runs through the same corpus; the killed count goes on the receipt, survivors are
shown, and an equivalent mutant can be acknowledged (studio/engine/proof/mutants.py)."""
import shutil
from pathlib import Path

import pytest

from conftest import MEDIAN, copy_package
from studio.engine.contract.package import load_package
from studio.engine.proof import mutants
from studio.engine.proof.conformance import conform, report_lines

OPS = Path(__file__).parents[1] / "data" / "ops23"


def test_the_mutants_are_fixed_named_and_spare_what_could_never_end():
    src = (MEDIAN / "forward.wgsl").read_text()
    a, b = mutants.select(src, 8, 0), mutants.select(src, 8, 0)
    assert [m.id for m in a] == [m.id for m in b] and len(a) == 8
    assert {m.kind for m in a} == set(mutants.CLASSES) - {"constant"}      # the median has no float literal
    every = mutants.candidates(src)
    assert not any(m.line in (12, 13) for m in every)             # @workgroup_size, @builtin: attributes
    assert not any(m.line == 25 for m in every)                    # the while condition
    assert not any(m.line in (18, 22) and m.col > 30 for m in every)   # loop-counter updates
    assert any(m.kind == "drop_write" and m.old.startswith("y[i]") for m in every)


@pytest.mark.slow
def test_every_mutant_of_the_story_kernel_is_killed(ctx, tmp_path):
    rep = conform(ctx, load_package(copy_package(MEDIAN, tmp_path / "m")), mutants=8)
    assert rep.ok and rep.mutation["killed"] == 8 and not rep.mutation["survivors"], "\n".join(report_lines(rep))
    assert "mutants   : 8 of 8 killed" in "\n".join(report_lines(rep))


@pytest.mark.slow
def test_survivors_are_shown_and_an_equivalent_one_can_be_acknowledged(ctx, tmp_path):
    rep = conform(ctx, load_package(copy_package(OPS / "half", tmp_path / "h")), mutants=8)
    text = "\n".join(report_lines(rep))
    survivors = {s["id"] for s in rep.mutation["survivors"]}
    # `v > 0.0` -> `v >= 0.0` and 0.0 -> 1.0 pick between two equal expressions: equivalent
    assert survivors == {"comparison@16:11:>->>=", "constant@16:13:0.0->1.0"}, text
    assert "your corpus cannot tell these apart from your kernel" in text and rep.mutation["killed"] == 6
    src = tmp_path / "src"
    shutil.copytree(OPS / "half", src)
    (src / mutants.ACK_FILE).write_text("# both pick between 0.5 * v and v * 0.5\n"
                                        "comparison@16:11:>->>=\nconstant@16:13:0.0->1.0\n")
    rep = conform(ctx, load_package(copy_package(src, tmp_path / "acked")), mutants=8)
    assert not rep.mutation["survivors"] and len(rep.mutation["acknowledged"]) == 2
    assert rep.mutation["score"] == "6/6" and "(2 acknowledged equivalent)" in "\n".join(report_lines(rep))


def test_the_conformance_cell_shows_the_score_and_names_the_survivors():
    from studio.app.panels.conformance import mutation_line
    mut = {"total": 8, "killed": 6, "acknowledged": [{"id": "a"}],
           "survivors": [{"id": "b", "description": "line 16:11: `>` -> `>=` (comparison)"}]}
    line = mutation_line(mutants.lines(mut))            # the engine's lines, as `scellis conform` prints them
    assert "6 of 7" in line and "1 acknowledged" in line and "cannot tell these apart" in line and "16:11" in line
    assert mutation_line([]) == "" and mutation_line(mutants.lines({})) == ""
