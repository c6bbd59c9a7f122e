"""Op packages on disk: a folder with op.toml, a reference and kernels; the content hash. The one
reader (``load_package`` for a package that loads, ``read_files`` for any draft) and the one
writer (``write_package``: validated paths, crash-safe) that the engine, the CLI and the app use."""
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..arrays import file_kind
from ..atomic import write_many
from ..errors import StudioError
from ..records.reader import read_regular
from .contract import Contract, build_contract
from .manifest import read_manifest, utf8_error

MANIFEST = "op.toml"
MAX_FILE_BYTES = 1 << 20          # a kernel or reference over 1 MiB is refused
MAX_FILES = 64
EXCLUDED_DIRS = {"receipts", "__pycache__"}


def package_files(root: Path) -> list[Path]:
    """Every regular file that is part of the content (receipts are *about* the content)."""
    files = []
    inside = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS and not d.startswith("."))
        for d in dirnames:                 # a symlinked folder is not walked; one leading out is refused
            link = Path(dirpath) / d
            if link.is_symlink() and not link.resolve().is_relative_to(inside):
                rel = link.relative_to(root).as_posix()
                raise StudioError(f"'{rel}' is a symlink leading outside the package folder", file=str(link),
                                  field=rel, hint="keep every file of the op inside its package folder")
        for name in sorted(filenames):
            if name.startswith(".") or name.endswith((".pyc", "~")):
                continue
            files.append(Path(dirpath) / name)
    return files


def _read_inside(root: Path, rel: str, field: str, manifest_file: str) -> bytes:
    p = root / rel
    try:
        real = p.resolve(strict=True)
    except (FileNotFoundError, OSError, ValueError):      # ValueError: a NUL in the name
        raise StudioError(f"{field} names '{rel}', which does not exist in the package",
                          file=manifest_file, field=field, hint=f"create {p} or fix the file name") from None
    if not real.is_relative_to(root.resolve()):
        raise StudioError(f"{field} '{rel}' leads outside the package folder", file=manifest_file, field=field,
                          hint="keep every file of the op inside its package folder (no symlinks out)")
    try:
        mode = os.stat(real).st_mode
    except OSError:
        mode = 0
    if not stat.S_ISREG(mode):                      # named in the manifest: the manifest is to blame
        raise StudioError(f"{field} '{rel}' is {file_kind(mode)}, not a regular file", file=manifest_file,
                          field=field, hint="an op package holds regular files only")
    return read_regular(real, MAX_FILE_BYTES, what=f"{field} '{rel}'", file=str(p), field=field)


def _no_link(root: Path, rel: str, manifest) -> None:
    """The reference is a file of the package itself: no part of its path is a symlink (one to a
    file inside would run bytes the package holds under another name; trust/code.py)."""
    p = root
    for part in rel.split("/"):
        p = p / part
        try:
            is_link = stat.S_ISLNK(os.lstat(p).st_mode)
        except OSError:
            return                              # missing: _read_inside names it
        if is_link:
            line, col = manifest.position("reference.file")
            raise StudioError(f"[reference] file '{rel}' is a symlink ({p.relative_to(root).as_posix()}): the "
                              "reference must be a Python file of the package itself", file=manifest.file,
                              line=line, col=col, field="reference.file",
                              hint=f"replace {p} by the file itself")


def _text(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise utf8_error(raw, e, file) from None


def content_hash(files: dict[str, bytes]) -> str:
    """sha256 over (path, bytes) pairs in sorted posix-path order: stable across machines and
    directory listing order; any byte of any file changes it."""
    h = hashlib.sha256(b"scellis-op-package/1\0")
    for rel in sorted(files):
        data = files[rel]
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class OpPackage:
    root: Path
    contract: Contract
    files: dict[str, bytes]          # posix relative path -> bytes, everything hashed
    reference_source: str
    kernel_source: str               # "" for a composite op (no kernel of its own)
    hash: str
    backward_source: str | None = None   # the device VJP kernel ([backward] kernel), if declared

    @property
    def id(self) -> str:
        return str(self.contract.id)

    @property
    def manifest_path(self) -> str:
        return str(self.root / MANIFEST)

    @property
    def kernel_path(self) -> str:
        k = self.contract.kernel
        return str(self.root / k.file) if k is not None else ""

    @property
    def backward_path(self) -> str:
        bk = self.contract.backward_kernel
        return str(self.root / bk.file) if bk is not None else ""

    @property
    def reference_path(self) -> str:
        return str(self.root / self.contract.reference_file)

    def part_hashes(self) -> dict[str, str]:
        c = self.contract
        return {"contract": sha256(self.files[MANIFEST]),
                "reference": sha256(self.files[c.reference_file]),
                "kernel": sha256(self.files[c.kernel.file] if c.kernel is not None else b""),
                "package": self.hash}

    def read_text(self, rel: str) -> str:
        return _text(_read_inside(self.root, rel, rel, self.manifest_path), str(self.root / rel))


def load_package(path: str | os.PathLike) -> OpPackage:
    root = Path(path)
    if root.is_file() and root.name == MANIFEST:
        root = root.parent
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise StudioError(f"no {MANIFEST} in {root}", file=str(root),
                          hint="an op package is a folder holding op.toml, reference.py and a .wgsl kernel")
    mfile = str(manifest_path)
    manifest = read_manifest(_read_inside(root, MANIFEST, "manifest", mfile), mfile)
    contract = build_contract(manifest)
    listed = package_files(root)
    if len(listed) > MAX_FILES:
        raise StudioError(f"package holds {len(listed)} files (limit {MAX_FILES})", file=str(root),
                          hint="remove files the op does not need: every file of the folder is part of its content")
    files: dict[str, bytes] = {}
    for p in listed:
        rel = p.relative_to(root).as_posix()
        files[rel] = _read_inside(root, rel, rel, mfile)
    ref = _read_inside(root, contract.reference_file, "reference.file", mfile)
    _no_link(root, contract.reference_file, manifest)
    files[contract.reference_file] = ref
    kernel_source = ""
    if contract.kernel is not None:
        kern = _read_inside(root, contract.kernel.file, "kernel.file", mfile)
        files[contract.kernel.file] = kern
        kernel_source = _text(kern, str(root / contract.kernel.file))
    backward_source = None
    if contract.backward_kernel is not None:
        bk = contract.backward_kernel.file
        raw = _read_inside(root, bk, "backward.kernel", mfile)
        files[bk] = raw
        backward_source = _text(raw, str(root / bk))
    return OpPackage(root=root, contract=contract, files=files,
                     reference_source=_text(ref, str(root / contract.reference_file)),
                     kernel_source=kernel_source, hash=content_hash(files), backward_source=backward_source)


def read_files(path: str | os.PathLike) -> dict[str, bytes]:
    """Every content file of a package folder, by posix relative path, under the same rules as
    load_package (count, size, no symlink out), without parsing the manifest: a draft that does
    not load yet still opens and hashes."""
    root = Path(path)
    if not (root / MANIFEST).is_file():
        raise StudioError(f"no {MANIFEST} in {root}", file=str(root),
                          hint="an op package is a folder holding op.toml, reference.py and a .wgsl kernel")
    listed = package_files(root)
    if len(listed) > MAX_FILES:
        raise StudioError(f"package holds {len(listed)} files (limit {MAX_FILES})", file=str(root),
                          hint="remove files the op does not need: every file of the folder is part of its content")
    files = {}
    for p in listed:
        rel = p.relative_to(root).as_posix()
        files[rel] = _read_inside(root, rel, rel, str(root / MANIFEST))
    return files


def folder_hash(path: str | os.PathLike) -> str:
    """The content hash of a package folder as load_package computes it."""
    return content_hash(read_files(path))


def write_package(path: str | os.PathLike, files: dict[str, bytes | str]) -> str:
    """Write (or overwrite) files of an op package crash-safely (studio/engine/atomic.py); works
    for drafts that do not load yet: nothing typed is lost. Returns the new content hash.
    Recording it as authored is the trust store's (studio/engine/services/actions.py, save_package)."""
    root = Path(path)
    staged = {}
    for rel, data in files.items():
        parts = Path(rel).parts
        if Path(rel).is_absolute() or not parts or any(p in ("..", "") for p in parts):
            raise StudioError(f"cannot save '{rel}': a package file must be a relative path inside the package",
                              file=str(root), field=rel)
        staged[root / rel] = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    root.mkdir(parents=True, exist_ok=True)
    write_many(staged)
    return folder_hash(root)
