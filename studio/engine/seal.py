"""Receipts only this machine can write: an HMAC-SHA256 over the whole receipt (every field but
the seal itself, in canonical JSON) with a key kept in the user's data folder, created on first
use and readable only by the user. Every hash in a receipt can be recomputed from public data;
the seal cannot. A receipt without this machine's seal is ``foreign`` (made elsewhere: the
exchange ring, another user, a hand-written file); one whose seal names this key but does not
verify is ``forged``. Neither ever counts here (docs/receipt.md)."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path

from .errors import StudioError

KEY_FILE = "receipt.key"
ALG = "HMAC-SHA256"


def canonical(body: dict) -> bytes:
    """The bytes the seal covers: sorted keys, no whitespace, ASCII; floats as Python's repr
    (which round-trips exactly), so a receipt read back seals to the same bytes."""
    return json.dumps({k: v for k, v in body.items() if k != "seal"}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=True).encode()


class ReceiptSeal:
    """The sealing key of one user data folder (``home``)."""

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
            raise StudioError(f"the receipt key cannot be read: {e.strerror}", file=str(self.path),
                              hint="it must be a regular file of yours; delete it to make a new one "
                                   "(receipts sealed with the old key then read as foreign)") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != 32:
                raise StudioError("the receipt key is not a 32-byte regular file", file=str(self.path),
                                  hint="delete it to make a new one (receipts sealed with it then read as foreign)")
            if st.st_mode & 0o077:
                raise StudioError(f"the receipt key is readable by others (mode {stat.S_IMODE(st.st_mode):o})",
                                  file=str(self.path), hint=f"chmod 600 {self.path}, or delete it to make a new one")
            return os.read(fd, 33)
        finally:
            os.close(fd)

    def _create(self) -> bytes:
        """A new key, crash-safely: written and fsynced in a private temp file, then linked into
        place (link never replaces: if another process made the key first, theirs is used)."""
        self.home.mkdir(parents=True, exist_ok=True)
        key = secrets.token_bytes(32)
        tmp = self.home / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)  # atomic-ok: linked below
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return self._read()
        finally:
            tmp.unlink(missing_ok=True)
        return key

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"scellis-receipt-key/1\0" + self.key()).hexdigest()[:16]

    def _mac(self, body: dict) -> str:
        return hmac.new(self.key(), canonical(body), hashlib.sha256).hexdigest()

    def seal(self, body: dict) -> dict:
        """``body`` with this machine's seal."""
        out = {k: v for k, v in body.items() if k != "seal"}
        out["seal"] = {"alg": ALG, "key": self.key_id, "mac": self._mac(out)}
        return out

    def check(self, receipt: dict) -> tuple[str, str]:
        """(sealed | foreign | forged, why)."""
        s = receipt.get("seal") if isinstance(receipt, dict) else None
        if not isinstance(s, dict) or s.get("alg") != ALG or not isinstance(s.get("mac"), str):
            return "foreign", "it carries no seal of this machine (made elsewhere, or written by hand)"
        if s.get("key") != self.key_id:
            return "foreign", f"sealed with another key ({str(s.get('key'))[:16]}), not this machine's"
        mac = s["mac"]
        if not (len(mac) == 64 and all(c in "0123456789abcdef" for c in mac)) or \
                not hmac.compare_digest(mac.encode("ascii"), self._mac(receipt).encode("ascii")):
            return "forged", "its seal does not match its content: it was edited or written by hand"
        return "sealed", ""
