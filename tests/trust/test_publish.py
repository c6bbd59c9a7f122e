"""Publishing: SPDX licenses, visibility, and the public bar (the builtins' bar), with real wgpu
for the proofs the bar asks (docs/publishing.md)."""
import shutil
import subprocess
import sys

import pytest
from proof_store import proven
from conftest import BUILTINS, _authored

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.publish import bar
from studio.engine.publish.license import Licenses
from studio.engine.services import actions, publishing

NAMES = sorted(p.name for p in BUILTINS.iterdir() if (p / "op.toml").is_file())
EXAMPLE = '\n[[examples]]\nnote = "one spike removed"\ninputs = { x = [0.0, 0.0, 9.0, 0.0, 0.0] }\nparams = { w = 3 }\n'
DOC = ('id = "user/demo/windowed_median@1"',
       'id = "user/demo/windowed_median@1"\ndescription = "For each output index of y, gather the w values of x, '
       'sort them and take the middle."')


@pytest.fixture(scope="module")
def licenses():
    return Licenses()


# ------------------------------------------------------------------ licenses
@pytest.mark.parametrize("expr", ["Apache-2.0", "MIT OR Apache-2.0", "GPL-2.0-or-later WITH Classpath-exception-2.0",
                                  "MIT AND (BSD-3-Clause OR ISC)", "Apache-2.0 WITH LLVM-exception"])
def test_valid_spdx_expressions(licenses, expr):
    assert licenses.check(expr).ok


@pytest.mark.parametrize("expr, token, suggestion", [
    ("Apachee-2.0", "Apachee-2.0", "Apache-2.0"),                     # unknown: the closest listed id
    ("GPL-2.0", "GPL-2.0", "GPL-2.0-only"),                           # deprecated: its replacement
    ("GPL-2.0+", "GPL-2.0+", "GPL-2.0-or-later"),
    ("wxWindows", "wxWindows", "LGPL-2.0-or-later WITH WxWindows-exception-3.1"),
    ("GPL-2.0-only WITH Clashpath-exception-2.0", "Clashpath-exception-2.0", "Classpath-exception-2.0"),
])
def test_unknown_and_deprecated_ids_name_themselves_and_the_closest_valid_one(licenses, expr, token, suggestion):
    rep = licenses.check(expr)
    assert not rep.ok
    assert rep.problems[0].token == token and rep.problems[0].suggestion == suggestion
    assert token in str(rep.problems[0]) and suggestion in str(rep.problems[0])


def test_every_problem_of_an_expression_is_listed_at_once(licenses):
    rep = licenses.check("Apachee-2.0 OR GPL-2.0 AND MIT WITH Apache-2.0")
    assert [p.token for p in rep.problems] == ["Apachee-2.0", "GPL-2.0", "Apache-2.0"]
    assert "not an exception" in str(rep.problems[2])


@pytest.mark.parametrize("expr", ["", "MIT OR", "(MIT", "NONE", "LicenseRef-mine", "Classpath-exception-2.0"])
def test_not_a_license(licenses, expr):
    assert not licenses.check(expr).ok


# ------------------------------------------------------------------ visibility
def test_publishing_without_a_license_is_refused_and_names_the_license(ctx, pkg_copy):
    root = pkg_copy(op__toml=[('license = "Apache-2.0"\n', "")])
    with pytest.raises(StudioError) as e:
        publishing.publish(ctx, load_package(root), visibility="workspace", profile_id="p")
    assert e.value.field == "license" and "no license" in e.value.message
    assert 'visibility = "private"' in (root / "op.toml").read_text()       # nothing written


def test_a_bad_license_given_on_publish_is_refused(ctx, pkg_copy):
    with pytest.raises(StudioError) as e:
        publishing.publish(ctx, load_package(pkg_copy()), visibility="workspace", license="GPL-2.0", profile_id="p")
    assert e.value.field == "license" and "GPL-2.0-only" in e.value.message


def test_workspace_publish_rewrites_only_visibility_and_license(ctx, pkg_copy):
    root = pkg_copy()
    before = (root / "op.toml").read_text()
    out = publishing.publish(ctx, load_package(root), visibility="workspace", license="MIT", profile_id="p")
    after = (root / "op.toml").read_text()
    assert 'visibility = "workspace"' in after and 'license = "MIT"' in after
    assert after.replace('"workspace"', '"private"').replace('"MIT"', '"Apache-2.0"') == before
    pkg = load_package(root)
    assert out.hash == pkg.hash and ctx.trust.status(pkg).ok      # same code: still authored here


def test_a_public_publish_with_missing_fields_names_each_field(ctx, pkg_copy):
    root = pkg_copy(op__toml=[('authors = ["Scellis Studio"]\n', "")],
                    reference__py=[('"""Reference for', '"""Ref for')])
    with pytest.raises(StudioError) as e:
        publishing.publish(ctx, load_package(root), visibility="public", profile_id="p")
    msg = e.value.message
    for field in ("authors", "signature", "examples", "conformance receipt", "gradcheck receipt"):
        assert f"- {field}:" in msg, field
    assert "never names y" in msg
    assert 'visibility = "private"' in (root / "op.toml").read_text()


@pytest.mark.slow
def test_public_publish_reproves_the_new_content_and_rolls_back_on_failure(ctx, pkg_copy):
    root = pkg_copy(op__toml=[DOC])
    (root / "op.toml").write_text((root / "op.toml").read_text() + EXAMPLE)
    _authored(root)
    pkg = load_package(root)
    profile = ctx.device.profile.id
    actions.conform(ctx, pkg)
    actions.gradcheck(ctx, pkg)
    assert bar.shortfalls(pkg, bar.proof_state(pkg, profile, ctx.seal), Licenses()) == []
    out = publishing.publish(ctx, pkg, visibility="public", profile_id=profile)
    new = load_package(root)
    assert out.reproved and new.hash != pkg.hash and new.contract.visibility == "public"
    assert bar.proof_state(new, profile, ctx.seal).earned          # the receipts were earned again, for this content
    assert publishing.public_bar(ctx, new, profile_id=profile) == []


@pytest.mark.slow
def test_a_failing_reproof_puts_the_old_op_toml_back(ctx, pkg_copy, monkeypatch):
    root = pkg_copy()
    pkg = load_package(root)
    actions.conform(ctx, pkg)
    old = (root / "op.toml").read_bytes()

    def broken(ctx_, pkg_, **kw):
        raise StudioError("conformance failed (injected)")
    monkeypatch.setattr(publishing, "reprove", broken)
    with pytest.raises(StudioError, match="injected"):
        publishing.publish(ctx, pkg, visibility="workspace", profile_id=ctx.device.profile.id)
    assert (root / "op.toml").read_bytes() == old


# ------------------------------------------------------------------ the bar is the builtins' bar
@pytest.mark.parametrize("name", NAMES)
def test_every_builtin_carries_the_public_bar_fields(name, licenses):
    pkg = load_package(BUILTINS / name)
    assert [str(s) for s in bar.metadata_shortfalls(pkg, licenses)] == []


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_builtin_clears_the_whole_public_bar_once_proven_here(ctx, tmp_path, name, licenses, proof_store):
    """On a copy (receipts are earned here, never written into the product's folder). This is also
    where every builtin passes its own conformance in the suite: each is proven once per run, here or
    by another test that needed its receipt first (proof_store.py), and its receipt is judged in this
    test's own user folder."""
    root = tmp_path / name
    shutil.copytree(BUILTINS / name, root, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    pkg = load_package(root)
    profile = ctx.device.profile.id
    before = bar.shortfalls(pkg, bar.proof_state(pkg, profile, ctx.seal), licenses)
    assert [s.field for s in before] == ["conformance receipt"] + (
        ["gradcheck receipt"] if pkg.contract.backward.kind == "vjp" else [])    # a check that can fail
    rep = proven(proof_store, ctx, pkg)       # the bar asks for a passing receipt, not a mutation score
    assert rep["verdict"] == "pass", "\n".join(rep["lines"])
    assert rep["lines"][0].startswith(f"conformance  {pkg.id}") and rep["lines"][-1].endswith("PASS")
    if pkg.contract.backward.kind == "vjp":
        assert actions.gradcheck(ctx, pkg).verdict == "pass"
    assert [str(s) for s in bar.shortfalls(pkg, bar.proof_state(pkg, profile, ctx.seal), licenses)] == []


def test_the_bar_is_the_same_for_a_user_copy_of_a_builtin(tmp_path, licenses):
    """Nothing in the bar asks where an op came from: a byte-identical user copy gets the same verdict."""
    from studio.engine.contract.catalog import origin
    for name in NAMES:
        root = tmp_path / name
        shutil.copytree(BUILTINS / name, root, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
        b, u = load_package(BUILTINS / name), load_package(root)
        assert (origin(b), origin(u)) == ("builtin", "user")
        assert bar.metadata_shortfalls(b, licenses) == bar.metadata_shortfalls(u, licenses)


def test_a_bad_example_is_a_shortfall_with_its_field(pkg_copy, licenses):
    root = pkg_copy(op__toml=[DOC])
    (root / "op.toml").write_text((root / "op.toml").read_text() + EXAMPLE.replace("w = 3", "w = 4"))
    found = bar.metadata_shortfalls(load_package(root), licenses)
    assert [s.field for s in found] == ["examples[0].params"] and "odd" in found[0].why


@pytest.mark.slow
def test_cli_publish_refusal_lists_the_fields(pkg_copy):
    root = pkg_copy()
    r = subprocess.run([sys.executable, "-m", "studio.cli", "publish", str(root), "--visibility", "public"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "does not clear the public bar" in r.stderr and "- examples:" in r.stderr
    r = subprocess.run([sys.executable, "-m", "studio.cli", "publish", str(root), "--visibility", "workspace",
                        "--license", "Apachee-2.0"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "did you mean Apache-2.0" in r.stderr



def test_publishing_untrusted_code_does_not_make_it_trusted(ctx, tmp_path):
    root = tmp_path / "sent"
    shutil.copytree(BUILTINS / "clip", root, ignore=shutil.ignore_patterns("receipts"))
    (root / "reference.py").write_text((root / "reference.py").read_text() + "\n# someone else's edit\n")
    pkg = load_package(root)
    assert not ctx.trust.status(pkg).ok
    publishing.publish(ctx, pkg, visibility="workspace", profile_id="p")
    assert not ctx.trust.status(load_package(root)).ok


def test_op_toml_edits_keep_every_other_byte_and_refuse_a_bad_value(tmp_path):
    from studio.engine.contract.toml_edit import set_values
    text = 'id = "user/a/b@1"\n# a comment\nsummary = "s"\n\n[tolerance]\nclass = "exact"\n'
    out = set_values(text, {"visibility": "public", "summary": "t"}, file="op.toml")
    assert out == 'id = "user/a/b@1"\n# a comment\nsummary = "t"\nvisibility = "public"\n\n[tolerance]\nclass = "exact"\n'
    # a key written over several lines is one value to the editor: replaced whole, the rest kept
    out = set_values('id = "user/a/b@1"\nlicense = """\nMIT"""  # ours\n[t]\n', {"license": "Apache-2.0"}, file="op.toml")
    assert out == 'id = "user/a/b@1"\nlicense = "Apache-2.0"  # ours\n[t]\n'
    with pytest.raises(StudioError, match="cannot be written in TOML") as e:
        set_values(text, {"forked_from": {"id": None}}, file="op.toml")
    assert e.value.field == "forked_from.id"
