"""The catalog: one lookup for builtin and user ops alike."""
from __future__ import annotations

import difflib
import os
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


BUILTIN_NAMESPACE = "core"


def check_user_id(op_id: str, *, field: str = "id") -> None:
    """Refuse an id a user's op may not take: the namespace ``core/`` is the builtins' (the ops
    shipped in the product's builtin folder). Naming only; nothing at run time asks it."""
    oid = OpId.parse(op_id, field=field)
    if oid.namespace == BUILTIN_NAMESPACE:
        raise StudioError(f"{op_id}: the namespace {BUILTIN_NAMESPACE}/ is the builtins' own; "
                          "a user's op takes another", field=field, hint=f"use your own namespace, e.g. user/you/{oid.name}@{oid.version}")


def _package_of(real: Path) -> Path | None:
    """The package folder ``real`` lies strictly inside (an ancestor holding an op.toml), if any."""
    return next((a for a in real.parents if (a / MANIFEST).is_file()), None)


def manifests(root: Path, problems: list[StudioError]) -> list[Path]:
    """Every op.toml under ``root``, in path order, symlinked folders followed (a package kept
    elsewhere and linked into an ops folder is found). A link is not followed, and a problem says
    why, when it loops (its target holds the folder the link is in) or points into a package rather
    than at one (into the package it sits in, or into the middle of another): that package is
    found at its own folder, once."""
    found: list[Path] = []
    seen: set[Path] = set()

    def refuse(link: Path, real: Path, why: str) -> None:
        problems.append(StudioError(f"'{link}' is a symlink to {real}, {why}: not followed", file=str(link),
                                    hint="link the package's own folder from outside it, or remove the link"))

    def walk(d: Path, real_d: Path) -> None:
        if real_d in seen:
            return
        seen.add(real_d)
        if (d / MANIFEST).is_file():
            found.append(d / MANIFEST)
        try:
            names = sorted(e.name for e in os.scandir(d) if e.is_dir(follow_symlinks=True))
        except OSError:
            return
        for name in names:
            p = d / name
            if not p.is_symlink():
                walk(p, real_d / name)
                continue
            try:
                real = p.resolve(strict=True)
            except (OSError, RuntimeError):
                refuse(p, Path(os.readlink(p)), "which does not resolve (a loop of links, or a missing target)")
                continue
            if real_d.is_relative_to(real):
                refuse(p, real, "a folder on its own path (a loop)")
            elif (pkg := _package_of(real)) is not None:
                refuse(p, real, f"a folder inside the package {pkg}")
            else:
                walk(p, real)

    walk(root, root.resolve())
    return sorted(found)


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
                for manifest in manifests(root, self.problems):
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
