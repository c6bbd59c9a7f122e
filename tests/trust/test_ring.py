"""The exchange ring, on real git: a bare repository as the remote, two user folders as two
machines exchanging the story op with local re-verification; tampering refused; an untrusted
reference from a ring never runs (docs/publishing.md)."""
import json
import os
import shutil
import subprocess

import pytest
from conftest import MEDIAN, copy_package

from studio.engine.context import Context
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof import receipts as receipt_store
from studio.engine.publish import bar
from studio.engine.services import actions, publishing

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True)


@pytest.fixture
def machines(tmp_path, device, hosts, monkeypatch):
    """Two user folders (two machines: their own trust store, receipt key, ops, rings) and a bare remote."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a = Context.open(home=tmp_path / "A", device=device, hosts=hosts)
    b = Context.open(home=tmp_path / "B", device=device, hosts=hosts)
    for m in (a, b):
        publishing.ring_add(m, "team", str(remote))
    return a, b, remote


def _authored_in(ctx, root):
    ctx.trust.record_authored(load_package(root).hash, path=root.resolve())


def _story_on(a, tmp_path):
    root = tmp_path / "A" / "ops" / "windowed_median"
    shutil.copytree(MEDIAN, root, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    _authored_in(a, root)
    return load_package(root)


@pytest.mark.slow
def test_two_machines_exchange_the_story_op_through_a_bare_git_remote(machines, tmp_path):
    a, b, remote = machines
    pkg = _story_on(a, tmp_path)
    profile = a.device.profile.id
    actions.conform(a, pkg)
    actions.gradcheck(a, pkg)
    out = publishing.publish(a, pkg, visibility="workspace", profile_id=profile)
    assert out.reproved
    sent = publishing.publish_to_ring(a, load_package(pkg.root), "team")
    assert sent["status"] == "pushed"
    log = subprocess.run(["git", "--git-dir", str(remote), "log", "--oneline", "main"], capture_output=True, text=True)
    assert "publish user/demo/windowed_median@1" in log.stdout          # it really is in the remote
    assert publishing.publish_to_ring(a, load_package(pkg.root), "team")["status"] == "already in the ring"

    rows = publishing.ring_list(b, "median")
    assert [(r["id"], r["hash"]) for r in rows] == [("user/demo/windowed_median@1", out.hash)]
    got = publishing.ring_fetch(b, "user/demo/windowed_median@1")
    fetched = load_package(got["path"])
    assert fetched.hash == out.hash and got["trust"] == "untrusted"
    assert str(tmp_path / "B") in got["path"]
    card = publishing.card(b, fetched, profile_id=profile)
    assert card["trust"]["level"] == "unverified" and card["source"] == "user"
    ring_receipts = [r for r in card["receipts"] if r["file"].startswith("ring/")]
    assert ring_receipts and all(r["origin"] == "foreign" and not r["counts"] for r in ring_receipts)
    with pytest.raises(StudioError, match="not trusted"):               # untrusted: nothing re-runs
        publishing.verify_here(b, fetched)
    b.trust.trust(fetched)                                              # `scellis trust`, by content hash
    done = publishing.verify_here(b, fetched)
    assert done.card.facts["trust"]["level"] == "verified"
    assert bar.proof_state(fetched, profile, b.seal).earned             # B's own receipts, sealed with B's key
    theirs = receipt_store.receipts(fetched, b.seal)                    # ...which are foreign to A
    assert theirs and all(receipt_store.verify_receipt(fetched, r, profile, a.seal).status == "foreign"
                          for _, r in theirs)
    assert receipt_store.receipt_dir(fetched, a.seal) != receipt_store.receipt_dir(fetched, b.seal)


def test_a_single_flipped_byte_in_the_ring_is_refused(machines, tmp_path):
    a, b, remote = machines
    pkg = _story_on(a, tmp_path)
    publishing.publish(a, pkg, visibility="workspace", profile_id="p")
    h = load_package(pkg.root).hash
    publishing.publish_to_ring(a, load_package(pkg.root), "team")
    evil = tmp_path / "evil"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(evil))
    target = evil / "packages" / h / "op" / "forward.wgsl"
    data = bytearray(target.read_bytes())
    data[100] ^= 0x01
    target.write_bytes(bytes(data))
    git(evil, "commit", "-q", "-am", "flip one byte")
    git(evil, "push", "-q", "origin", "HEAD:main")
    with pytest.raises(StudioError) as e:
        publishing.ring_fetch(b, "user/demo/windowed_median@1")
    assert "forward.wgsl" in e.value.message and "the index says sha256" in e.value.message
    assert not (tmp_path / "B" / "ops" / "fetched").exists() or not any((tmp_path / "B" / "ops" / "fetched").rglob("op.toml"))


def _dir_ring_with(a, tmp_path, edit_index):
    ring = tmp_path / "dring"
    publishing.ring_add(a, "local", str(ring))
    pkg = _story_on(a, tmp_path)
    publishing.publish(a, pkg, visibility="workspace", profile_id="p")
    publishing.publish_to_ring(a, load_package(pkg.root), "local")
    index = json.loads((ring / "index.json").read_text())
    edit_index(index["packages"])
    (ring / "index.json").write_text(json.dumps(index))
    return ring


@pytest.mark.slow
def test_a_mismatching_index_entry_is_refused_with_what_differs(machines, tmp_path):
    a = machines[0]

    def relicense(packages):
        for e in packages.values():
            e["license"] = "MIT"
    _dir_ring_with(a, tmp_path, relicense)
    with pytest.raises(StudioError) as e:
        publishing.ring_fetch(a, "user/demo/windowed_median@1", ring="local", to=tmp_path / "got")
    assert "license: the index says 'MIT', the package says 'Apache-2.0'" in e.value.message
    assert not (tmp_path / "got").exists()


@pytest.mark.slow
def test_a_hash_collision_between_ids_is_refused(machines, tmp_path):
    a = machines[0]

    def collide(packages):
        (h, e), = packages.items()
        packages["0" * 64] = {**e, "id": "user/evil/windowed_median@1"}   # another id claiming the same hash
    _dir_ring_with(a, tmp_path, collide)
    with pytest.raises(StudioError) as e:
        publishing.ring_fetch(a, "user/demo/windowed_median@1", ring="local", to=tmp_path / "got")
    assert "hash collision between ids" in e.value.message and "user/evil/windowed_median@1" in e.value.message


def test_a_private_op_never_enters_a_ring(machines, tmp_path):
    a = machines[0]
    pkg = _story_on(a, tmp_path)
    with pytest.raises(StudioError, match="private"):
        publishing.publish_to_ring(a, pkg, "team")


@pytest.mark.slow
def test_an_untrusted_ring_reference_never_executes(machines, tmp_path):
    """A reference that announces itself when it runs: fetched, it does not run (untrusted); the same
    content trusted does run, so the silence before was the trust check, not a reference that cannot run."""
    a, b, _ = machines
    root = copy_package(MEDIAN, tmp_path / "A" / "ops" / "loud", {
        "reference.py": [("import numpy as np", "import numpy as np\nraise RuntimeError('LOUD-REFERENCE-RAN')")]})
    _authored_in(a, root)
    publishing.publish(a, load_package(root), visibility="workspace", profile_id="p")
    publishing.publish_to_ring(a, load_package(root), "team")
    got = publishing.ring_fetch(b, "user/demo/windowed_median@1")
    fetched = load_package(got["path"])
    for attempt in (lambda: publishing.verify_here(b, fetched), lambda: actions.conform(b, fetched)):
        with pytest.raises(StudioError) as e:
            attempt()
        assert "not trusted" in e.value.message and "LOUD-REFERENCE-RAN" not in e.value.format()
    b.trust.trust(fetched)
    with pytest.raises(StudioError) as e:                 # negative control: trusted, it runs (and fails loudly)
        publishing.verify_here(b, fetched)
    assert "LOUD-REFERENCE-RAN" in e.value.format()


@pytest.mark.slow
def test_cli_ring_round_trip_between_two_user_folders(tmp_path):
    """`scellis ring add|list|fetch` and `publish --ring` as a user types them, two SCELLIS_HOMEs."""
    import sys
    remote = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    src = copy_package(MEDIAN, tmp_path / "wm")

    def scellis(home, *args):
        env = {**GIT_ENV, "SCELLIS_HOME": str(home)}
        return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=600)
    home_a = os.environ["SCELLIS_HOME"]                     # the test's own folder: src is authored there
    assert scellis(home_a, "ring", "add", "team", remote).returncode == 0
    r = scellis(home_a, "publish", src, "--visibility", "private", "--ring", "team")
    assert r.returncode == 2 and "workspace or public" in r.stderr
    r = scellis(home_a, "publish", src, "--visibility", "workspace", "--ring", "team")
    assert r.returncode == 0, r.stderr
    assert "pushed" in r.stdout
    home_b = tmp_path / "B"
    assert scellis(home_b, "ring", "add", "team", remote).returncode == 0
    r = scellis(home_b, "ring", "list", "median")
    assert "user/demo/windowed_median@1" in r.stdout and "workspace" in r.stdout
    r = scellis(home_b, "ring", "fetch", "user/demo/windowed_median@1")
    assert r.returncode == 0, r.stderr
    assert "untrusted" in r.stdout and "every file matches the index" in r.stdout


@pytest.mark.slow
def test_an_extra_file_or_a_recomputed_index_is_still_refused(machines, tmp_path):
    """A file slipped in beside the package, or an index whose file digest was recomputed to match a
    changed file: the first is not in the index, the second no longer hashes to the entry's content hash."""
    a = machines[0]
    ring = _dir_ring_with(a, tmp_path, lambda packages: None)
    (h, e), = json.loads((ring / "index.json").read_text())["packages"].items()
    extra = ring / "packages" / h / "op" / "helper.py"
    extra.write_text("print('hi')\n")
    with pytest.raises(StudioError, match="helper.py: in the ring but not in the index"):
        publishing.ring_fetch(a, "user/demo/windowed_median@1", ring="local", to=tmp_path / "got")
    extra.unlink()
    kernel = ring / "packages" / h / "op" / "forward.wgsl"
    kernel.write_bytes(kernel.read_bytes() + b"\n")
    index = json.loads((ring / "index.json").read_text())
    import hashlib
    index["packages"][h]["files"]["forward.wgsl"] = hashlib.sha256(kernel.read_bytes()).hexdigest()
    (ring / "index.json").write_text(json.dumps(index))
    with pytest.raises(StudioError, match="content hash: the index says"):
        publishing.ring_fetch(a, "user/demo/windowed_median@1", ring="local", to=tmp_path / "got")
    assert not (tmp_path / "got").exists()


@pytest.mark.slow
def test_the_corpus_identity_travels_and_must_regenerate(machines, tmp_path):
    a = machines[0]

    def reseed(packages):
        for e in packages.values():
            assert {"seed", "signature", "hash", "cases"} <= e["corpus"].keys()
            e["corpus"]["seed"] = 7
            if "seeds" in e["corpus"]:                # the run's seeds follow its first one
                e["corpus"]["seeds"] = [7 + i for i in range(len(e["corpus"]["seeds"]))]
    _dir_ring_with(a, tmp_path, reseed)
    with pytest.raises(StudioError, match="does not regenerate here"):
        publishing.ring_fetch(a, "user/demo/windowed_median@1", ring="local", to=tmp_path / "got")


@pytest.mark.slow
def test_ring_list_filters_by_query_and_fetch_by_hash(machines, tmp_path):
    a = machines[0]
    _dir_ring_with(a, tmp_path, lambda packages: None)
    assert publishing.ring_list(a, "nothing-like-this") == []
    (row,) = publishing.ring_list(a, "Apache")
    got = publishing.ring_fetch(a, f"{row['id']}@{row['hash'][:12]}", ring="local", to=tmp_path / "got")
    assert got["hash"] == row["hash"] and got["status"] == "fetched"
    again = publishing.ring_fetch(a, f"{row['id']}@{row['hash'][:12]}", ring="local", to=tmp_path / "got")
    assert again["status"] == "already here"
    with pytest.raises(StudioError, match="holds no"):
        publishing.ring_fetch(a, f"{row['id']}@{'f' * 12}", ring="local", to=tmp_path / "other")


def test_an_unreachable_git_ring_is_refused_and_not_remembered(ctx, tmp_path):
    with pytest.raises(StudioError, match="git fetch"):
        publishing.ring_add(ctx, "nowhere", str(tmp_path / "missing.git"))
    assert "nowhere" not in publishing.rings(ctx).all()
    with pytest.raises(StudioError, match="no ring named"):
        publishing.ring_fetch(ctx, "user/demo/windowed_median@1", ring="nowhere")
