"""Who may use the admin app: one bearer token, or accounts with hashed passwords.

- ``--token-file F``: the file's first line is the token (at least 16 characters). Requests
  send ``Authorization: Bearer <token>`` (or HTTP Basic with the token as the password, which
  browsers can prompt for); the audit log names the user "token".
- ``--accounts F``: one ``name:hash`` a line (``#`` comments), ``hash`` from
  :func:`hash_password` (``scrypt$n$r$p$salt$digest``); requests use HTTP Basic.

Every comparison is constant-time (:func:`hmac.compare_digest`). Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AuthConfig", "AuthError", "Verdict", "hash_password", "verify_password"]

_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
SCRYPT = (2**14, 8, 1)
MIN_TOKEN = 16


class AuthError(ValueError):
    """An unusable token or accounts file (the message says which line and why)."""


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$salt_hex$digest_hex`` of ``password``."""
    n, r, p = SCRYPT
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"scrypt${n}${r}${p}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a :func:`hash_password` string (constant-time)."""
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        got = hashlib.scrypt(
            password.encode("utf-8", "replace"),
            salt=bytes.fromhex(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(digest) // 2,
        )
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(got.hex(), digest)


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking a request: ``who`` when allowed, else the HTTP status
    (401: no credentials, 403: wrong ones) and why."""

    who: str | None
    status: int = 200
    reason: str = ""


class AuthConfig:
    """The admin app's credentials, read once at start."""

    def __init__(self, *, token: str | None = None, accounts: dict[str, str] | None = None):
        if (token is None) == (accounts is None):
            raise AuthError("give exactly one of a token or accounts")
        self.token = token
        self.accounts = accounts or {}

    @classmethod
    def from_token_file(cls, path: Path) -> AuthConfig:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
        token = lines[0].strip() if lines else ""
        if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
            raise AuthError(
                f"{path}: the token must be one line of at least {MIN_TOKEN} characters"
            )
        return cls(token=token)

    @classmethod
    def from_accounts_file(cls, path: Path) -> AuthConfig:
        accounts: dict[str, str] = {}
        for no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, stored = line.partition(":")
            if not sep or not _NAME.match(name) or not stored.startswith("scrypt$"):
                raise AuthError(
                    f"{path}:{no}: expected name:scrypt$… (make a hash with "
                    "'repogym explore admin --hash-password')"
                )
            accounts[name] = stored
        if not accounts:
            raise AuthError(f"{path}: no accounts")
        return cls(accounts=accounts)

    def check(self, authorization: str | None) -> Verdict:
        """Check an ``Authorization`` header."""
        if not authorization:
            return Verdict(None, 401, "credentials needed")
        scheme, _, value = authorization.strip().partition(" ")
        scheme = scheme.lower()
        value = value.strip()
        if scheme == "bearer" and self.token is not None:
            if hmac.compare_digest(value.encode("utf-8", "replace"), self.token.encode()):
                return Verdict("token")
            return Verdict(None, 403, "wrong credentials")
        if scheme != "basic":
            return Verdict(None, 401, "unsupported credentials (use Bearer or Basic)")
        try:
            user, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return Verdict(None, 401, "malformed Basic credentials")
        if not sep:
            return Verdict(None, 401, "malformed Basic credentials")
        if self.token is not None:
            ok = hmac.compare_digest(password.encode(), self.token.encode())
            return Verdict("token") if ok else Verdict(None, 403, "wrong credentials")
        stored = self.accounts.get(user)
        # an unknown name costs the same hash as a known one
        ok = verify_password(password, stored or _DUMMY) and stored is not None
        return Verdict(user) if ok else Verdict(None, 403, "wrong credentials")


_DUMMY = hash_password("", salt=b"\0" * 16)
