"""Forking: the same content under a new id, with its lineage recorded (``forked_from``: the
source's id and content hash) and its license kept. The fork starts ``private`` unless asked
otherwise; an unlicensed op cannot be forked outside ``private``. Trust follows the code, not
the writer: the fork is recorded as authored here only when the source's code was trusted here
(the reference is the same bytes); a fork of an untrusted package is untrusted too."""
from __future__ import annotations

from pathlib import Path

from ..contract.catalog import check_user_id
from ..contract.contract import OpId
from ..contract.package import MANIFEST, OpPackage, load_package, write_package
from ..contract.toml_edit import set_values
from ..errors import StudioError
from .license import Licenses
from .visibility import require_shareable


def fork_files(pkg: OpPackage, new_id: str, *, visibility: str = "private",
               licenses: Licenses) -> dict[str, bytes]:
    """The fork's files: every content file of ``pkg``, op.toml with the new id, visibility and
    forked_from (the license as it was)."""
    OpId.parse(new_id, field="NEW_ID")
    if new_id == pkg.id:
        raise StudioError(f"a fork needs a new id, not {pkg.id}", field="NEW_ID",
                          hint=f"e.g. user/you/{pkg.contract.id.name}@1")
    check_user_id(new_id, field="NEW_ID")        # a fork is a user's op: core/ is the builtins' own
    try:
        require_shareable(licenses, visibility, pkg.contract.license, file=pkg.manifest_path)
    except StudioError as e:
        raise StudioError(f"{pkg.id} cannot be forked as {visibility}: {e.message}", file=e.file, field="license",
                          hint="fork it as private (the default), or ask its authors for a license") from None
    text = pkg.files[MANIFEST].decode("utf-8")
    edited = set_values(text, {"id": new_id, "visibility": visibility,
                                  "forked_from": {"id": pkg.id, "hash": pkg.hash}}, file=pkg.manifest_path)
    return {**pkg.files, MANIFEST: edited.encode("utf-8")}


def fork(pkg: OpPackage, new_id: str, dest: str | Path, *, trust, licenses: Licenses,
         visibility: str = "private") -> OpPackage:
    """Write the fork to ``dest`` (a folder that does not exist yet, or is empty)."""
    root = Path(dest)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise StudioError(f"{root} already exists", file=str(root), field="--to",
                          hint="fork into a new folder: --to DIR")
    files = fork_files(pkg, new_id, visibility=visibility, licenses=licenses)
    source_trusted = trust.status(pkg).ok
    new_hash = write_package(root, files)
    if source_trusted:
        trust.record_authored(new_hash, op=new_id, path=root.resolve())
    return load_package(root)


def default_fork_dir(home: Path, new_id: str) -> Path:
    """$SCELLIS_HOME/ops/<namespace>/<author>/<name>@<version>: in the user's catalog."""
    oid = OpId.parse(new_id, field="NEW_ID")
    return Path(home) / "ops" / oid.namespace / oid.author / f"{oid.name}@{oid.version}"
