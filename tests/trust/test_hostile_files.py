"""Hostile files and inputs, each one seen before and reproduced here for
real — a FIFO, a sparse multi-gigabyte file, a 2 GiB .npy, a 1,000-deep TOML array, a
100,000-deep receipt, `"hashes": null`, a /dev/shm too small for the input, an empty .npy, an
.npz, string, struct, complex and datetime dtypes, NaN for a `finite` input, `--timeout nan`,
`--out` onto a folder, a symlink, a device node, a read-only and a full filesystem. Each is refused
without blocking or reading it whole, with a StudioError that names the file or flag and says what
to do; through `scellis`, exit 2 and no traceback. Nothing is mocked: the FIFOs are FIFOs, the
small /dev/shm and the read-only and full filesystems are real tmpfs mounts in a private mount
namespace (`unshare -rm`; those tests are skipped where unprivileged namespaces are off)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import MEDIAN, copy_package

from studio.engine.arrays import array_header, check_input, check_writable, load_array, save_array
from studio.engine.contract.manifest import MAX_DEPTH, nesting, read_manifest
from studio.engine.contract.package import load_package, read_regular
from studio.engine.contract.signature import parse_signature
from studio.engine.errors import StudioError
from studio.engine.proof.receipts import (
    gradcheck_receipt_path,
    gradcheck_status,
    judge_receipts,
    local_status,
    read_receipt,
    receipt_dir,
    receipts,
    verify_receipt,
)
from studio.engine.records.reader import MAX_DEPTH as MAX_JSON_DEPTH
from studio.engine.records.reader import parse_json

GIB = 1 << 30
MEDIAN_ID = "user/demo/windowed_median@1"
SPARSE = 3 * GIB


def scellis(*args, timeout: float = 120, cwd=None, wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    """`scellis ARGS` in a fresh process; a hang is a TimeoutExpired (the test fails, never hangs)."""
    return subprocess.run([*(wrap or []), sys.executable, "-m", "studio.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def peak_rss(*args, timeout: float = 120) -> tuple[subprocess.CompletedProcess, int]:
    """`scellis ARGS` and the largest resident set of it or its worker (bytes), from a wrapper
    process that has no other children."""
    probe = ("import json, resource, subprocess, sys\n"
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "print(json.dumps([r.returncode, r.stdout, r.stderr, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024]))\n")
    out = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "studio.cli", *map(str, args)],
                         capture_output=True, text=True, timeout=timeout)
    rc, stdout, stderr, rss = json.loads(out.stdout)
    return subprocess.CompletedProcess(args, rc, stdout, stderr), rss


def refused_by_cli(res: subprocess.CompletedProcess, *needles: str) -> str:
    err = res.stderr
    assert res.returncode == 2, f"exit {res.returncode}\n{res.stdout}\n{err}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert "error: " in err, err
    for n in needles:
        assert n in err, f"{n!r} not in:\n{err}"
    return err


def bounded(fn, seconds: float = 20.0):
    """fn() in a thread: its result, or a failure if it blocks (a FIFO opened for reading would)."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:      # noqa: BLE001 (re-raised in the test's thread)
            box["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} blocked for {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def unblock(fifo: Path) -> None:
    """Release a reader that did block on the FIFO (so a failing test leaves no stuck thread)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def rss_now() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _can_unshare() -> bool:
    if not shutil.which("unshare") or sys.platform != "linux":
        return False
    try:
        r = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


UNSHARE = _can_unshare()
needs_unshare = pytest.mark.skipif(not UNSHARE, reason="needs unprivileged user and mount namespaces (unshare -rm)")


def in_namespace(mounts: str, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """cmd in a private mount namespace after ``mounts`` (shell), then print what is left in /dev/shm."""
    script = f'{mounts} && "$@"; rc=$?; echo "left in /dev/shm: [$(ls -A /dev/shm)]" >&2; exit $rc'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *cmd], capture_output=True, text=True,
                          timeout=timeout)


# ================================================================== point 6: package files and op.toml
def test_a_1000_deep_toml_array_is_refused_at_its_position(tmp_path):
    for value, opener in [("[" * 1000 + "]" * 1000, "["), ("{a = " * 1000 + "1" + "}" * 1000, "{")]:
        text = f'# a comment [[[[\nid = "x"\nextra = {value}\n'
        with pytest.raises(StudioError) as info:
            read_manifest(text.encode(), "op.toml")
        e = info.value
        assert e.file == "op.toml" and e.line == 3, e.format()
        line = text.splitlines()[2]
        assert line[:e.col - 1].count(opener) == MAX_DEPTH and line[e.col - 1] == opener, e.format()
        assert f"more than {MAX_DEPTH} deep" in e.message and e.hint


def test_brackets_in_toml_strings_and_comments_are_not_nesting():
    """The negative control: the depth scan skips strings (all four kinds, escapes, closing runs of
    quotes) and comments, so a valid manifest full of brackets in text still parses."""
    deep = "[" * 40
    text = (f'a = "{deep}\\"{deep}"  # {deep}\nb = \'{deep}\'\nc = """\n{deep}\n\\"""{deep}"""""\n'
            f"d = '''{deep}\n'''\ne = [[1], [2]]\n")
    assert nesting(text)[0] == 2
    m = read_manifest(text.encode(), "op.toml")
    assert m.data["e"] == [[1], [2]] and m.data["a"] == f'{deep}"{deep}'


@pytest.mark.slow
def test_a_deep_toml_array_does_not_break_the_catalog(tmp_path):
    ops = tmp_path / "ops"
    bad = copy_package(MEDIAN, ops / "deep")
    manifest = bad / "op.toml"
    manifest.write_text(manifest.read_text().replace('id = "user/demo/windowed_median@1"', 'id = "user/x/deep@1"')
                        + "\n[extra]\nv = " + "[" * 1000 + "]" * 1000 + "\n")
    res = scellis("--ops-path", ops, "ops", "list", "--json")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert any(o["id"] == MEDIAN_ID for o in json.loads(res.stdout))
    assert f"{manifest}:" in res.stderr and "deep" in res.stderr, res.stderr        # skipped, named, positioned
    res = scellis("--ops-path", ops, "ops", "show", MEDIAN_ID)
    assert res.returncode == 0, res.stderr
    refused_by_cli(scellis("--ops-path", ops, "ops", "show", bad), str(manifest), "more than 32 deep")


def test_read_regular_refuses_special_and_huge_files_without_reading(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    try:
        with pytest.raises(StudioError, match="FIFO"):
            bounded(lambda: read_regular(fifo, 1 << 20, what="x"))
    finally:
        unblock(fifo)
    with pytest.raises(StudioError, match="folder"):
        read_regular(tmp_path, 1 << 20, what="x")
    with pytest.raises(StudioError, match="character device"):
        read_regular("/dev/zero", 1 << 20, what="x")
    big = sparse(tmp_path / "big", SPARSE)
    before, t0 = rss_now(), time.perf_counter()
    with pytest.raises(StudioError, match=f"{SPARSE} bytes"):
        read_regular(big, 1 << 20, what="x")
    assert time.perf_counter() - t0 < 1 and rss_now() - before < 64 << 20
    assert read_regular(Path("/proc/self/status"), 1 << 20, what="x").startswith(b"Name:")   # size 0 in stat
    (tmp_path / "ok").write_bytes(b"a" * 100)
    assert read_regular(tmp_path / "ok", 100, what="x") == b"a" * 100
    with pytest.raises(StudioError, match="limit 99"):
        read_regular(tmp_path / "ok", 99, what="x")


# ================================================================== point 6: receipts
@pytest.fixture
def median(tmp_path) -> Path:
    return copy_package(MEDIAN, tmp_path / "m")


def test_a_fifo_receipt_never_blocks(median):
    d = receipt_dir(load_package(median))
    d.mkdir(parents=True)
    fifo = d / "x.json"
    os.mkfifo(fifo)
    grad = gradcheck_receipt_path(load_package(median))
    grad.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(grad)
    pkg = load_package(median)
    try:
        with pytest.raises(StudioError) as info:
            bounded(lambda: read_receipt(fifo))
        assert "FIFO" in info.value.message and info.value.file == str(fifo) and info.value.hint
        assert bounded(lambda: receipts(pkg)) == [(fifo, None)]
        [(path, v)] = bounded(lambda: judge_receipts(pkg, "here"))
        assert (path, v.status) == (fifo, "malformed") and "FIFO" in v.problems[0]
        assert bounded(lambda: local_status(pkg, "here")) == "malformed"
        status, why = bounded(lambda: gradcheck_status(pkg))
        assert status == "malformed" and "FIFO" in why
    finally:
        unblock(fifo)
        unblock(grad)


def test_a_sparse_3_gib_receipt_is_refused_from_its_size(median):
    d = receipt_dir(load_package(median))
    d.mkdir(parents=True)
    big = sparse(d / "x.json", SPARSE, b'{"schema": "scellis-receipt/1", ')
    pkg = load_package(median)
    before, t0 = rss_now(), time.perf_counter()
    [(_, v)] = judge_receipts(pkg, "here")
    assert v.status == "malformed" and f"{SPARSE} bytes" in v.problems[0]
    with pytest.raises(StudioError, match="limit"):
        read_receipt(big)
    assert time.perf_counter() - t0 < 2 and rss_now() - before < 64 << 20


@pytest.mark.parametrize("text, line", [("[" * 100_000 + "]" * 100_000, 1),
                                        ('{"a": "[[[[",\n "b": ' + "{\"c\": " * 100_000 + "1" + "}" * 100_000 + "}", 2)])
def test_a_100000_deep_receipt_is_refused_where_it_gets_too_deep(median, text, line):
    d = receipt_dir(load_package(median))
    d.mkdir(parents=True)
    (d / "x.json").write_text(text)
    with pytest.raises(StudioError) as info:
        read_receipt(d / "x.json")
    e = info.value
    assert e.line == line and e.col is not None and f"more than {MAX_JSON_DEPTH} deep" in e.message, e.format()
    [(_, v)] = judge_receipts(load_package(median), "here")
    assert v.status == "malformed" and "deep" in v.problems[0]


def test_json_strings_are_not_nesting():
    deep = "[" * 100
    assert parse_json(json.dumps({"a": deep + '\\"' + deep, "b": [[1]]}).encode(), "r.json")["b"] == [[1]]
    for raw, words in [(b'{"a": 1, "a": 2}', "twice"), (b'{"a": NaN}', "NaN"), (b'{"a": 1e999999}', None),
                       (b'{"a": ' + b"1" * 5000 + b"}", "digits"), (b"\xff{}", "UTF-8"), (b'{"a": }', "JSON")]:
        if words is None:      # 1e999999 is inf in Python's json: accepted as a number, not a crash
            parse_json(raw, "r.json")
            continue
        with pytest.raises(StudioError, match=words):
            parse_json(raw, "r.json")


def _receipt(pkg, profile_id: str) -> dict:
    """A receipt as conformance writes it, for the checks that read it (no device needed: the
    corpus is regenerated from the signature, which is exactly what verify_receipt does)."""
    from studio.engine.proof.corpus import SEEDS, generate
    corpus = generate(pkg.contract.signature, seed=0, seeds=SEEDS)
    return _sealed(
        {"schema": "scellis-receipt/1", "op": pkg.id, "hashes": {**pkg.part_hashes(), "corpus": corpus.hash},
         "corpus": {**corpus.identity, "cases": len(corpus.cases)}, "tolerance": str(pkg.contract.tolerance),
         "category": pkg.contract.tolerance.category,
         "gpu_profile": {"id": profile_id, "wgpu_version": "0.32.0", "adapter": {}, "limits": {}},
         "engine_version": "0.1.0", "wgpu_version": "0.32.0",
         "cases": {"total": len(corpus.cases), "passed": len(corpus.cases), "failed": 0},
         "backward": {"tolerance": "exact", "cases": len(corpus.cases), "passed": len(corpus.cases), "failed": 0,
                      "verdict": "pass"},
         "verdict": "pass", "created": "2026-12-01T00:00:00+00:00", "seconds": 0.5})


def _sealed(body: dict) -> dict:
    """Sealed with this test's user key, as conformance seals what it writes (docs/receipt.md)."""
    from studio.engine.home import studio_home
    from studio.engine.records.seal import Seal as ReceiptSeal
    return ReceiptSeal(studio_home()).seal(body)


@pytest.mark.parametrize("edit, field", [
    (lambda r: r.update(hashes=None), "hashes"),
    (lambda r: r.update(corpus=[1]), "corpus"),
    (lambda r: r["corpus"].update(seed=-1), "corpus.seed"),
    (lambda r: r["corpus"].update(seed=float("inf")), "corpus.seed"),
    (lambda r: r["corpus"].update(seed=10**200), "corpus.seed"),
    (lambda r: r["corpus"].update(large="yes"), "corpus.large"),
    (lambda r: r["corpus"].update(fold_size=10**12), "corpus.fold_size"),
    (lambda r: r["hashes"].update(kernel=None), "hashes.kernel"),
    (lambda r: r.update(gpu_profile="gpu"), "gpu_profile"),
    (lambda r: r["gpu_profile"].update(id="../../escape"), "gpu_profile.id"),
    (lambda r: r["cases"].update(passed=True), "cases"),
    (lambda r: r["cases"].update(failed=3), "cases"),
    (lambda r: r.update(verdict=None), "verdict"),
    (lambda r: r.update(seconds=float("nan")), "seconds"),
    (lambda r: r.pop("op"), "op"),
])
def test_a_malformed_receipt_field_is_malformed_with_the_reason(median, edit, field):
    pkg = load_package(median)
    good = _receipt(pkg, "here")
    assert verify_receipt(pkg, good, "here").status == "valid"          # the check can pass
    bad = json.loads(json.dumps(good))
    edit(bad)
    v = verify_receipt(pkg, bad, "here")
    assert v.status == "malformed" and any(p.startswith(field) for p in v.problems), v.problems


def test_receipt_values_that_disagree_with_the_package_are_stale(median):
    pkg = load_package(median)
    good = _receipt(pkg, "here")
    for key, value in [("op", "user/demo/other@1"), ("tolerance", "ulp(4)"), ("category", "elementwise")]:
        assert verify_receipt(pkg, _sealed({**good, key: value}), "here").status == "stale", key
    for key, value in [("coverage", "less"), ("version", 999), ("cases", 3)]:
        bad = {**good, "corpus": {**good["corpus"], key: value}}
        if key == "cases":
            bad["cases"] = {"total": 3, "passed": 3, "failed": 0}
        assert verify_receipt(pkg, _sealed(bad), "here").status == "stale", key


@pytest.mark.slow
def test_hostile_receipts_through_run_and_receipts(median, tmp_path):
    """`scellis run` (which reads the receipts in the CLI process to warn) and `scellis receipts`
    (in the worker) with a FIFO, a sparse 3 GiB file, a 100,000-deep document and `"hashes": null`
    among the receipts: both finish, each receipt is malformed with its reason, and nothing is
    read whole (the peak resident set stays far below the 3 GiB a whole read would take)."""
    d = receipt_dir(load_package(median))
    d.mkdir(parents=True)
    os.mkfifo(d / "fifo.json")
    sparse(d / "sparse.json", SPARSE)
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    pkg = load_package(median)
    (d / "null.json").write_text(json.dumps({**_receipt(pkg, "here"), "hashes": None}))
    x = tmp_path / "x.npy"
    np.save(x, np.arange(20, dtype=np.float32))
    try:
        t0 = time.perf_counter()
        res, rss = peak_rss("run", median, "--param", "w=3", "--input", x, "--timeout", "60")
        print(f"\nscellis run with 4 hostile receipts: {time.perf_counter() - t0:.1f} s, peak RSS {rss / 2**20:.0f} MiB")
        assert res.returncode == 0, res.stderr
        assert "no valid conformance receipt on this GPU profile (malformed)" in res.stderr
        assert rss < 1 * GIB, f"peak RSS {rss / GIB:.2f} GiB"
        res = scellis("receipts", median, timeout=120)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stdout + res.stderr
        lines = res.stdout
        for name, why in [("fifo", "FIFO"), ("sparse", f"{SPARSE} bytes"), ("deep", "deep"), ("null", "hashes")]:
            assert f"malformed {d / (name + '.json')}" in lines and why in lines, (name, lines)
    finally:
        unblock(d / "fifo.json")


# ================================================================== point 6: a 2 GiB input .npy
def _sparse_npy(path: Path, shape, dtype) -> Path:
    header = np.lib.format.header_data_from_array_1_0(np.empty(0, dtype))
    header["shape"] = tuple(shape)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.truncate(f.tell() + int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return path


def test_a_2_gib_npy_is_refused_from_its_header(tmp_path):
    big = _sparse_npy(tmp_path / "big.npy", (2**29,), np.float32)          # 2 GiB of data, sparse
    before, t0 = rss_now(), time.perf_counter()
    with pytest.raises(StudioError) as info:
        load_array(big, max_bytes=128 << 20, why="what the device binds in one buffer")
    assert "2147483648 bytes" in info.value.message and "binds" in info.value.message
    assert time.perf_counter() - t0 < 1 and rss_now() - before < 64 << 20
    assert array_header(big) == ((2**29,), np.dtype(np.float32))           # the header alone: cheap


@pytest.mark.slow
def test_a_2_gib_npy_through_scellis_run_is_refused_before_loading(tmp_path):
    """Just over 2 GiB, so it is over every limit on any device (this one binds 128 MiB)."""
    n = 2**29 + 1024
    big = _sparse_npy(tmp_path / "big.npy", (n,), np.float32)
    t0 = time.perf_counter()
    res, rss = peak_rss("run", MEDIAN_ID, "--param", "w=3", "--input", big, "--timeout", "60")
    print(f"\nscellis run with a 2 GiB .npy: refused in {time.perf_counter() - t0:.1f} s, peak RSS {rss / 2**20:.0f} MiB")
    refused_by_cli(res, str(big), f"{n * 4} bytes")
    assert rss < 1 * GIB, f"peak RSS {rss / GIB:.2f} GiB (8.2 GiB was seen before the bound)"


def test_a_npy_is_read_into_its_array_once(tmp_path):
    """The reader is numpy's format: C and Fortran order, 2.0 headers, big-endian, 0-d and empty arrays."""
    rng = np.random.default_rng(0)
    for k, a in enumerate([rng.normal(size=(3, 4)).astype(np.float32), np.asfortranarray(rng.normal(size=(5, 2))),
                           np.arange(6, dtype=">i4"), np.float32(2.5), np.zeros((0, 3), np.float32)]):
        p = tmp_path / f"a{k}.npy"
        np.save(p, a)
        b = load_array(p)
        assert b.dtype == np.asarray(a).dtype and b.shape == np.shape(a) and np.array_equal(b, a)
    with open(tmp_path / "v2.npy", "wb") as f:
        np.lib.format.write_array(f, np.arange(5.0), version=(2, 0))
    assert load_array(tmp_path / "v2.npy").tolist() == [0, 1, 2, 3, 4]


# ================================================================== point 6: shared memory
@pytest.mark.slow
@needs_unshare
def test_a_dev_shm_too_small_for_the_input_is_a_clear_error_and_leaves_nothing(tmp_path):
    """The case seen: a 16 MiB /dev/shm and a 32 MiB input. It was a Bus error and a 32 MiB
    segment left behind; now the CLI says what happened and /dev/shm is empty afterwards."""
    x = tmp_path / "x32.npy"
    np.save(x, np.zeros(8 << 20, np.float32))
    res = in_namespace("mount -t tmpfs -o size=16m tmpfs /dev/shm", sys.executable, "-m", "studio.cli", "run",
                       MEDIAN_ID, "--param", "w=3", "--input", str(x), "--timeout", "60")
    refused_by_cli(res, "shared memory", "inputs.x", "--shm-size")
    assert "left in /dev/shm: []" in res.stderr and "Bus error" not in res.stderr


PACK_PROBE = """
import json, os, sys
import numpy as np
from studio.engine.errors import StudioError
from studio.engine.worker.transport import pack
sizes = json.loads(sys.argv[1])
segments = ["someone else's"]
try:
    pack({"inputs": {f"a{k}": np.ones(n // 4, np.float32) for k, n in enumerate(sizes)}}, segments)
    print("packed")
except StudioError as e:
    print("refused:", e.format())
print("segments:", segments)
"""


@pytest.mark.slow
@needs_unshare
@pytest.mark.parametrize("sizes", [[8 << 20, 12 << 20], [2 << 20, 32 << 20]], ids=["no room left", "larger than it all"])
def test_pack_is_all_or_nothing_on_a_small_dev_shm(sizes):
    """8 MiB fit and the next 12 MiB do not (posix_fallocate says ENOSPC, not a bus error later), or
    the second is larger than the whole of /dev/shm: either way every segment of the call is gone."""
    res = in_namespace("mount -t tmpfs -o size=16m tmpfs /dev/shm", sys.executable, "-c", PACK_PROBE,
                       json.dumps(sizes))
    assert res.returncode == 0, res.stderr
    assert "refused:" in res.stdout and "inputs.a1" in res.stdout and "shared memory" in res.stdout, res.stdout
    assert "segments: [\"someone else's\"]" in res.stdout, res.stdout
    assert "left in /dev/shm: []" in res.stderr and "Traceback" not in res.stderr, res.stderr


FD_PROBE = """
import json, os, resource, sys
import numpy as np
from multiprocessing import shared_memory
from studio.engine.errors import StudioError
from studio.engine.worker.transport import pack
warm = shared_memory.SharedMemory(create=True, size=1 << 16)     # starts the resource tracker
warm.close(); warm.unlink()
before = set(os.listdir("/dev/shm"))
out = []
for spare in range(4):
    used = len(os.listdir("/proc/self/fd")) - 1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + spare, hard))
    segments = []
    try:
        pack({"a": np.ones(1 << 16, np.float32), "b": np.ones(1 << 16, np.float32)}, segments)
        result = "packed"
    except StudioError as e:
        result = e.message
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    for s in segments:
        s.close(); s.unlink()
    out.append([spare, result, sorted(set(os.listdir("/dev/shm")) - before)])
print(json.dumps(out))
"""
TRACKER_NOISE = "multiprocessing/resource_tracker.py"


@pytest.mark.slow
def test_a_segment_the_system_refuses_is_a_clear_error_and_leaves_nothing():
    """Where no small /dev/shm can be mounted, the same clean-up path under a real refusal: the
    process may open no more files, so shm_open (no spare descriptor), mmap (which duplicates the
    descriptor) or the reservation fails. CPython 3.11's SharedMemory unlinks a segment whose mmap
    failed before registering it, so its resource tracker prints a KeyError; that noise is the only
    traceback allowed here (the segment is gone either way)."""
    res = subprocess.run([sys.executable, "-c", FD_PROBE], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert any("shared memory" in r for _, r, _ in rows), rows
    for spare, result, left in rows:
        assert result == "packed" or "could not place" in result, (spare, result)
        assert left == [], (spare, left)
    blocks = [b for b in res.stderr.split("Traceback (most recent call last):")[1:]]
    assert all(TRACKER_NOISE in b and "KeyError" in b for b in blocks), res.stderr


# ================================================================== point 7: inputs
SIG = parse_signature("f(x: f32[n] finite, y: f32[n], z: f32[n] nonneg, r: f32[n] in [-1, 1], "
                      "u: u32[n], i: i32[n] in [-5, 5]) -> o: f32[n]")


@pytest.mark.parametrize("name, values, words", [
    ("x", np.array([1, np.nan], np.float32), "x[1] = nan is not finite"),
    ("x", np.array([np.inf], np.float64), "not finite"),
    ("x", np.array([0, 1e39]), "too large for f32"),
    ("z", np.array([1, -0.5], np.float32), "outside the declared domain nonneg"),
    ("z", np.array([np.nan], np.float32), "not finite"),
    ("r", np.array([[0.5, 1.5]], np.float32), "r[0, 1] = 1.5"),
    ("u", np.array([-1, 2]), "u[0] = -1 is outside u32"),
    ("u", np.array([2**32]), "outside u32"),
    ("i", np.array([6], np.int32), "outside i32 in [-5, 5]"),
    ("u", np.array([1.0, 2.0]), "floating-point values"),
    ("x", np.array([1 + 1j]), "complex"),
    ("x", np.array(["1"]), "text"),
    ("x", np.array([True]), "true/false"),
    ("x", np.zeros(2, [("a", "f4")]), "records"),
    ("x", np.array([1], "datetime64[s]"), "dates"),
    ("x", np.array([1], "timedelta64[s]"), "time spans"),
])
def test_check_input_refuses_what_the_signature_does_not_admit(name, values, words):
    with pytest.raises(StudioError) as info:
        check_input(values, SIG.input(name), file="in.npy")
    e = info.value
    assert words in e.message and e.file == "in.npy" and e.field == name and e.hint, e.format()


def test_check_input_admits_what_the_signature_does():
    check_input(np.array([np.nan, np.inf, -np.inf], np.float32), SIG.input("y"))          # `any`
    check_input(np.arange(5), SIG.input("x"))                                              # ints for floats
    check_input(np.array([0.0, -0.0, 3e38]), SIG.input("z"))
    check_input(np.array([-1, 1], np.float16), SIG.input("r"))
    check_input(np.array([0, 2**32 - 1], np.uint64), SIG.input("u"))
    check_input(np.array([-5, 5], np.int64), SIG.input("i"))
    check_input(np.zeros((0,), np.float32), SIG.input("x"))


def _inputs(tmp: Path) -> dict[str, Path]:
    made = {}

    def save(name, a):
        made[name] = tmp / name
        np.save(made[name], a, allow_pickle=True)
    (tmp / "empty.npy").write_bytes(b"")
    made["empty.npy"] = tmp / "empty.npy"
    np.savez(tmp / "arrays.npz", x=np.arange(7.0))
    made["arrays.npz"] = tmp / "arrays.npz"
    shutil.copy(tmp / "arrays.npz", tmp / "renamed.npy")
    made["renamed.npy"] = tmp / "renamed.npy"
    save("strings.npy", np.array(["a"] * 7))
    save("struct.npy", np.zeros(7, [("a", "f4"), ("b", "i4")]))
    save("complex.npy", np.arange(7) + 1j)
    save("datetime.npy", np.arange(7).astype("datetime64[s]"))
    save("objects.npy", np.array([1, "a", None] * 3, dtype=object))
    x = np.arange(7, dtype=np.float32)
    x[3] = np.nan
    save("nan.npy", x)
    save("inf.npy", np.where(np.arange(7) == 5, np.inf, 1.0))
    with open(tmp / "truncated.npy", "wb") as f:
        np.save(f, np.arange(100, dtype=np.float32))
    (tmp / "truncated.npy").write_bytes((tmp / "truncated.npy").read_bytes()[:-10])
    made["truncated.npy"] = tmp / "truncated.npy"
    (tmp / "junk.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'x'}  \n")
    made["junk.npy"] = tmp / "junk.npy"
    (tmp / "bad.csv").write_text("1\n2\nthree\n4\n")
    made["bad.csv"] = tmp / "bad.csv"
    os.mkfifo(tmp / "fifo.npy")
    made["fifo.npy"] = tmp / "fifo.npy"
    made["folder.npy"] = tmp
    return made


INPUTS = {   # file -> what the message says (beside the file's name)
    "empty.npy": "empty (0 bytes)", "arrays.npz": ".npz archive", "renamed.npy": ".npz archive",
    "strings.npy": "text", "struct.npy": "records", "complex.npy": "complex numbers",
    "datetime.npy": "dates and times", "objects.npy": "Python objects", "nan.npy": "x[3] = nan is not finite",
    "inf.npy": "x[5] = inf is not finite", "truncated.npy": "truncated", "junk.npy": "no valid .npy header",
    "bad.csv": "a value is not a number", "fifo.npy": "FIFO", "folder.npy": "folder",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", INPUTS)
def test_a_hostile_input_is_a_message_not_a_traceback(tmp_path, name):
    path = _inputs(tmp_path)[name]
    try:
        res = scellis("run", MEDIAN_ID, "--param", "w=3", "--input", path, "--timeout", "60", timeout=120)
    finally:
        unblock(tmp_path / "fifo.npy")
    err = refused_by_cli(res, f"error: {path}", INPUTS[name])
    assert "hint:" in err
    if name == "bad.csv":
        assert f"{path}:3:1" in err, err                       # the line and column of 'three'


@pytest.mark.slow
@pytest.mark.parametrize("flag, value", [("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "-1"),
                                         ("--timeout", "0"), ("--timeout", "1e300")])
def test_a_bad_number_flag_is_a_message(tmp_path, flag, value):
    x = tmp_path / "x.npy"
    np.save(x, np.arange(7, dtype=np.float32))
    res = scellis("run", MEDIAN_ID, "--param", "w=3", "--input", x, flag, value)
    refused_by_cli(res, f"argument {flag}", repr(value))


@pytest.mark.slow
def test_gradcheck_step_and_tolerance_must_be_finite_and_positive():
    for flag in ("--h", "--tolerance"):
        refused_by_cli(scellis("gradcheck", MEDIAN_ID, flag, "nan"), f"argument {flag}")


# ================================================================== point 7: --out
def _node(tmp: Path) -> Path:
    """A character device like /dev/null, made here (as root), else a FIFO: never the real one."""
    p = tmp / "devnull"
    if os.geteuid() == 0:
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    else:
        os.mkfifo(p)
    return p


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["folder", "symlink", "device", "fifo", "through a file"])
def test_out_writes_only_regular_files(tmp_path, kind):
    x = tmp_path / "x.npy"
    np.save(x, np.arange(7, dtype=np.float32))
    target = {"folder": lambda: tmp_path, "device": lambda: _node(tmp_path),
              "symlink": lambda: (tmp_path / "link.npy").symlink_to(x) or tmp_path / "link.npy",
              "fifo": lambda: os.mkfifo(tmp_path / "p.npy") or tmp_path / "p.npy",
              "through a file": lambda: x / "y.npy"}[kind]()
    before = os.lstat(target) if kind != "through a file" else None
    res = scellis("run", MEDIAN_ID, "--param", "w=3", "--input", x, "--out", target, "--timeout", "60")
    refused_by_cli(res, f"error: {target}", "hint:")
    if before is not None:
        after = os.lstat(target)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino), "the target was replaced"
    assert np.load(x).tolist() == list(range(7))           # the symlink's target is untouched too


def test_save_array_refuses_the_same_in_process(tmp_path):
    node = _node(tmp_path)
    for target, words in [(tmp_path, "folder"), (node, "device" if os.geteuid() == 0 else "FIFO")]:
        with pytest.raises(StudioError, match=words):
            save_array(target, np.zeros(3))
    (tmp_path / "old.npy").write_bytes(b"old")
    save_array(tmp_path / "old.npy", np.arange(3.0))                     # a regular file is replaced
    assert np.load(tmp_path / "old.npy").tolist() == [0, 1, 2]
    assert check_writable(tmp_path / "new" / "deeper.npy") == tmp_path / "new" / "deeper.npy"


@pytest.mark.slow
@needs_unshare
@pytest.mark.parametrize("fs, words", [("ro", "Read-only file system"), ("size=64k", "No space left on device")])
def test_out_onto_a_read_only_or_full_filesystem_is_a_message(tmp_path, fs, words):
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).normal(size=100_000).astype(np.float32))      # 400 KB out
    out = tmp_path / "mnt"
    out.mkdir()
    res = in_namespace(f"mount -t tmpfs -o {fs} tmpfs {out}", sys.executable, "-m", "studio.cli", "run",
                       MEDIAN_ID, "--param", "w=3", "--input", str(x), "--out", str(out / "y.npy"), "--timeout", "60")
    refused_by_cli(res, f"error: {out / 'y.npy'}", words, "hint:")
    assert ".tmp" not in res.stderr


def test_a_wgsl_file_that_crashes_the_compiler_is_a_message_not_a_segfault(pkg_copy):
    """10,000 nested parentheses segfault naga; the check compiles in the device worker, so the
    CLI reports it (exit 2, the kernel's file named) and the next request gets a fresh worker."""
    import subprocess
    import sys
    deep = "let i = " + "(" * 10000 + "gid.x" + ")" * 10000 + ";"
    root = pkg_copy(forward__wgsl=[("let i = gid.x + gid.y * nwg.x * 64u;", deep)])
    res = subprocess.run([sys.executable, "-m", "studio.cli", "check", str(root)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "device worker died" in res.stderr and "forward.wgsl" in res.stderr, res.stderr
