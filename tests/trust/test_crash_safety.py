"""Crash-safe writes.

1. A child process writes, in a loop, through the product's real writers — a conformance
   receipt (receipt.write_receipt), a package save (package.save_package: op.toml and a
   ~100 KB reference.py, plus the trust store it updates) — and is SIGKILLed at random
   moments, at least 50 times. After every kill each file must be one complete version,
   and the package must still load.
2. An audit of the product code (studio/): every call that writes a file goes through
   studio/engine/atomic.py (temp file, fsync, rename), so writers added later are caught.
"""
from __future__ import annotations

import ast
import json
import multiprocessing as mp
import os
import random
import signal
import time
from pathlib import Path

import pytest

from studio.engine.context import Context
from studio.engine.contract.package import load_package
from studio.engine.proof.conformance import conform
from studio.engine.proof.receipts import make_receipt, write_receipt
from studio.engine.services.actions import save_package

REPO = Path(__file__).resolve().parents[2]
MEDIAN = REPO / "examples" / "windowed_median"
KILLS = 60
VERSIONS = 5


def _versions(pkg, receipt: dict) -> tuple[list[dict], list[dict[str, bytes]]]:
    """Complete versions of each file, of different sizes, all valid."""
    receipts, packages = [], []
    base = {p.name: p.read_bytes() for p in pkg.root.iterdir() if p.is_file()}
    for v in range(VERSIONS):
        receipts.append({**receipt, "seconds": float(v), "note": f"version {v} " + "#" * (20_000 * v + 1)})
        files = dict(base)
        files["op.toml"] = base["op.toml"].replace(b"Sliding-window median", f"Sliding-window median v{v}".encode())
        files["reference.py"] = base["reference.py"] + (f"\n# version {v}\n" + "#" * 100 * (200 + 300 * v)).encode()
        packages.append(files)
    return receipts, packages


def _writer(root: str, fixed: str, home: str, receipts: list[dict], packages: list[dict], ready) -> None:  # in the child
    os.environ["SCELLIS_HOME"] = home
    pkg = load_package(fixed)             # receipts are keyed by content: this content never changes
    here = Context.open()
    i = 0
    while True:
        write_receipt(pkg, receipts[i % len(receipts)])
        save_package(here, root, packages[i % len(packages)])
        if i == 0:
            ready.set()
        i += 1


@pytest.mark.slow
def test_sigkill_at_random_moments_never_leaves_a_torn_file(ctx, tmp_path, device):
    root = tmp_path / "pkg"
    save_package(ctx, root, {p.name: p.read_bytes() for p in MEDIAN.iterdir() if p.is_file()})
    fixed = tmp_path / "fixed"
    save_package(ctx, fixed, {p.name: p.read_bytes() for p in MEDIAN.iterdir() if p.is_file()})
    pkg = load_package(fixed)
    receipts, packages = _versions(load_package(root), make_receipt(pkg, conform(ctx, pkg)))
    receipt_path = write_receipt(pkg, receipts[0])
    mpc = mp.get_context("forkserver")
    mpc.set_forkserver_preload(["studio.engine.proof.receipts", "studio.engine.contract.package",
                                "studio.engine.services.actions"])
    rng = random.Random(6)
    stats = {"kills": 0, "mid_write": 0, "versions_seen": set()}
    home = os.environ["SCELLIS_HOME"]
    valid_receipts = [json.dumps(r, sort_keys=True) for r in receipts]
    t_start = time.perf_counter()
    for k in range(KILLS):
        ready = mpc.Event()
        proc = mpc.Process(target=_writer, args=(str(root), str(fixed), home, receipts, packages, ready))
        proc.start()
        assert ready.wait(30), "the writer never completed its first round"
        time.sleep(rng.uniform(0, 0.1))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert proc.exitcode == -signal.SIGKILL
        stats["kills"] += 1
        leftovers = [*root.rglob(".*.tmp"), *(Path(home) / "receipts").rglob(".*.tmp")]
        stats["mid_write"] += bool(leftovers)
        # every file is exactly one complete version
        got = json.loads(receipt_path.read_text())
        assert got.pop("seal")["alg"] == "HMAC-SHA256"        # sealed as written; judged without it
        assert json.dumps(got, sort_keys=True) in valid_receipts, f"kill {k}: torn receipt"
        stats["versions_seen"].add(got["seconds"])
        for name in ("op.toml", "reference.py"):
            data = (root / name).read_bytes()
            assert any(data == v[name] for v in packages), f"kill {k}: torn {name}"
        assert load_package(root).id == "user/demo/windowed_median@1"
        trust_store = json.loads((Path(home) / "trust.json").read_text())
        assert trust_store["schema"] == "scellis-trust/1"
        for p in leftovers:                    # a temp file never counts as content, yet tidy up
            p.unlink()
    seconds = time.perf_counter() - t_start
    print(f"\ncrash safety: {stats['kills']} SIGKILLs, {stats['mid_write']} of them left a temp file behind "
          f"(killed mid-write), receipt versions seen after kills: {sorted(stats['versions_seen'])}, "
          f"0 torn files, {seconds:.1f} s")
    assert stats["kills"] >= 50
    assert stats["mid_write"] >= 5, "the kills should land inside writes, not only between them"
    assert len(stats["versions_seen"]) >= 3


# ------------------------------------------------------------------ the audit
WRITE_MODES = set("wax+")
IN_MEMORY = {"BytesIO", "StringIO"}
DUMPERS = {("np", "save"), ("np", "savez"), ("np", "savez_compressed"), ("np", "savetxt"), ("numpy", "save"),
           ("json", "dump"), ("tomli_w", "dump"), ("tomlkit", "dump"), ("pickle", "dump"), ("shutil", "copy"), ("shutil", "copy2"),
           ("shutil", "copyfile"), ("shutil", "copytree"), ("shutil", "move")}
# os.rename / os.replace are not listed: a rename within a filesystem is the atomic step itself
# (file, line text fragment) -> why it is not a torn-file risk
ALLOWED = {
    ("studio/app/bridge/snapshots.py", "(tmp / DONE).write_text(h)"):
        "the completion marker inside a temporary snapshot folder that is renamed into place as a whole",
}


def _in_memory_names(fn: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            if (isinstance(f, ast.Attribute) and f.attr in IN_MEMORY) or (isinstance(f, ast.Name) and f.id in IN_MEMORY):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _mode(call: ast.Call, pos: int) -> str | None:
    arg = call.args[pos] if len(call.args) > pos else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def unsafe_writes(path: Path, rel: str) -> list[str]:
    src = path.read_text()
    lines = src.splitlines()
    tree = ast.parse(src, str(path))
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] + [tree]
    for scope in scopes:
        memory = _in_memory_names(scope)
        for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call)):
            f, why = call.func, None
            if isinstance(f, ast.Name) and f.id == "open" or isinstance(f, ast.Attribute) and f.attr in ("open", "fdopen"):
                base = getattr(f, "value", None)
                if isinstance(base, ast.Name) and base.id == "os" and f.attr == "open":
                    flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
                    if any(w in flags for w in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC")):
                        why = "os.open for writing"
                else:
                    mode = _mode(call, 1 if isinstance(f, ast.Name) or f.attr == "fdopen" else 0)
                    if mode and WRITE_MODES & set(mode):
                        why = f"open(..., {mode!r})"
            elif isinstance(f, ast.Attribute) and f.attr in ("write_text", "write_bytes") and not (
                    isinstance(f.value, ast.Name) and f.value.id == "atomic"):
                why = f"Path.{f.attr}"
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in DUMPERS:
                target = call.args[1] if f.attr == "dump" and len(call.args) > 1 else (call.args[0] if call.args else None)
                if not (isinstance(target, ast.Name) and target.id in memory):
                    why = f"{f.value.id}.{f.attr}"
            if why is None:
                continue
            text = lines[call.lineno - 1]
            if "atomic-ok" in text or any(rel == a and frag in text for a, frag in ALLOWED):
                continue
            found.append(f"{rel}:{call.lineno}: {why}: {text.strip()}")
    return sorted(set(found))


def test_every_product_writer_goes_through_atomic():
    bad = []
    for py in sorted((REPO / "studio").rglob("*.py")):
        rel = py.relative_to(REPO).as_posix()
        if rel == "studio/engine/atomic.py":
            continue
        bad += unsafe_writes(py, rel)
    assert bad == [], "write through studio/engine/atomic.py (or mark a justified exception '# atomic-ok: why'):\n" \
                      + "\n".join(bad)


def test_the_audit_can_fail(tmp_path):
    p = tmp_path / "w.py"
    p.write_text("import json, io, numpy as np\n"
                 "def f(path, data):\n"
                 "    open(path, 'w').write(data)\n"
                 "    path.write_text(data)\n"
                 "    json.dump(data, open(path, 'a'))\n"
                 "    np.save(path, data)\n"
                 "    buf = io.BytesIO()\n"
                 "    np.save(buf, data)\n"
                 "    open(path, 'rb').read()\n"
                 "    open(path, 'x')  # atomic-ok: testing the escape hatch\n")
    found = unsafe_writes(p, "w.py")
    assert [ln.split(":")[1] for ln in found] == ["3", "4", "5", "5", "6"], found


def test_write_many_never_mixes_torn_files(tmp_path):
    from studio.engine.atomic import write_many
    write_many({tmp_path / "a": b"1" * 10, tmp_path / "sub" / "b": b"2" * 10})
    assert (tmp_path / "a").read_bytes() == b"1" * 10 and (tmp_path / "sub" / "b").read_bytes() == b"2" * 10
    with pytest.raises(TypeError):
        write_many({tmp_path / "a": b"new", tmp_path / "c": None})       # fails while staging
    assert (tmp_path / "a").read_bytes() == b"1" * 10                     # nothing was renamed
    assert not list(tmp_path.rglob(".*.tmp")) and not (tmp_path / "c").exists()
