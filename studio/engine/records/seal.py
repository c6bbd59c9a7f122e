"""Records only this user folder can write: an HMAC-SHA256 over the whole record (every field but
the seal, in canonical JSON) with a key kept in the user folder (``receipt.key``, created on first
use, readable only by the user), plus one short HMAC per field so that a refusal names what was
edited. Every hash inside a record can be recomputed from public data; the seal cannot.

A record without this folder's seal is ``foreign`` ("from elsewhere": another user folder, another
machine, the exchange ring, a hand-written file); one whose seal names this key but does not verify
is ``forged``. Neither ever counts here (docs/receipt.md)."""
from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StudioError
from .canonical import canonical

KEY_FILE = "receipt.key"
ALG = "HMAC-SHA256"
FIELD_MAC_HEX = 16            # 64 bits per field: enough to name an edit, the whole-record MAC decides


def leaves(value, path: str = "") -> dict[str, object]:
    """The record's fields by path (``a.b``, ``steps[2].receipt``): objects and lists holding objects
    or lists are walked, everything else (scalars, lists of scalars) is one field."""
    if isinstance(value, dict) and value:
        out = {}
        for k in sorted(value):
            out.update(leaves(value[k], f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(leaves(v, f"{path}[{i}]"))
        return out
    return {path: value}


@dataclass
class SealCheck:
    status: str                                   # sealed | foreign | forged
    why: str = ""
    fields: list[str] = field(default_factory=list)   # forged: the fields whose content changed

    @property
    def ok(self) -> bool:
        return self.status == "sealed"


class Seal:
    """The sealing key of one user folder (``home``)."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self._key: bytes | None = None

    @property
    def path(self) -> Path:
        return self.home / KEY_FILE

    def key(self) -> bytes:
        if self._key is None:
            self._key = self._read() or self._create()
        return self._key

    def _read(self) -> bytes | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StudioError(f"the seal key cannot be read: {e.strerror}", file=str(self.path),
                              hint="it must be a regular file of yours; delete it to make a new one "
                                   "(records sealed with the old key then read as from elsewhere)") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != 32:
                raise StudioError("the seal key is not a 32-byte regular file", file=str(self.path),
                                  hint="delete it to make a new one (records sealed with it then read as from elsewhere)")
            if st.st_mode & 0o077:
                raise StudioError(f"the seal key is readable by others (mode {stat.S_IMODE(st.st_mode):o})",
                                  file=str(self.path), hint=f"chmod 600 {self.path}, or delete it to make a new one")
            return os.read(fd, 33)
        finally:
            os.close(fd)

    def _create(self) -> bytes:
        """A new key, crash-safely: written and fsynced in a private temp file, then linked into
        place (link never replaces: if another process made the key first, theirs is used)."""
        key = secrets.token_bytes(32)
        tmp = self.home / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)  # atomic-ok: linked below
            try:
                if os.write(fd, key) != len(key):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, self.path)
        except FileExistsError:
            return self._read()
        except OSError as e:
            raise StudioError(f"cannot create the seal key: [Errno {e.errno}] {e.strerror or e}", file=str(self.path),
                              hint="free some space or make the user folder writable ($SCELLIS_HOME)") from None
        finally:
            tmp.unlink(missing_ok=True)
        return key

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"scellis-receipt-key/1\0" + self.key()).hexdigest()[:16]

    def _mac(self, data: bytes) -> str:
        return hmac.new(self.key(), data, hashlib.sha256).hexdigest()

    def _field_macs(self, body: dict) -> dict[str, str]:
        return {p: self._mac(p.encode() + b"\0" + canonical(v))[:FIELD_MAC_HEX] for p, v in leaves(body).items()}

    def seal(self, body: dict) -> dict:
        """``body`` with this folder's seal."""
        out = {k: v for k, v in body.items() if k != "seal"}
        out["seal"] = {"alg": ALG, "key": self.key_id, "mac": self._mac(canonical(out)),
                       "fields": self._field_macs(out)}
        return out

    def check(self, record: dict) -> SealCheck:
        """Whether ``record`` carries this folder's seal over exactly its content; never raises."""
        s = record.get("seal") if isinstance(record, dict) else None
        if not isinstance(s, dict) or s.get("alg") != ALG or not isinstance(s.get("mac"), str):
            return SealCheck("foreign", "it carries no seal of this user folder (made elsewhere, or written by hand)")
        if s.get("key") != self.key_id:
            return SealCheck("foreign", f"from elsewhere: sealed in another user folder (key {str(s.get('key'))[:16]}), "
                                        "not this one's")
        body = {k: v for k, v in record.items() if k != "seal"}
        try:
            mac = self._mac(canonical(body))
        except (TypeError, ValueError):
            mac = ""
        if hmac.compare_digest(str(s["mac"]).encode("utf-8", "replace"), mac.encode("ascii")):
            return SealCheck("sealed")
        return SealCheck("forged", "its seal does not match its content: it was edited or written by hand",
                         self._changed(body, s.get("fields")))

    def _changed(self, body: dict, sealed) -> list[str]:
        """The fields whose content differs from what was sealed (added, removed or edited)."""
        if not isinstance(sealed, dict):
            return ["seal"]
        try:
            now = self._field_macs(body)
        except (TypeError, ValueError):
            return ["seal"]
        changed = [p for p in sorted(set(now) | set(sealed))
                   if not (isinstance(sealed.get(p), str) and hmac.compare_digest(sealed[p].encode("utf-8", "replace"),
                                                                                  now.get(p, "").encode("ascii")))]
        return changed or ["seal"]
