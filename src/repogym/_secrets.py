"""Keeping secrets out of messages: one redaction rule for every place that reports errors,
and one for credentials inside URLs."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MIN_PIECE = 8
"""Services echo truncated keys (``sk-abc…xyz``): any piece this long of a secret is removed."""


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret, and every piece of it of ``MIN_PIECE``+ characters, as ``***``."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, "***")
        for size in range(len(secret) - 1, MIN_PIECE - 1, -1):
            for start in range(len(secret) - size + 1):
                piece = secret[start : start + size]
                if piece in text:
                    text = text.replace(piece, "***")
    return text


def redact_url(url: str) -> str:
    """Remove credentials: all user info for http(s)/ftp URLs, passwords elsewhere."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    if parts.scheme.lower() in ("http", "https", "ftp", "ftps"):
        netloc = host
    else:
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))
