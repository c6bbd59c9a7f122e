"""Trust: whose Python may run on this machine.

An op's reference.py is Python. The engine runs it (always in a confined process, see
sandbox.py) only when its package's **content hash** is trusted:

- ``product``: the package lies under the product's own folders (``studio/resources/ops``, the
  builtins, and the shipped ``examples/``), or has byte for byte the content of one of them;
- ``authored``: it was created or saved through the Studio or the CLI on this machine
  (``package.save_package`` records the hash it wrote);
- ``trusted``: the user trusted that exact content (``scellis trust PATH``, or the Studio's
  trust action).

Anything else, e.g. a folder someone sent you, is ``untrusted`` and its reference never runs.
Trust is keyed by content hash, so a trusted package that changes by one byte is untrusted
again. The store is ``trust.json`` in the user data folder (``$SCELLIS_HOME`` when set, else
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
from ..contract.package import MANIFEST, load_package
from ..errors import StudioError
from ..resources import BUILTINS, EXAMPLES

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


class TrustStore:
    """The trust decisions of one user data folder (``home``)."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self._cached: tuple[tuple, dict] | None = None
        self._products: dict[str, str] | None = None

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

    @contextmanager
    def _locked(self):
        import fcntl
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".trust.lock", "a") as lock:          # atomic-ok: an empty lock file, never read
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, entries: dict) -> None:
        write_text(self.path, json.dumps({"schema": SCHEMA, "entries": entries}, indent=2, sort_keys=True) + "\n")

    def _record(self, hash_: str, kind: str, op: str | None, path: Path | str | None) -> None:
        with self._locked():
            entries = dict(self._read())
            entries[hash_] = {"kind": kind, "op": op, "path": str(path) if path is not None else None,
                              "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
            self._write(entries)

    # ---------------------------------------------------------------- decisions
    def record_authored(self, hash_: str, *, op: str | None = None, path: Path | str | None = None) -> None:
        """The Studio or CLI wrote a package with this content hash on this machine."""
        if self._read().get(hash_, {}).get("kind") == "authored":
            return
        self._record(hash_, "authored", op, path)

    def trust(self, pkg) -> TrustStatus:
        """The user's decision: allow this package's exact content (its hash) to run here."""
        return self.trust_content(pkg.root, pkg.hash, op=pkg.id)

    def trust_content(self, root: Path | None, hash_: str, *, op: str | None = None) -> TrustStatus:
        """The same decision for content that may not load yet (a draft in the Studio)."""
        st = self.status_of(root, hash_)
        if st.ok:
            return st
        self._record(hash_, "trusted", op, Path(root).resolve() if root is not None else None)
        return self.status_of(root, hash_)

    def revoke(self, pkg) -> bool:
        """Forget a trusted or authored hash; True when there was one."""
        with self._locked():
            entries = dict(self._read())
            if entries.pop(pkg.hash, None) is None:
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
        return self.status_of(pkg.root, pkg.hash)

    def status_of(self, root: Path | None, hash_: str) -> TrustStatus:
        """The trust of a folder's content, also for a draft that does not load yet (``root`` None:
        an untitled document, judged by its content alone)."""
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
                     f"(or use Trust in the Studio). A later change to any file needs trusting again.")
        return st
