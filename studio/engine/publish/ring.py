"""The exchange ring: published packages stored by content hash with an index, in a local
directory or in a git repository driven through the ``git`` command (any git remote shares it).

Layout (docs/publishing.md)::

    index.json                          {"schema": "scellis-ring/1", "packages": {hash: entry}}
    packages/<hash>/op/<file>           the package's content files, byte for byte
    packages/<hash>/receipts/<file>     the publisher's receipts (foreign to everyone else)

An entry: id, version, hash, license, visibility, summary, description, authors, tolerance,
category, backward, subgradient, forked_from, files {path: sha256}, receipts {path: sha256},
corpus (the corpus identity and its hash, so anyone can regenerate it), published.

The rings a user knows are in ``rings.json`` of the user data folder; a git ring keeps its
working copy in ``rings/<name>/`` there (ours alone: reset to the remote before every use)."""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import re
import subprocess
from contextlib import contextmanager
from pathlib import Path

from ..atomic import write_many, write_text
from ..errors import StudioError
from ..records.reader import parse_json

SCHEMA = "scellis-ring/1"
CONFIG = "rings.json"
CONFIG_SCHEMA = "scellis-rings/1"
INDEX = "index.json"
BRANCH = "main"
GIT_TIMEOUT_S = 120
MAX_INDEX_BYTES = 64 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_ring_name(name: str) -> str:
    if not _NAME.fullmatch(name or ""):
        raise StudioError(f"ring name {name!r}: letters, digits, '.', '_' and '-' (at most 64)", field="NAME",
                          hint="e.g. scellis ring add team /path/to/ring")
    return name


def _is_git_url(url: str) -> bool:
    if re.match(r"^[a-z][a-z0-9+.-]*://", url) or re.match(r"^[^/\s]+@[^:\s]+:", url):
        return True
    p = Path(url)
    return url.endswith(".git") or ((p / "HEAD").is_file() and (p / "objects").is_dir()) or (p / ".git").exists()


class Rings:
    """The rings of one user data folder (``home``)."""

    def __init__(self, home: Path):
        self.home = Path(home)

    @property
    def path(self) -> Path:
        return self.home / CONFIG

    def all(self) -> dict[str, dict]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        data = parse_json(raw, str(self.path), what="the ring list", hint=f"fix or delete {self.path}")
        if not (isinstance(data, dict) and data.get("schema") == CONFIG_SCHEMA and isinstance(data.get("rings"), dict)):
            raise StudioError("the ring list is not a scellis ring list", file=str(self.path),
                              hint=f"delete {self.path} and add the rings again")
        return data["rings"]

    def add(self, name: str, url: str) -> dict:
        check_ring_name(name)
        kind = "git" if _is_git_url(url) else "dir"
        target = url if kind == "git" and not Path(url).exists() else str(Path(url).expanduser().resolve())
        if kind == "dir":
            Path(target).mkdir(parents=True, exist_ok=True)
        rings = dict(self.all())
        rings[name] = {"kind": kind, "url": target}
        self._ring(name, rings[name]).sync()     # one that cannot be reached is refused now, and not remembered
        write_text(self.path, json.dumps({"schema": CONFIG_SCHEMA, "rings": rings}, indent=2, sort_keys=True) + "\n")
        return rings[name]

    def open(self, name: str) -> "Ring":
        rings = self.all()
        if name not in rings:
            raise StudioError(f"no ring named {name!r}", field="--ring",
                              hint=("known rings: " + ", ".join(sorted(rings))) if rings else
                              "add one: scellis ring add NAME URL|PATH")
        return self._ring(name, rings[name])

    def _ring(self, name: str, spec: dict) -> "Ring":
        if spec.get("kind") == "git":
            return GitRing(name, spec["url"], self.home / "rings" / name)
        return DirRing(name, Path(spec["url"]))


class Ring:
    """A directory holding index.json and packages/ (a git ring's working copy is one)."""

    def __init__(self, name: str, root: Path):
        self.name, self.root = name, Path(root)

    def sync(self) -> None:
        """Bring the ring's copy up to date (a directory ring is always current)."""

    def index(self) -> dict[str, dict]:
        path = self.root / INDEX
        if not path.exists():
            return {}
        from ..contract.package import read_regular
        raw = read_regular(path, MAX_INDEX_BYTES, what="the ring's index")
        data = parse_json(raw, str(path), what="the ring's index", hint="the ring is damaged: ask its owner")
        if not (isinstance(data, dict) and data.get("schema") == SCHEMA and isinstance(data.get("packages"), dict)):
            raise StudioError("not a scellis ring index", file=str(path), hint="is this the right ring?")
        return data["packages"]

    def package_dir(self, hash_: str) -> Path:
        return self.root / "packages" / hash_

    def _store(self, entry: dict, files: dict[str, bytes], receipts: dict[str, bytes]) -> bool:
        """Write the package and its index entry; False when this exact entry was there already."""
        index = dict(self.index())
        old = index.get(entry["hash"])
        if old is not None and old.get("id") != entry["id"]:
            raise StudioError(f"hash collision between ids: the ring holds {old.get('id')} under content hash "
                              f"{entry['hash'][:16]}, which {entry['id']} has too", field="hash",
                              hint="this cannot happen for genuine content (op.toml holds the id): the ring is damaged")
        same = old is not None and {k: v for k, v in old.items() if k != "published"} == \
            {k: v for k, v in entry.items() if k != "published"}
        if same:
            return False
        base = self.package_dir(entry["hash"])
        staged = {base / "op" / rel: data for rel, data in files.items()}
        staged.update({base / "receipts" / rel: data for rel, data in receipts.items()})
        write_many(staged)
        index[entry["hash"]] = entry
        write_text(self.root / INDEX, json.dumps({"schema": SCHEMA, "packages": index}, indent=1, sort_keys=True) + "\n")
        return True

    def publish(self, entry: dict, files: dict[str, bytes], receipts: dict[str, bytes]) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        with _locked(self.root / ".scellis-ring.lock"):
            return "stored" if self._store(entry, files, receipts) else "already in the ring"

    def where(self) -> str:
        return str(self.root)


class DirRing(Ring):
    kind = "dir"


class GitRing(Ring):
    """A git repository as a ring: the working copy in the user data folder, the remote anywhere."""
    kind = "git"

    def __init__(self, name: str, url: str, root: Path):
        super().__init__(name, root)
        self.url = url

    def where(self) -> str:
        return self.url

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run_git(self.root, *args, check=check)

    def sync(self) -> None:
        if not (self.root / ".git").is_dir():
            self.root.mkdir(parents=True, exist_ok=True)
            self.git("init", "-q")
            self.git("remote", "add", "origin", self.url)
        self.git("remote", "set-url", "origin", self.url)
        self.git("fetch", "-q", "--prune", "origin")
        if self.git("rev-parse", "-q", "--verify", f"refs/remotes/origin/{BRANCH}", check=False).returncode == 0:
            self.git("checkout", "-q", "-B", BRANCH, f"origin/{BRANCH}")
            self.git("reset", "-q", "--hard", f"origin/{BRANCH}")
        else:
            self.git("symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
        self.git("clean", "-q", "-f", "-d", "-x", "-e", ".scellis-ring.lock")

    def publish(self, entry: dict, files: dict[str, bytes], receipts: dict[str, bytes]) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        with _locked(self.root.parent / f".{self.name}.lock"):
            for _ in range(3):                     # someone else pushed in between: start again from theirs
                self.sync()
                if not self._store(entry, files, receipts):
                    return "already in the ring"
                self.git("add", "-A", "--", INDEX, "packages")
                self.git("commit", "-q", "-m", f"publish {entry['id']} ({entry['hash'][:16]})")
                if self.git("push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}", check=False).returncode == 0:
                    self._name_head()
                    return "pushed"
            raise StudioError(f"could not push to the ring {self.name} ({self.url}) after 3 tries", field="--ring",
                              hint="check the remote (access rights, network) and publish again")


    def _name_head(self) -> None:
        """A remote on this machine (a bare repository, as ``git init --bare`` makes it) names
        ``master`` as its HEAD, so a plain ``git clone`` of it would check out nothing: point its
        HEAD at the ring's branch, unless HEAD names a branch that exists (someone's own default
        branch is left alone). A remote elsewhere cannot be changed by a push: clone it with
        ``git clone -b main`` (docs/publishing.md)."""
        url = self.url.removeprefix("file://")
        if not Path(url).is_dir():
            return
        git_dir = ("--git-dir", str(Path(url).resolve()))
        head = run_git(self.root, *git_dir, "symbolic-ref", "-q", "HEAD", check=False)
        ref = head.stdout.strip()
        if head.returncode == 0 and ref != f"refs/heads/{BRANCH}" and \
                run_git(self.root, *git_dir, "rev-parse", "-q", "--verify", ref, check=False).returncode != 0:
            run_git(self.root, *git_dir, "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}", check=False)


def run_git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``git`` with no prompt and a time limit. Commits carry the user's git identity; a user
    without one commits as ``scellis ring`` (set only then: the environment would override theirs)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""}
    if args and args[0] == "commit" and not _has_identity(cwd, env):
        for who in ("AUTHOR", "COMMITTER"):
            env.setdefault(f"GIT_{who}_NAME", "scellis ring")
            env.setdefault(f"GIT_{who}_EMAIL", "ring@scellis.invalid")
    try:
        res = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise StudioError("the git command is not installed", hint="install git to use a git ring") from None
    except subprocess.TimeoutExpired:
        raise StudioError(f"git {args[0]} took longer than {GIT_TIMEOUT_S} s", file=str(cwd),
                          hint="check the remote and the network") from None
    if check and res.returncode != 0:
        raise StudioError(f"git {' '.join(args[:2])} failed: {(res.stderr or res.stdout).strip()[:800]}",
                          file=str(cwd), hint="check the ring's URL and your access to it")
    return res


def _has_identity(cwd: Path, env: dict) -> bool:
    if env.get("GIT_AUTHOR_EMAIL") or env.get("EMAIL"):
        return True
    res = subprocess.run(["git", "config", "--get", "user.email"], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return res.returncode == 0 and bool(res.stdout.strip())


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:            # atomic-ok: an empty lock file, never read
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
