"""The use cases the front ends share (studio/engine/services: learning, outline, standing): the CLI
and the Studio get the same answer because they ask the same function. No device, no Dask."""
import pytest

from studio.cli import main
from studio.engine.context import Context
from studio.engine.errors import StudioError
from studio.engine.resources import ROOT
from studio.engine.services import learning, outline, standing


def test_a_learner_is_found_by_file_folder_or_shipped_name(tmp_path):
    assert "online_mean" in learning.shipped()
    folder = ROOT / "learners" / "online_mean"
    assert learning.find("online_mean") == folder == learning.find(folder)
    assert learning.find(folder / "learner.toml") == folder / "learner.toml"
    with pytest.raises(StudioError) as e:
        learning.find(str(tmp_path / "nope"))
    assert "no learner file or shipped learner" in e.value.message and "online_mean" in e.value.hint


def test_owners_over_the_cap_are_refused_before_any_process_starts():
    with pytest.raises(StudioError) as e:
        learning.open_learner("online_mean", owners=9, max_owners=4)
    assert e.value.field == "--owners" and "over the 4 owners" in e.value.message
    assert learning.open_learner("online_mean", owners=4, max_owners=4).name == "online_mean"
    assert learning.open_learner("online_mean", owners=10_000, scheduler="tcp://h:1").name == "online_mean"


def test_a_placement_names_its_split_and_warns_a_bf16_learner():
    s = learning.open_learner("online_mean")
    two, three = learning.place(s, 2), learning.place(s, 3)
    assert two.system.shares == [25, 25] and three.system.shares == [17, 17, 16]
    assert two.lines()[1].startswith("combine ") and two.warning is None
    bf16 = learning.open_learner("least_squares_bf16")
    assert learning.place(bf16, 3).warning and not learning.place(bf16, 4).warning


def test_the_cli_prints_the_outline_the_studio_builds_its_cells_from(capsys):
    story = outline.story_workflow()
    with Context.open([]) as ctx:
        o = outline.outline(story, ctx)
    assert main(["workflow", "show", str(story)]) == 0
    assert capsys.readouterr().out.splitlines() == o.lines()
    assert [n.name for n in o.steps] and all(n.badge["hash"] and n.badge["category"] for n in o.steps)


def test_an_op_that_does_not_resolve_has_no_badge_in_the_studio_and_is_an_error_on_the_cli(tmp_path, capsys):
    wf = tmp_path / "w.toml"
    wf.write_text('[workflow]\nname = "w"\n[steps.a]\nop = "user/nobody/nothing@1"\n')
    with Context.open([]) as ctx:
        assert outline.outline(wf, ctx, strict=False).steps[0].badge == {}
        with pytest.raises(StudioError):
            outline.outline(wf, ctx)
    assert main(["workflow", "show", str(wf)]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_a_tampered_receipt_file_says_why(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text('{"schema": "scellis-receipt/1", "op": 3}')
    why = standing.why_unreadable(bad)
    assert len(why) == 1 and why[0]


def test_the_one_argument_module_judges_pairs_and_candidates():
    from studio.cli import args
    assert args.params(["w=7", "h=0.5"]) == {"w": 7, "h": 0.5}
    assert args.step_op("median=user/demo/m@1", "--swap") == ("median", "user/demo/m@1")
    assert args.candidates(["RUN=256,512"]) == {"RUN": [256, 512]}
    for bad, flag in ((lambda: args.step_op("median", "--swap"), "--swap"),
                      (lambda: args.candidates(["RUN=a,b"]), "--only"),
                      (lambda: args.param_value("w=seven"), "--param")):
        with pytest.raises(StudioError) as e:
            bad()
        assert e.value.field == flag


def test_allow_opengl_is_the_users_choice_for_this_process_and_its_workers(monkeypatch, capsys):
    from studio.engine.device.device import ALLOW_OPENGL_ENV, opengl_allowed
    monkeypatch.delenv(ALLOW_OPENGL_ENV, raising=False)
    assert main(["ops", "list", "--json"]) == 0 and not opengl_allowed()
    assert main(["--allow-opengl", "ops", "list", "--json"]) == 0 and opengl_allowed()
    capsys.readouterr()
