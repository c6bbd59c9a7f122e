"""Malformed packages: every manifest field missing, mistyped or
oversized; non-UTF-8 files; symlinks leading out of the package folder; huge files. Each
gets a StudioError naming the file and the field (or line and column), and nothing is
written: the folder is snapshotted (paths, types, sizes, hashes, link targets, mtimes)
before and after, through the loader and through the CLI."""
from __future__ import annotations

import hashlib
import os
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w

from studio.cli import main as cli
from studio.engine.contract.package import MAX_FILE_BYTES, MAX_FILES, load_package
from studio.engine.errors import StudioError

BASE = Path(__file__).resolve().parents[1] / "data" / "reliability" / "fill"

# field -> (required, a value of the wrong type, its length limit when a string)
FIELDS = {
    "id": (True, 7, 100_000),
    "summary": (True, 7, 400),
    "license": (False, 7, 1000),
    "visibility": (False, 7, 100_000),
    "authors": (False, "one author", None),
    "signature": (True, 7, 100_000),
    "tolerance.class": (True, 7, 100_000),
    "tolerance.category": (True, ["copy"], 100_000),
    "tolerance.justification": (False, 7, 100_000),
    "reference.file": (False, 7, 100_000),
    "reference.forward": (False, 7, 100_000),
    "reference.precision": (False, 7, 100_000),
    "kernel.file": (False, 7, 100_000),
    "kernel.entry": (False, 7, 100_000),
    "kernel.workgroup_size": (False, "64", None),
    "kernel.invocations": (True, 7, 100_000),
    "bindings.text": (True, 7, 100_000),
    "backward.text": (True, 7, 100_000),
    "backward.subgradient": (False, 7, 100_000),
}
TABLES = ("tolerance", "reference", "kernel", "bindings", "backward")


def snapshot(root: Path) -> dict:
    """Everything observable about a folder tree, without following links."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st.st_mtime_ns)
            elif p.is_file():          # content hashed up to 16 MiB (the sparse 8 GiB file: size and mtime)
                digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size <= 16 << 20 else None
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest)
            else:
                out[rel] = ("other", st.st_mode)
    out["."] = ("dir", root.stat().st_mtime_ns)
    return out


def make_package(tmp_path: Path, manifest: dict | str | bytes | None = None, name: str = "pkg") -> Path:
    root = tmp_path / name
    shutil.copytree(BASE, root)
    if manifest is not None:
        raw = manifest if isinstance(manifest, bytes) else \
            (manifest if isinstance(manifest, str) else tomli_w.dumps(manifest)).encode()
        (root / "op.toml").write_bytes(raw)
    return root


def base_manifest() -> dict:
    return tomllib.loads((BASE / "op.toml").read_text())


def edited(dotted: str, value=None, *, delete: bool = False) -> dict:
    data = base_manifest()
    *tables, key = dotted.split(".")
    node = data
    for t in tables:
        node = node.setdefault(t, {})
    if delete:
        node.pop(key, None)
    else:
        node[key] = value
    return data


def refused(root: Path, *, field: str | None = None, file: Path | None = None, text: str | None = None,
            positioned: bool = True) -> StudioError:
    """Load root expecting a StudioError; check it names the file and the field (or a line and
    column), and that the folder is exactly as it was."""
    before = snapshot(root)
    with pytest.raises(StudioError) as info:
        load_package(root)
    e = info.value
    assert snapshot(root) == before, "loading wrote to the package folder"
    assert e.file, f"no file named: {e.format()}"
    if file is not None:
        assert Path(e.file) == file, f"names {e.file}, expected {file}"
    if positioned:
        assert e.field or (e.line is not None and e.col is not None), f"no field or position: {e.format()}"
    if field is not None:
        assert e.field == field, f"field {e.field!r}, expected {field!r}: {e.format()}"
        assert field in e.format()
    if text is not None:
        assert text in e.format(), e.format()
    return e


def test_the_base_package_loads(tmp_path):
    root = make_package(tmp_path)
    before = snapshot(root)
    assert load_package(root).id == "user/test/fill@1"
    assert snapshot(root) == before


# ------------------------------------------------------------------ fields
@pytest.mark.parametrize("dotted", FIELDS)
def test_a_missing_field_is_named_or_defaulted(tmp_path, dotted):
    required = FIELDS[dotted][0]
    root = make_package(tmp_path, edited(dotted, delete=True))
    if required:
        e = refused(root, field=dotted, file=root / "op.toml", text="missing field")
        assert e.hint
    else:
        load_package(root)             # optional: the documented default applies


@pytest.mark.parametrize("dotted", FIELDS)
def test_a_mistyped_field_is_named_at_its_line(tmp_path, dotted):
    root = make_package(tmp_path, edited(dotted, FIELDS[dotted][1]))
    e = refused(root, field=dotted, file=root / "op.toml", text="must be")
    assert e.line is not None, "a mistyped field should point at its line"


@pytest.mark.parametrize("dotted", [f for f, (_, _, limit) in FIELDS.items() if limit])
def test_an_oversized_field_is_named(tmp_path, dotted):
    limit = FIELDS[dotted][2]
    root = make_package(tmp_path, edited(dotted, "x" * (limit + 1)))
    refused(root, field=dotted, file=root / "op.toml")


@pytest.mark.parametrize("table", TABLES)
def test_a_table_given_as_a_value_is_named(tmp_path, table):
    data = base_manifest()
    data[table] = "exact"
    root = make_package(tmp_path, data)
    refused(root, field=table, file=root / "op.toml", text="must be a table")


@pytest.mark.parametrize("dotted, value, words", [
    ("id", "no-namespace", "bad op id"),
    ("visibility", "secret", "is not one of"),
    ("reference.precision", "f16", "is not one of"),
    ("kernel.workgroup_size", 0, "outside [1, 256]"),
    ("kernel.workgroup_size", 10**30, "outside [1, 256]"),
    ("kernel.workgroup_size", True, "must be int"),
    ("authors", [1, 2], "list of strings"),
    ("authors", ["a"] * 65, "at most 64"),
    ("authors", ["a" * 201], "at most 64"),
    ("tolerance.class", "roughly", "tolerance"),
    ("tolerance.category", "magic", "magic"),
])
def test_a_field_out_of_its_range_is_named(tmp_path, dotted, value, words):
    root = make_package(tmp_path, edited(dotted, value))
    e = refused(root, file=root / "op.toml", text=words)
    assert e.field is not None or e.line is not None


@pytest.mark.parametrize("dotted", ["signature", "bindings.text", "backward.text", "kernel.invocations"])
def test_an_embedded_text_error_points_into_op_toml(tmp_path, dotted):
    root = make_package(tmp_path, edited(dotted, "@@@ broken ((("))
    e = refused(root, file=root / "op.toml")
    assert e.line is not None and e.col is not None
    line = (root / "op.toml").read_text().splitlines()[e.line - 1]
    assert "@@@" in line, f"{e.format()} points at {line!r}"


@pytest.mark.parametrize("text", ["id = ", 'id = "a', "[tolerance\nclass = 1", "a = 1\na = 2", "= 3", '"""'])
def test_invalid_toml_has_a_line_and_column(tmp_path, text):
    root = make_package(tmp_path, text)
    e = refused(root, file=root / "op.toml", text="invalid TOML")
    assert e.line is not None and e.col is not None


def _deep(root: Path, depth: int = 1000) -> Path:
    """A 1,000-deep array in op.toml: it made tomllib raise RecursionError, naming no file."""
    p = root / "op.toml"
    p.write_text(p.read_text() + "\n[extra]\nv = " + "[" * depth + "]" * depth + "\n")
    return root


def test_a_deeply_nested_array_is_refused_at_its_position(tmp_path):
    root = _deep(make_package(tmp_path))
    e = refused(root, file=root / "op.toml", text="nested more than 32 deep")
    lines = (root / "op.toml").read_text().splitlines()
    assert lines[e.line - 1].startswith("v = [") and e.col == len("v = ") + 33, e.format()
    refused(_deep(make_package(tmp_path, name="p2"), 33), text="nested more than 32 deep")
    load_package(_deep(make_package(tmp_path, name="p3"), 32))        # the limit itself loads


# ------------------------------------------------------------------ encodings
@pytest.mark.parametrize("name", ["op.toml", "reference.py", "forward.wgsl"])
def test_a_file_that_is_not_utf8_is_named_at_the_bad_byte(tmp_path, name):
    root = make_package(tmp_path)
    p = root / name
    lines = p.read_bytes().split(b"\n")
    k = next(i for i, ln in enumerate(lines) if i >= 2 and len(ln) > 3)
    lines[k] = lines[k][:3] + b"\xff\xfe" + lines[k][3:]
    p.write_bytes(b"\n".join(lines))
    e = refused(root, file=p, text="not UTF-8")
    assert (e.line, e.col) == (k + 1, 4), e.format()


def test_utf16_with_a_bom_is_refused(tmp_path):
    root = make_package(tmp_path, (BASE / "op.toml").read_text().encode("utf-16"))
    refused(root, file=root / "op.toml", text="not UTF-8")


def test_a_byte_order_mark_or_nul_is_an_error_not_a_crash(tmp_path):
    for k, raw in enumerate([b"\xef\xbb\xbf" + (BASE / "op.toml").read_bytes(), b"id = \"\x00\"\n"]):
        refused(make_package(tmp_path, raw, name=f"p{k}"))


# ------------------------------------------------------------------ symlinks and paths
@pytest.fixture
def outside(tmp_path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    shutil.copy(BASE / "reference.py", d / "reference.py")
    shutil.copy(BASE / "forward.wgsl", d / "forward.wgsl")
    shutil.copy(BASE / "op.toml", d / "op.toml")
    return d


@pytest.mark.parametrize("name, field", [("reference.py", "reference.file"), ("forward.wgsl", "kernel.file"),
                                         ("op.toml", "manifest")])
def test_a_symlink_out_of_the_package_is_refused(tmp_path, outside, name, field):
    root = make_package(tmp_path)
    (root / name).unlink()
    (root / name).symlink_to(outside / name)
    e = refused(root, text="outside the package")
    assert e.field in (field, name)


def test_an_extra_file_symlinked_out_is_refused(tmp_path, outside):
    root = make_package(tmp_path)
    (root / "notes.txt").symlink_to(outside / "reference.py")
    refused(root, field="notes.txt", text="outside the package")


def test_a_folder_symlinked_out_is_refused(tmp_path, outside):
    root = make_package(tmp_path)
    (root / "data").symlink_to(outside, target_is_directory=True)
    refused(root, field="data", text="outside the package")


def test_a_symlink_inside_the_package_is_fine(tmp_path):
    root = make_package(tmp_path)
    (root / "forward.wgsl").rename(root / "kernel.wgsl")
    (root / "forward.wgsl").symlink_to("kernel.wgsl")
    assert load_package(root).kernel_source.startswith("// user/test/fill@1")


@pytest.mark.parametrize("value", ["../outside/reference.py", "/etc/hostname", "sub/../../outside/reference.py",
                                   "reference.py\x00.txt", "", "receipts"])
def test_a_file_field_leading_outside_or_nowhere_is_refused(tmp_path, outside, value):
    root = make_package(tmp_path, edited("reference.file", value))
    (root / "receipts").mkdir()
    refused(root, field="reference.file", file=root / "op.toml")


def test_a_device_file_or_fifo_is_refused_without_reading_it(tmp_path):
    root = make_package(tmp_path)
    (root / "reference.py").unlink()
    os.mkfifo(root / "reference.py")         # reading it would block forever
    refused(root, field="reference.py", text="not a regular file")
    root2 = make_package(tmp_path, name="pkg2")
    (root2 / "forward.wgsl").unlink()
    (root2 / "forward.wgsl").symlink_to("/dev/zero")
    refused(root2, text="outside the package")


# ------------------------------------------------------------------ sizes
@pytest.mark.parametrize("name", ["reference.py", "forward.wgsl", "op.toml", "notes.bin"])
def test_a_huge_file_is_refused_with_its_size(tmp_path, name):
    root = make_package(tmp_path)
    p = root / name
    with open(p, "ab") as f:
        f.write(b"#" * (MAX_FILE_BYTES + 1))
    e = refused(root, text=str(MAX_FILE_BYTES))
    assert name in e.format()


def test_a_sparse_multi_gigabyte_file_is_refused_without_reading_it(tmp_path):
    root = make_package(tmp_path)
    with open(root / "big.bin", "wb") as f:
        f.truncate(8 << 30)                  # 8 GiB, sparse: reading it would take minutes
    refused(root, field="big.bin", text="8589934592 bytes")


def test_too_many_files_are_refused(tmp_path):
    root = make_package(tmp_path)
    for k in range(MAX_FILES):
        (root / f"extra{k}.txt").write_text("x")
    e = refused(root, file=root, text=f"limit {MAX_FILES}", positioned=False)   # the folder is the culprit
    assert e.hint


# ------------------------------------------------------------------ through the CLI: exit 2, nothing written
CASES = {
    "missing_signature": lambda tmp: make_package(tmp, edited("signature", delete=True)),
    "mistyped_workgroup": lambda tmp: make_package(tmp, edited("kernel.workgroup_size", "64")),
    "not_utf8_reference": lambda tmp: _corrupt(make_package(tmp), "reference.py"),
    "symlink_out": lambda tmp: _link_out(make_package(tmp), tmp),
    "deep_toml": lambda tmp: _deep(make_package(tmp)),
}


def _corrupt(root: Path, name: str) -> Path:
    (root / name).write_bytes(b"\xff" + (root / name).read_bytes())
    return root


def _link_out(root: Path, tmp: Path) -> Path:
    (tmp / "elsewhere.py").write_text("import os\n")
    (root / "reference.py").unlink()
    (root / "reference.py").symlink_to(tmp / "elsewhere.py")
    return root


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", [["check"], ["conform"], ["receipts"], ["ops", "show"], ["trust"]])
def test_cli_commands_report_and_write_nothing(tmp_path, capsys, case, command):
    root = CASES[case](tmp_path)
    before = snapshot(tmp_path)
    rc = cli([*command, str(root)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    assert str(root) in err
    assert snapshot(tmp_path) == before
    assert not (root / "receipts").exists()


@pytest.mark.parametrize("command", [["check"], ["conform"], ["receipts"], ["gradcheck"]])
def test_a_malformed_package_is_refused_before_a_worker_starts(tmp_path, capsys, monkeypatch, command):
    """A package named by its path is loaded in the CLI's own process first (session.worker_for): the
    error in milliseconds, no worker process and no device for it."""
    from studio.cli import session

    def no_worker(budget_s):
        raise AssertionError("a worker was started for a package the CLI could refuse itself")
    monkeypatch.setattr(session, "worker", no_worker)
    root = CASES["missing_signature"](tmp_path)
    assert cli([*command, str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(root) in err and "signature" in err


def test_an_op_id_is_looked_up_in_the_worker_and_an_unknown_one_refused_there(capsys):
    assert cli(["check", "user/nobody/nothing@1"]) == 2                  # through the worker: no early load
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no op 'user/nobody/nothing@1' in the catalog" in err
    assert "Traceback" not in err
