import os
import shutil

import pytest
from conftest import MEDIAN, copy_package

from studio.engine.contract.package import content_hash, load_package
from studio.engine.errors import StudioError


def test_loads_the_story_op():
    pkg = load_package(MEDIAN)
    c = pkg.contract
    assert pkg.id == "user/demo/windowed_median@1"
    assert c.signature.shape_class == "static"
    assert str(c.tolerance) == "exact" and c.tolerance.category == "selection"
    assert c.backward.kind == "vjp" and "selected" in c.subgradient
    assert [b.name for b in c.bindings.bindings] == ["x", "y", "p"]
    assert set(pkg.part_hashes()) == {"contract", "reference", "kernel", "package"}


def test_hash_is_stable_across_location_and_file_order(tmp_path):
    a = copy_package(MEDIAN, tmp_path / "a")
    # build b by writing files in reverse order into a differently named folder
    b = tmp_path / "elsewhere" / "b"
    b.mkdir(parents=True)
    for f in sorted(a.iterdir(), reverse=True):
        shutil.copyfile(f, b / f.name)
    assert load_package(a).hash == load_package(b).hash == load_package(MEDIAN).hash


def test_hash_ignores_receipts_but_sees_every_other_file(tmp_path):
    a = copy_package(MEDIAN, tmp_path / "a")
    h = load_package(a).hash
    (a / "receipts").mkdir()
    (a / "receipts" / "x.json").write_text("{}")
    assert load_package(a).hash == h
    (a / "NOTES.md").write_text("hello")
    assert load_package(a).hash != h


def test_content_hash_is_order_free_and_path_sensitive():
    assert content_hash({"a": b"1", "b": b"2"}) == content_hash({"b": b"2", "a": b"1"})
    assert content_hash({"a": b"1", "b": b"2"}) != content_hash({"a": b"2", "b": b"1"})
    assert content_hash({"ab": b""}) != content_hash({"a": b"b"})


@pytest.mark.parametrize("old,new,field", [
    ('id = "user/demo/windowed_median@1"', 'id = "windowed median"', "id"),
    ('[tolerance]\nclass = "exact"', '[tolerance]\nclass = 3', "tolerance.class"),
    ('invocations = "n - w + 1"', '', "kernel.invocations"),
    ('visibility = "private"', 'visibility = "everyone"', "visibility"),
])
def test_malformed_fields_name_the_field(pkg_copy, old, new, field):
    root = pkg_copy(op__toml=[(old, new)])
    with pytest.raises(StudioError) as e:
        load_package(root)
    assert e.value.field == field and e.value.file.endswith("op.toml")


def test_signature_error_points_into_op_toml(pkg_copy):
    root = pkg_copy(op__toml=[("x: f32[n] finite", "x: f64[n] finite")])
    with pytest.raises(StudioError) as e:
        load_package(root)
    text = (root / "op.toml").read_text().splitlines()
    line = text[e.value.line - 1]
    assert line[e.value.col - 1:].startswith("f64")


def test_bindings_error_points_into_op_toml(pkg_copy):
    root = pkg_copy(op__toml=[("y : storage read_write", "y : storage write")])
    with pytest.raises(StudioError) as e:
        load_package(root)
    line = (root / "op.toml").read_text().splitlines()[e.value.line - 1]
    assert line[e.value.col - 1:].startswith("write")


def test_field_lines_count_only_toml_newlines(pkg_copy):
    """A U+2028 or U+0085 inside a string is no line break for TOML, nor for the positions."""
    root = pkg_copy(op__toml=[('summary = "', 'summary = "\u2028\x85'), ("x: f32[n] finite", "x: f64[n] finite")])
    with pytest.raises(StudioError) as e:
        load_package(root)
    line = (root / "op.toml").read_text().split("\n")[e.value.line - 1]
    assert line[e.value.col - 1:].startswith("f64"), e.value.format()


def test_invalid_toml_reports_line_and_column(pkg_copy):
    root = pkg_copy(op__toml=[('summary = "', 'summary = ')])
    with pytest.raises(StudioError) as e:
        load_package(root)
    assert e.value.line == 2 and e.value.col is not None


def test_missing_kernel_file_and_symlink_out(pkg_copy, tmp_path):
    root = pkg_copy(op__toml=[('file = "forward.wgsl"', 'file = "nope.wgsl"')])
    with pytest.raises(StudioError, match="does not exist") as e:
        load_package(root)
    assert e.value.field == "kernel.file"
    root2 = pkg_copy(name="p2")
    outside = tmp_path / "secret.wgsl"
    outside.write_text("// not in the package")
    os.remove(root2 / "forward.wgsl")
    os.symlink(outside, root2 / "forward.wgsl")
    with pytest.raises(StudioError, match="outside the package"):
        load_package(root2)


def test_non_utf8_reference(pkg_copy):
    root = pkg_copy()
    (root / "reference.py").write_bytes(b"# \xff\xfe\n")
    with pytest.raises(StudioError, match="UTF-8") as e:
        load_package(root)
    assert e.value.file.endswith("reference.py")


def test_atomic_writes_keep_ordinary_permissions(tmp_path):
    from studio.engine.atomic import write_bytes
    new = tmp_path / "new.txt"
    write_bytes(new, b"1")
    assert new.stat().st_mode & 0o777 == 0o666 & ~_umask()
    kept = tmp_path / "kept.txt"
    kept.write_bytes(b"0")
    os.chmod(kept, 0o640)
    write_bytes(kept, b"1")
    assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_bytes() == b"1"


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m
