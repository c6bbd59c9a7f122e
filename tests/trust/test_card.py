"""The card: source by folder (never by namespace), trust unverified until earned here, the
tolerance badge, receipts local vs foreign, hash, license, visibility (docs/publishing.md)."""
import shutil
import subprocess
import sys

import pytest
from conftest import BUILTINS, MEDIAN

from studio.engine.contract.package import load_package
from studio.engine.records.seal import Seal as ReceiptSeal
from studio.engine.services import actions, publishing


def test_the_story_op_card_says_user_unverified_exact(ctx, pkg_copy):
    pkg = load_package(pkg_copy())
    c = publishing.card(ctx, pkg, profile_id=ctx.device.profile.id)
    assert (c["source"], c["trust"]["level"], c["badge"]) == ("user", "unverified", "exact")
    assert c["hash"] == pkg.hash and c["license"] == "Apache-2.0" and c["visibility"] == "private"
    for field in ("source     : user", "trust      : unverified", "[exact]", pkg.hash):
        assert field in c["text"]
    assert "<span class='badge'>exact</span>" in c["html"] and "unverified" in c["html"]


@pytest.mark.slow
def test_trust_is_earned_by_local_receipts_and_foreign_ones_never_count(ctx, pkg_copy, tmp_path):
    pkg = load_package(pkg_copy())
    profile = ctx.device.profile.id
    actions.conform(ctx, pkg)
    c = publishing.card(ctx, pkg, profile_id=profile)
    assert c["trust"]["level"] == "unverified" and "gradcheck here: none" in c["trust"]["why"]
    actions.gradcheck(ctx, pkg)
    c = publishing.card(ctx, pkg, profile_id=profile)
    assert c["trust"]["level"] == "verified"
    assert {(r["kind"], r["origin"], r["counts"]) for r in c["receipts"]} == {
        ("conformance", "local", True), ("gradcheck", "local", True)}
    other = ReceiptSeal(tmp_path / "elsewhere")                      # another machine's key
    from studio.engine.context import Context
    there = Context(ctx.catalog, ctx.trust, ctx.hosts, _device=ctx.device)
    there.seal = other
    c = publishing.card(there, pkg, profile_id=profile)
    assert c["receipts"] == [] and c["trust"]["level"] == "unverified"     # another user folder: none of ours
    import shutil

    from studio.engine.proof import receipts as receipt_store
    shutil.copytree(receipt_store.receipt_dir(pkg, ctx.seal), receipt_store.receipt_dir(pkg, other))   # copied over
    c = publishing.card(there, pkg, profile_id=profile)
    assert c["trust"]["level"] == "unverified"
    assert {(r["origin"], r["counts"]) for r in c["receipts"]} == {("foreign", False)}


def test_source_comes_from_the_folder_never_the_namespace(ctx, tmp_path):
    b = publishing.card(ctx, load_package(BUILTINS / "clip"), profile_id="p")
    copy = tmp_path / "clip"
    shutil.copytree(BUILTINS / "clip", copy, ignore=shutil.ignore_patterns("receipts"))
    u = publishing.card(ctx, load_package(copy), profile_id="p")
    assert (b["source"], u["source"]) == ("builtin", "user") and b["id"] == u["id"] == "core/signal/clip@1"


@pytest.mark.slow
def test_cli_card_text_and_html():
    r = subprocess.run([sys.executable, "-m", "studio.cli", "card", str(MEDIAN)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "source     : user" in r.stdout and "[exact]" in r.stdout
    r = subprocess.run([sys.executable, "-m", "studio.cli", "card", "core/signal/clip@1", "--html"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("<html>") and "builtin" in r.stdout
