"""Unexpected exceptions during generation: one bounded line for the report, the full
traceback for the run's error log.

A bug met by one candidate (``ValueError: unknown runner 'node'`` on a JavaScript repository,
say) must cost that candidate, not the run: the harness and ``generate`` turn any exception of
an evaluation into the drop reason :data:`INTERNAL_ERROR` with :func:`describe` as its detail,
and append the traceback to ``<out>/.repogym/<pipeline>-errors.log`` through :class:`ErrorLog`.
"""

from __future__ import annotations

import threading
import traceback
from datetime import UTC, datetime
from pathlib import Path

INTERNAL_ERROR = "internal error"
"""Drop reason of a candidate whose evaluation raised an unexpected exception."""
DETAIL_LIMIT = 300


def describe(exc: BaseException, limit: int = DETAIL_LIMIT) -> str:
    """``Type: first line of the message``, at most ``limit`` characters."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ErrorLog:
    """Appends tracebacks to one file (created on the first error; thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._lock = threading.Lock()

    def write(self, where: str, exc: BaseException) -> None:
        """Append ``exc``'s traceback under a header naming ``where`` (never raises)."""
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        text = "".join(traceback.format_exception(exc))
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8", errors="replace") as fh:
                    fh.write(f"=== {stamp} {where}\n{text}\n")
                self.count += 1
        except OSError:
            pass  # the report still carries the one-line detail

    def extend(self, text: str) -> None:
        """Append tracebacks already formatted elsewhere (a worker's log; never raises)."""
        if not text:
            return
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8", errors="replace") as fh:
                    fh.write(text if text.endswith("\n") else text + "\n")
                self.count += 1
        except OSError:
            pass


def log_error(log: ErrorLog | None, where: str, exc: BaseException) -> None:
    """:meth:`ErrorLog.write` when there is a log."""
    if log is not None:
        log.write(where, exc)
