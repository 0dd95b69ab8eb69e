"""Keeping secrets out of messages: one redaction rule for every place that reports errors."""

from __future__ import annotations

from collections.abc import Iterable

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
