"""The one op.toml editor (studio/engine/contract/toml_edit.py) and the one finder of TOML source
positions (studio/engine/contract/toml_position.py)."""
from __future__ import annotations

import difflib
import tomllib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from studio.engine.contract.toml_edit import set_value, set_values
from studio.engine.contract.toml_position import position
from studio.engine.errors import StudioError
from studio.engine.resources import ROOT

OPS = ROOT / "ops"


def shipped_with_comments() -> str:
    """A real op.toml from the shipped ops that has comments of its own."""
    for toml in sorted(OPS.rglob("op.toml")):
        text = toml.read_text("utf-8")
        if any(line.lstrip().startswith("#") for line in text.splitlines()) and "[sharding]" in text:
            return text
    raise AssertionError("no shipped op.toml with comments and [sharding]")


def keys_in_order(text: str) -> list[str]:
    return [line.split("=")[0].strip() for line in text.splitlines() if "=" in line and not line.startswith((" ", "@"))]


# ------------------------------------------------------------------ the editor
def test_form_edits_of_a_shipped_op_keep_its_comments_order_and_other_lines():
    text = shipped_with_comments()
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    edits = {"tolerance.class": "ulp(8)", "kernel.workgroup_size": 128, "sharding.batch": ["x", "w"],
             "authors": ["ana", "bo"], "bindings.text": "\n@group(0) @binding(0) x : storage read f32[n]\n",
             "summary": 'a "quoted" summary \\ with a backslash'}
    out = text
    for dotted, value in edits.items():
        out = set_value(out, dotted, value)
    data = tomllib.loads(out)
    for dotted, value in edits.items():
        node = data
        for part in dotted.split("."):
            node = node[part]
        assert node == value, dotted
    assert [line for line in out.splitlines() if line.lstrip().startswith("#")] == comments
    assert keys_in_order(out)[:6] == keys_in_order(text)[:6]
    changed = [d for d in difflib.ndiff(text.splitlines(), out.splitlines()) if d[:1] in "+-"]
    removed = [d for d in changed if d.startswith("-")]
    assert len(removed) <= len(edits) + 3          # one value each (a text: its few lines), nothing else


def test_a_value_keeps_its_comment_and_a_new_key_joins_its_table():
    text = ('# my op\nid = "user/me/x@1"  # the id\nsummary = "s"\n\n[tolerance]\nclass = "exact" # why\n'
            'category = "selection"\n\n[bindings]\ntext = """\nA\n"""\n\n[[examples]]\nnote = "n"\n')
    assert set_value(text, "tolerance.class", "ulp(4)") == text.replace('"exact" # why', '"ulp(4)" # why')
    out = set_value(text, "license", "MIT")               # a new top-level key: after the others
    assert out.index("license") < out.index("[tolerance]") and out.startswith("# my op\nid = ")
    out = set_value(text, "tolerance.justification", "because")      # joins [tolerance]
    assert out.index("justification") < out.index("[bindings]")
    out = set_value(text, "backward.text", "nondifferentiable")        # a new table: at the end
    assert tomllib.loads(out)["backward"] == {"text": "nondifferentiable"} and "# why" in out
    out = set_value(text, "summary", None)                            # None deletes
    assert "summary" not in tomllib.loads(out) and "# the id" in out
    out = set_value(text, "bindings.text", "B\nC\n")                 # a text keeps the """ on its own line
    assert 'text = """\nB\nC\n"""' in out


def test_a_literal_string_stays_literal_and_an_inline_table_is_written_inline():
    text = "id = 'user/a/b@1'\n[backward]\ntext = 'vjp x: reference(vjp) on device(\"b.wgsl\")'\n"
    out = set_value(text, "backward.text", 'vjp x: reference(vjp) on device("c.wgsl")')
    assert out.endswith("text = 'vjp x: reference(vjp) on device(\"c.wgsl\")'\n")
    out = set_values(text, {"forked_from": {"id": "user/a/b@1", "hash": "ab"}})
    assert 'forked_from = {id = "user/a/b@1", hash = "ab"}' in out.split("[backward]")[0]


@pytest.mark.parametrize("dotted, value, field, what", [
    ("summary", object(), "summary", "cannot be written in TOML"),
    ("authors", ["ana", None], "authors", "empty value"),
    ("forked_from", {"id": None}, "forked_from.id", "cannot be written in TOML"),
    ("summary", "bad \ud800 text", "summary", "lone surrogate"),
    ("tolerance.class.x", 1, "tolerance.class.x", "'tolerance.class' is not a table"),
    ("examples.note", "n", "examples.note", "'examples' is not a table"),
])
def test_a_value_that_cannot_be_written_is_refused_with_its_field(dotted, value, field, what):
    text = 'id = "user/a/b@1"\n[tolerance]\nclass = "exact"\n[[examples]]\nnote = "a"\n'
    with pytest.raises(StudioError, match=what) as e:
        set_value(text, dotted, value)
    assert e.value.field == field and e.value.file == "op.toml"


def test_a_path_through_a_value_is_refused_at_that_values_position():
    with pytest.raises(StudioError) as e:
        set_value('id = "x"\n[tolerance]\nclass = "exact"\n', "tolerance.class.x", 1)
    assert (e.value.line, e.value.col) == (3, 9)


def test_text_that_is_not_toml_is_refused_at_its_position():
    with pytest.raises(StudioError, match="invalid TOML") as e:
        set_value('id = "x"\nsummary = \n', "id", "y")
    assert e.value.line == 2


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
@example("\r\n")                      # (a raw carriage return in a multi-line string did not read back)
def test_any_text_reads_back_exactly(value):
    text = 'id = "user/a/b@1"  # keep me\n[bindings]\ntext = """\nA\n"""\n'
    out = set_values(text, {"bindings.text": value, "summary": value})
    data = tomllib.loads(out)
    assert data["bindings"]["text"] == value and data["summary"] == value and "# keep me" in out


# ------------------------------------------------------------------ positions
def test_every_string_field_of_every_shipped_op_is_found_where_its_text_starts():
    n = 0
    for toml in sorted(OPS.rglob("op.toml")):
        text = toml.read_text("utf-8")
        lines = text.split("\n")

        def walk(node, path, text=text, lines=lines, toml=toml):
            nonlocal n
            for k, v in node.items():
                if isinstance(v, dict):
                    walk(v, (*path, k))
                elif isinstance(v, str) and "\\" not in v and v.strip():
                    line, col = position(text, (*path, k), content=True)
                    assert lines[line - 1][col - 1:].startswith(v.split("\n")[0]), (toml, path, k)
                    n += 1
        walk(tomllib.loads(text), ())
    assert n > 100


def test_keys_of_every_shipped_workflow_and_learner_file_are_found_at_their_key():
    n = 0
    for toml in sorted(ROOT.rglob("*.toml")):
        if toml.name == "op.toml":
            continue
        text = toml.read_text("utf-8")
        lines = text.split("\n")

        def walk(node, path, text=text, lines=lines, toml=toml):
            nonlocal n
            for k, v in node.items():
                line, col = position(text, (*path, k), key=True)
                if line is not None and isinstance(v, (str, int, float, bool)) and "\n" not in str(v):
                    assert lines[line - 1][col - 1:].lstrip("\"'").startswith(k), (toml, path, k)
                    n += 1
                if isinstance(v, dict):
                    walk(v, (*path, k))
        walk(tomllib.loads(text), ())
    assert n > 20


def test_only_statements_are_read():
    text = ('id = "x"\n'
            '[bindings]\n'
            'text = """\n'
            'class = "not a key"\n'              # inside a multi-line string: not a key
            '[tolerance]\n'                      # ... and not a header
            '"""\n'
            '[tolerance]\n'
            'class = "exact"\n'
            '[[examples]]\n'
            'category = "under examples"\n'      # under [[examples]], not [tolerance]
            '[kernel]\n'
            'params = { n = 4, inner = { w = 3 } }\n'
            'a.b = 1\n'
            '"quoted key" = 2\n'
            'list = [\n  "x = 1",\n  # [fake]\n]\n'
            'after = 5\n')
    assert position(text, "tolerance.class") == (8, 9)
    assert position(text, ("tolerance", "category")) == (7, 1)     # not written: its table's header
    assert position(text, "bindings.text", content=True) == (4, 1)
    assert position(text, "kernel.params.inner.w") == (12, 33)
    assert position(text, "kernel.params.inner.w", key=True) == (12, 29)
    assert position(text, ("kernel", "a", "b"), key=True) == (13, 1)
    assert position(text, ("kernel", "quoted key")) == (14, 16)
    assert position(text, "kernel.after") == (19, 9)
    assert position(text, "fake") == (None, None)
    assert position(text, "nothing.here") == (None, None)


def test_an_array_element_is_found_by_its_index():
    text = '[kernel]\nworkgroup_size = [8, 8]\ninvocations = ["n",  # x\n   "n"]   # the same text twice\n'
    assert position(text, ("kernel", "invocations", 0), content=True) == (3, 17)
    assert position(text, ("kernel", "invocations", 1), content=True) == (4, 5)   # the second "n", not the first
    assert position(text, ("kernel", "workgroup_size", 1)) == (2, 22)
    assert position(text, ("kernel", "invocations", 2)) == (3, 15)                 # no such element: the array


def test_a_per_axis_expression_error_is_at_its_own_element():
    from studio.engine.contract.manifest import read_manifest
    from studio.engine.contract.workgroups import kernel_geometry
    text = '[kernel]\nworkgroup_size = [8, 8]\ninvocations = ["n + 1", "n + 1 +"]\n'
    with pytest.raises(StudioError) as e:
        kernel_geometry(read_manifest(text.encode(), "op.toml"))
    assert (e.value.line, e.value.col) == (3, 26 + len("n + 1 +"))     # just past the second element's text
