"""Trust: whose Python may run on this machine.

An op's reference.py is Python. The engine runs it (always in a confined process, see
sandbox.py) only when its package's **content hash** is trusted:

- ``product``: the package lies under the product's own folders (``resources/ops``, the
  builtins, and the shipped ``examples/``), or has byte for byte the content of one of them;
- ``authored``: it was created or saved through the Studio or the CLI on this machine
  (``package.save_package`` records the hash it wrote);
- ``trusted``: the user trusted that exact content (``scellis trust PATH``, or the Studio's
  trust action).

Anything else, e.g. a folder someone sent you, is ``untrusted`` and its reference never runs.
A decision is recorded for the package's content hash and for its **reference hash** (code.py:
the files its confined reference process receives), and either admits it: editing a kernel,
the bindings or the tolerance keeps trust, while a package whose Python changes by one byte is
untrusted again. The store is ``trust.json`` in the user data folder (``$SCELLIS_HOME`` when set, else
platformdirs' user_data_dir("scellis-studio")), written atomically under a lock. A
``TrustStore`` is an object held by the process's Context, never module state.
"""
from __future__ import annotations

import datetime as _dt
import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_text
from ..contract.package import MANIFEST, content_hash, load_package, read_files
from ..errors import StudioError
from ..resources import BUILTINS, EXAMPLES
from .code import code_hash

SCHEMA = "scellis-trust/1"
STORE = "trust.json"
LEVELS = ("product", "authored", "trusted", "untrusted")
PRODUCT_ROOTS = (BUILTINS, EXAMPLES)


@dataclass(frozen=True)
class TrustStatus:
    level: str          # product | authored | trusted | untrusted
    reason: str

    @property
    def ok(self) -> bool:
        return self.level != "untrusted"


def _inside(root: Path, base: Path) -> bool:
    try:
        return root.resolve().is_relative_to(base.resolve())
    except OSError:
        return False


def flock_holders(fd: int) -> list[int]:
    """The pids holding a flock on the open file ``fd``, from /proc/locks (Linux; psutil does not
    read locks): [] where that cannot be read."""
    import os
    st = os.fstat(fd)
    ino = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = set()
    try:
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == ino and parts[4].isdigit():
                    pids.add(int(parts[4]))
    except OSError:
        pass
    return sorted(pids)


def _holders(fd: int) -> str:
    """Who holds the flock on an open file: 'process 123 (python3)'."""
    import psutil
    names = []
    for pid in flock_holders(fd):
        try:
            names.append(f"process {pid} ({psutil.Process(pid).name()})")
        except psutil.Error:
            names.append(f"process {pid}")
    return ", ".join(names) or "another process"


class TrustStore:
    """The trust decisions of one user data folder (``home``)."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self._cached: tuple[tuple, dict] | None = None
        self._products: dict[str, str] | None = None
        self._codes: dict[str, str] = {}      # content hash -> reference hash (a function of the content)

    @property
    def path(self) -> Path:
        return self.home / STORE

    # ---------------------------------------------------------------- the file
    def _read(self) -> dict:
        path = self.path
        try:
            st = path.stat()
        except FileNotFoundError:
            return {}
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._cached and self._cached[0] == key:
            return self._cached[1]
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
            if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
                raise ValueError("not a scellis trust store")
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise StudioError(f"the trust store is unreadable: {e}", file=str(path),
                              hint="delete it; packages you trusted will ask to be trusted again") from None
        entries = {k: v for k, v in data["entries"].items() if isinstance(v, dict)}
        self._cached = (key, entries)
        return entries

    lock_wait_s = 10.0      # how long a writer waits for another one before saying who holds the lock

    @contextmanager
    def _locked(self):
        """The store's writers take turns under an ``flock``. The kernel drops a lock with the last
        descriptor of whoever held it, so no dead process holds it; a live one that keeps it (a
        stuck process of this user) is named after ``lock_wait_s``, never waited on for ever.
        (A reference host cannot take it: it cannot even open the Scellis folder, Landlock.)"""
        import fcntl
        import time
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / ".trust.lock"
        with open(path, "a") as lock:          # atomic-ok: an empty lock file, never read
            deadline = time.monotonic() + self.lock_wait_s
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StudioError(f"the trust store is locked by {_holders(lock.fileno())} and was not "
                                          f"released within {self.lock_wait_s:g} s", file=str(path),
                                          hint="end that process (or wait for it), then try again") from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, entries: dict) -> None:
        write_text(self.path, json.dumps({"schema": SCHEMA, "entries": entries}, indent=2, sort_keys=True) + "\n")

    def _record(self, hash_: str, kind: str, op: str | None, path: Path | str | None, *,
                code: str | None = None) -> None:
        with self._locked():
            entries = dict(self._read())
            entry = {"kind": kind, "op": op, "path": str(path) if path is not None else None,
                     "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
            entries[hash_] = entry
            if code is not None:            # the reference hash: the Python this decision admits
                entries[code] = {**entry, "scope": "reference", "package": hash_}
            self._write(entries)

    # ---------------------------------------------------------------- decisions
    def record_authored(self, hash_: str, *, op: str | None = None, path: Path | str | None = None) -> None:
        """The Studio or CLI wrote a package with this content hash on this machine."""
        code = self._code_of(Path(path), hash_, None) if path is not None else None
        have = self._read()
        if have.get(hash_, {}).get("kind") == "authored" and (code is None or code in have):
            return
        self._record(hash_, "authored", op, path, code=code)

    def trust(self, pkg) -> TrustStatus:
        """The user's decision: allow this package's exact content (its hash) to run here."""
        return self.trust_content(pkg.root, pkg.hash, op=pkg.id, files=pkg.files)

    def trust_content(self, root: Path | None, hash_: str, *, op: str | None = None,
                      files: dict[str, bytes] | None = None) -> TrustStatus:
        """The same decision for content that may not load yet (a draft in the Studio). ``files``:
        the content itself (else the folder's, when it still hashes to ``hash_``), whose reference
        hash is trusted too."""
        code = self._code_of(root, hash_, files)
        st = self.status_of(root, hash_, code=code)
        if st.ok:
            return st
        self._record(hash_, "trusted", op, Path(root).resolve() if root is not None else None, code=code)
        return self.status_of(root, hash_, code=code)

    @staticmethod
    def _code_of(root: Path | None, hash_: str, files: dict[str, bytes] | None) -> str | None:
        """The reference hash of the content whose package hash is ``hash_``: from ``files``, or
        from the folder when it holds exactly that content; None when neither is known."""
        if files is None and root is not None:
            try:
                files = read_files(root)
            except (StudioError, OSError):
                return None
        if files is None or content_hash(files) != hash_:
            return None
        return code_hash(files)

    def revoke(self, pkg) -> bool:
        """Forget a trusted or authored hash; True when there was one."""
        with self._locked():
            entries = dict(self._read())
            gone = [entries.pop(h, None) for h in (pkg.hash, code_hash(pkg.files))]   # its Python too
            if not any(g is not None for g in gone):
                return False
            self._write(entries)
            return True

    def entries(self) -> dict[str, dict]:
        return dict(self._read())

    # ---------------------------------------------------------------- judging a package
    def product_hashes(self) -> dict[str, str]:
        """Content hash → folder of every shipped package (computed once per store)."""
        if self._products is None:
            out = {}
            for base in PRODUCT_ROOTS:
                for manifest in sorted(base.rglob(MANIFEST)) if base.is_dir() else []:
                    try:
                        pkg = load_package(manifest.parent)
                    except StudioError:
                        continue
                    out[pkg.hash] = str(pkg.root)
            self._products = out
        return self._products

    def status(self, pkg) -> TrustStatus:
        code = self._codes.get(pkg.hash)
        if code is None:             # asked before every reference call: hashed once per content
            code = self._codes[pkg.hash] = code_hash(pkg.files)
        return self.status_of(pkg.root, pkg.hash, code=code)

    def status_of(self, root: Path | None, hash_: str, *, code: str | None = None) -> TrustStatus:
        """The trust of a folder's content, also for a draft that does not load yet (``root`` None:
        an untitled document, judged by its content alone). ``code``: its reference hash (code.py),
        which admits it when that Python was trusted or authored here, whatever else changed. (The
        ``product`` level stays by whole content: a package from elsewhere is untrusted until
        someone here trusts it, even when its Python is a shipped package's.)"""
        for base in PRODUCT_ROOTS if root is not None else ():
            if _inside(Path(root), base):
                return TrustStatus("product", f"shipped with Scellis Studio ({base.name}/)")
        entry = self._read().get(hash_)
        if entry and entry.get("kind") in ("authored", "trusted"):
            how = "authored on this machine" if entry["kind"] == "authored" else "trusted by you"
            return TrustStatus(entry["kind"], f"{how} ({entry.get('at', '?')})")
        same = self.product_hashes().get(hash_)
        if same:
            return TrustStatus("product", f"byte for byte the content of the shipped package {same}")
        entry = self._read().get(code) if code else None
        if entry and entry.get("kind") in ("authored", "trusted") and entry.get("scope") == "reference":
            how = "authored on this machine" if entry["kind"] == "authored" else "trusted by you"
            return TrustStatus(entry["kind"], f"its Python reference was {how} ({entry.get('at', '?')}); "
                                              f"only kernels or other non-code fields changed since")
        here = str(Path(root).resolve()) if root is not None else None
        earlier = [e for e in self._read().values() if here is not None and e.get("path") == here]
        why = ("it changed since it was last trusted or saved here" if earlier else
               "it was not written on this machine and nobody trusted it")
        return TrustStatus("untrusted", why)

    def require_trusted(self, pkg) -> TrustStatus:
        """Raise a StudioError naming the package and the command that trusts it, unless trusted."""
        st = self.status(pkg)
        if not st.ok:
            raise StudioError(
                f"{pkg.id} is not trusted, so its Python reference will not run: {st.reason} "
                f"(content hash {pkg.hash[:16]})",
                file=pkg.reference_path, field="trust",
                hint=f"read {pkg.reference_path}; if you trust it, run `scellis trust {pkg.root}` "
                     f"(or use Trust in the Studio). A later change to its Python needs trusting again.")
        return st
