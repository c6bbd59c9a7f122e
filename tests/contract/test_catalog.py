import re

import numpy as np
import pytest
from conftest import BUILTINS, REPO, copy_package

from studio.engine.contract.catalog import Catalog
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op

REQUIRED = {"affine", "add", "multiply", "clip", "fir", "diff", "sum", "mean", "mse", "spiky_signal"}


def test_catalog_lists_builtins_and_user_ops_alike():
    cat = Catalog.default()
    ids = {p.id for p in cat.list()}
    names = {i.split("/")[-1].split("@")[0] for i in ids if i.startswith("core/")}
    assert REQUIRED <= names
    assert "user/demo/windowed_median@1" in ids
    assert cat.problems == []


def test_resolve_by_id_version_and_path():
    cat = Catalog.default()
    assert cat.resolve("core/signal/affine").id == "core/signal/affine@1"
    assert cat.resolve(str(BUILTINS / "clip")).id == "core/signal/clip@1"
    with pytest.raises(StudioError, match="no op 'core/signal/afine@1'") as e:
        cat.resolve("core/signal/afine@1")
    assert "affine" in e.value.hint
    with pytest.raises(StudioError, match="bad op id"):
        cat.resolve("not an id@x")


def test_duplicate_ids_are_reported_not_silently_shadowed(tmp_path):
    copy_package(BUILTINS / "affine", tmp_path / "ops" / "affine")
    cat = Catalog([BUILTINS, tmp_path / "ops"])
    cat.list()
    assert any("defined twice" in e.message for e in cat.problems)


def test_user_ops_folder_is_searched(tmp_path, monkeypatch):
    monkeypatch.setenv("SCELLIS_HOME", str(tmp_path))
    copy_package(BUILTINS / "affine", tmp_path / "ops" / "mine",
                 {"op.toml": [('id = "core/signal/affine@1"', 'id = "user/me/affine@1"')]})
    assert Catalog.default().resolve("user/me/affine@1").root == tmp_path / "ops" / "mine"


def test_one_path_a_builtin_copied_under_a_user_id_behaves_identically(ctx, tmp_path, device):
    """Only the id and the hash differ: same loader, checker, executor, same bits out."""
    builtin = load_package(BUILTINS / "fir")
    user = load_package(copy_package(BUILTINS / "fir", tmp_path / "fir",
                                     {"op.toml": [('id = "core/signal/fir@1"', 'id = "user/someone/fir@1"')]}))
    assert user.id != builtin.id and user.hash != builtin.hash
    rng = np.random.default_rng(3)
    inputs = {"x": rng.normal(size=1000).astype(np.float32), "taps": rng.normal(size=9).astype(np.float32)}
    a, b = run_op(ctx, builtin, inputs, {}), run_op(ctx, user, inputs, {})
    assert a["y"].tobytes() == b["y"].tobytes()
    from studio.engine.proof.checker import check_package
    ra, rb = check_package(ctx, builtin), check_package(ctx, user)
    assert ra.passed == rb.passed and ra.errors == rb.errors == []


def test_run_path_has_no_builtin_special_case():
    """No engine module asks whether an op is builtin: no test of a namespace or a 'core/' prefix,
    no `builtin` flag. Naming an op id (the demo's source, a workflow's default loss) is not a
    special case. The catalog's `origin` is the one place that says builtin-or-user (by folder,
    for cards), and is exempt by name."""
    engine = REPO / "studio" / "engine"
    special = re.compile(r"startswith\(\s*['\"]core|namespace\s*[!=]=|==\s*['\"]core['\"]|is_builtin|if\s+builtin")
    checked = 0
    for path in sorted(engine.rglob("*.py")):
        rel = path.relative_to(engine).as_posix()
        if rel == "contract/catalog.py":
            continue
        assert not special.search(path.read_text()), rel
        checked += 1
    assert checked > 30
    assert special.search('if pkg.contract.id.namespace == "core":') and special.search('op.startswith("core/")')
