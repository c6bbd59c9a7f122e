"""The catalog: one lookup for builtin and user ops alike."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StudioError
from ..home import studio_home
from ..resources import BUILTINS, EXAMPLES
from .contract import OpId
from .package import MANIFEST, OpPackage, load_package


def user_ops_dir() -> Path:
    return studio_home() / "ops"


def origin_of(root: Path) -> str:
    """``builtin`` for a package shipped in the product's builtin folder, else ``user``: decided
    by where the op came from, never by its namespace. The one place that says it."""
    try:
        return "builtin" if Path(root).resolve().is_relative_to(BUILTINS.resolve()) else "user"
    except OSError:
        return "user"


def origin(pkg: OpPackage) -> str:
    return origin_of(pkg.root)


@dataclass
class Catalog:
    roots: list[Path]
    problems: list[StudioError] = field(default_factory=list)
    _ops: dict[str, OpPackage] | None = None

    @classmethod
    def default(cls, extra: list[Path] | None = None, *, home: Path | None = None) -> "Catalog":
        """Builtins, the shipped examples, the user's own ops folder (of ``home``, default the
        user data folder), then any extra roots."""
        ops = Path(home) / "ops" if home is not None else user_ops_dir()
        return cls([BUILTINS, EXAMPLES, ops, *(extra or [])])

    def _scan(self) -> dict[str, OpPackage]:
        if self._ops is None:
            self._ops = {}
            for root in self.roots:
                if not root.is_dir():
                    continue
                for manifest in sorted(root.rglob(MANIFEST)):
                    try:
                        pkg = load_package(manifest.parent)
                    except StudioError as e:
                        self.problems.append(e)
                        continue
                    if pkg.id in self._ops:
                        self.problems.append(StudioError(
                            f"op id {pkg.id} is defined twice; keeping {self._ops[pkg.id].root}",
                            file=str(manifest), field="id", hint="give one of them another id or version"))
                        continue
                    self._ops[pkg.id] = pkg
        return self._ops

    def add(self, pkg: OpPackage) -> None:
        self._scan()[pkg.id] = pkg

    def list(self) -> list[OpPackage]:
        return sorted(self._scan().values(), key=lambda p: p.id)

    def resolve(self, ref: str) -> OpPackage:
        """An op id (``ns/author/name@v``; without ``@v`` the highest version) or a package path."""
        p = Path(ref)
        if (p / MANIFEST).is_file() or p.name == MANIFEST:
            return load_package(p)
        ops = self._scan()
        if ref in ops:
            return ops[ref]
        if "@" not in ref:
            versions = [pkg for pkg in ops.values() if pkg.contract.id.unversioned == ref]
            if versions:
                return max(versions, key=lambda pkg: pkg.contract.id.version)
        else:
            OpId.parse(ref, field="op id")
        near = difflib.get_close_matches(ref, list(ops), n=3, cutoff=0.6)
        raise StudioError(f"no op '{ref}' in the catalog", field="op id",
                          hint=("did you mean " + ", ".join(near[:3]) + "?") if near else "run `scellis ops list`")
