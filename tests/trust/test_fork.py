"""Fork: a new id, the lineage (forked_from: id and content hash), the license kept; an unlicensed
op cannot be forked outside private; the card shows the chain (docs/publishing.md)."""
import subprocess
import sys

import pytest
from conftest import BUILTINS

from studio.engine.contract.catalog import Catalog
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.publish.card import card_text, lineage
from studio.engine.publish.metadata import read_fields
from studio.engine.services import publishing


def test_a_fork_records_its_lineage_and_keeps_the_license(ctx, pkg_copy, tmp_path):
    src = load_package(pkg_copy())
    f = publishing.fork(ctx, src, "user/me/my_median@1", to=tmp_path / "mine")
    lin = read_fields(f).forked_from
    assert (f.id, lin.id, lin.hash) == ("user/me/my_median@1", src.id, src.hash)
    assert f.contract.license == src.contract.license and f.contract.visibility == "private"
    assert f.reference_source == src.reference_source and f.kernel_source == src.kernel_source
    assert ctx.trust.status(f).ok                           # the source's code was trusted here


@pytest.mark.slow
def test_the_card_shows_the_lineage_chain(ctx, pkg_copy, tmp_path):
    src = load_package(pkg_copy())
    one = publishing.fork(ctx, src, "user/me/one@1", to=tmp_path / "ops" / "one")
    two = publishing.fork(ctx, one, "user/me/two@1", to=tmp_path / "ops" / "two")
    cat = Catalog([tmp_path / "ops", src.root.parent])
    chain = lineage(two, cat)
    assert [(x["id"], x["hash"], x["here"]) for x in chain] == [
        ("user/me/one@1", one.hash, True), (src.id, src.hash, True)]
    card = publishing.card(ctx, two, profile_id="p")
    assert "forked from user/me/one@1" in card["text"] and "forked from" in card["html"]
    assert card_text(card).count("forked from") >= 1


def test_an_unlicensed_op_cannot_be_forked_outside_private(ctx, pkg_copy, tmp_path):
    src = load_package(pkg_copy(op__toml=[('license = "Apache-2.0"\n', "")]))
    with pytest.raises(StudioError) as e:
        publishing.fork(ctx, src, "user/me/x@1", to=tmp_path / "x", visibility="workspace")
    assert e.value.field == "license" and not (tmp_path / "x").exists()
    assert publishing.fork(ctx, src, "user/me/x@1", to=tmp_path / "x").contract.license is None   # private: fine


def test_a_fork_of_untrusted_code_stays_untrusted(ctx, tmp_path):
    import shutil

    from conftest import MEDIAN
    stranger = tmp_path / "sent"
    shutil.copytree(MEDIAN, stranger, ignore=shutil.ignore_patterns("receipts"))
    (stranger / "reference.py").write_text((stranger / "reference.py").read_text() + "\n# edited by someone\n")
    f = publishing.fork(ctx, load_package(stranger), "user/me/theirs@1", to=tmp_path / "theirs")
    assert not ctx.trust.status(f).ok


def test_fork_needs_a_new_id_and_a_new_folder(ctx, tmp_path):
    src = load_package(BUILTINS / "clip")
    with pytest.raises(StudioError, match="new id"):
        publishing.fork(ctx, src, src.id, to=tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("")
    with pytest.raises(StudioError, match="already exists"):
        publishing.fork(ctx, src, "user/me/clip@1", to=tmp_path / "b")


@pytest.mark.slow
def test_cli_fork(tmp_path):
    r = subprocess.run([sys.executable, "-m", "studio.cli", "fork", "core/signal/clip@1", "user/me/clip@1",
                        "--to", str(tmp_path / "c")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "forked core/signal/clip@1" in r.stdout
    assert read_fields(load_package(tmp_path / "c")).forked_from.id == "core/signal/clip@1"
