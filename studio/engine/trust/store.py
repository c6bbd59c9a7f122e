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
platformdirs' user_data_dir("scellis-studio")), written atomically under a lock.
"""
from __future__ import annotations

import datetime as _dt
import json
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..atomic import write_text
from ..errors import StudioError
from ..home import studio_home

SCHEMA = "scellis-trust/1"
STORE = "trust.json"
LEVELS = ("product", "authored", "trusted", "untrusted")


trust_home = studio_home


def store_path() -> Path:
    return trust_home() / STORE


def product_roots() -> list[Path]:
    from ..contract.catalog import BUILTINS, EXAMPLES
    return [BUILTINS, EXAMPLES]


@dataclass(frozen=True)
class TrustStatus:
    level: str          # product | authored | trusted | untrusted
    reason: str

    @property
    def ok(self) -> bool:
        return self.level != "untrusted"


# ------------------------------------------------------------------ the store
_cache: dict[str, tuple[tuple, dict]] = {}


def _read_store(path: Path | None = None) -> dict:
    path = path or store_path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _cache.get(str(path))
    if hit and hit[0] == key:
        return hit[1]
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
            raise ValueError("not a scellis trust store")
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise StudioError(f"the trust store is unreadable: {e}", file=str(path),
                          hint="delete it; packages you trusted will ask to be trusted again") from None
    entries = {k: v for k, v in data["entries"].items() if isinstance(v, dict)}
    _cache[str(path)] = (key, entries)
    return entries


@contextmanager
def _locked():
    import fcntl
    home = trust_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".trust.lock", "a") as lock:          # atomic-ok: an empty lock file, never read
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_store(entries: dict) -> None:
    write_text(store_path(), json.dumps({"schema": SCHEMA, "entries": entries}, indent=2, sort_keys=True) + "\n")


def _record(hash_: str, kind: str, op: str | None, path: Path | str | None) -> None:
    with _locked():
        entries = dict(_read_store())
        entries[hash_] = {"kind": kind, "op": op, "path": str(path) if path is not None else None,
                          "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        _write_store(entries)


def record_authored(hash_: str, *, op: str | None = None, path: Path | str | None = None) -> None:
    """The Studio or CLI wrote a package with this content hash on this machine."""
    if _read_store().get(hash_, {}).get("kind") == "authored":
        return
    _record(hash_, "authored", op, path)


def trust(pkg) -> TrustStatus:
    """The user's decision: allow this package's exact content (its hash) to run here."""
    st = status(pkg)
    if st.ok:
        return st
    _record(pkg.hash, "trusted", pkg.id, pkg.root.resolve())
    return status(pkg)


def revoke(pkg) -> bool:
    """Forget a trusted or authored hash; True when there was one."""
    with _locked():
        entries = dict(_read_store())
        if entries.pop(pkg.hash, None) is None:
            return False
        _write_store(entries)
        return True


def entries() -> dict[str, dict]:
    return dict(_read_store())


# ------------------------------------------------------------------ judging a package
def _inside(root: Path, base: Path) -> bool:
    try:
        return root.resolve().is_relative_to(base.resolve())
    except OSError:
        return False


@lru_cache(maxsize=1)
def _product_hashes() -> dict[str, str]:
    from ..contract.package import MANIFEST, load_package
    out = {}
    for base in product_roots():
        for manifest in sorted(base.rglob(MANIFEST)) if base.is_dir() else []:
            try:
                pkg = load_package(manifest.parent)
            except StudioError:
                continue
            out[pkg.hash] = str(pkg.root)
    return out


def status(pkg) -> TrustStatus:
    for base in product_roots():
        if _inside(pkg.root, base):
            return TrustStatus("product", f"shipped with Scellis Studio ({base.name}/)")
    entry = _read_store().get(pkg.hash)
    if entry and entry.get("kind") in ("authored", "trusted"):
        how = "authored on this machine" if entry["kind"] == "authored" else "trusted by you"
        return TrustStatus(entry["kind"], f"{how} ({entry.get('at', '?')})")
    same = _product_hashes().get(pkg.hash)
    if same:
        return TrustStatus("product", f"byte for byte the content of the shipped package {same}")
    here = str(pkg.root.resolve())
    earlier = [e for e in _read_store().values() if e.get("path") == here]
    why = ("it changed since it was last trusted or saved here" if earlier else
           "it was not written on this machine and nobody trusted it")
    return TrustStatus("untrusted", why)


def require_trusted(pkg) -> TrustStatus:
    """Raise a StudioError naming the package and the command that trusts it, unless trusted."""
    st = status(pkg)
    if not st.ok:
        raise StudioError(
            f"{pkg.id} is not trusted, so its Python reference will not run: {st.reason} "
            f"(content hash {pkg.hash[:16]})",
            file=pkg.reference_path, field="trust",
            hint=f"read {pkg.reference_path}; if you trust it, run `scellis trust {pkg.root}` "
                 f"(or use Trust in the Studio). A later change to any file needs trusting again.")
    return st
