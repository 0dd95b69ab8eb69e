"""The ``--resume`` state of a generate run: the outcome of every candidate examined."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from repogym.atomic import atomic_write


class GenerateStateError(ValueError):
    """The state file cannot be read as one (the message is one line)."""


class ResumeOutcomes:
    """Outcome of every candidate examined, for ``--resume`` (written after each one)."""

    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.done: dict[str, dict[str, Any]] = {}
        if resume and path.is_file():
            self.done = _read_state(path)

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self.lock:
            self.done[key] = value
            atomic_write(self.path, json.dumps(self.done, indent=1, sort_keys=True))


def _read_state(path: Path) -> dict[str, dict[str, Any]]:
    """A resume state file, or :class:`GenerateError` when it is not one (truncated, random
    bytes, another shape): resuming from it would redo or skip work at random."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not JSON"
        raise GenerateStateError(
            f"{path}: the resume state cannot be read ({why}); move it aside to start over"
        ) from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise GenerateStateError(
            f"{path}: the resume state is not a map of outcomes; move it aside to start over"
        )
    return data
