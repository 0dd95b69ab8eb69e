"""What every pipeline shares: candidates, outcomes and the yield table."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Candidate:
    """A change that may become a task: the repository at ``base``, the fix at ``head``."""

    key: str
    """Stable identity for resume (e.g. the head sha or ``pr-12``)."""
    task_id: str
    kind: str
    base: str
    head: str
    title: str
    body: str
    reference: str
    patch: str = ""
    source_patch: str = ""
    test_patch: str = ""
    number: int | None = None


@dataclass
class Outcome:
    candidate: Candidate
    kept: bool
    reason: str | None = None
    detail: str | None = None
    task_dir: Path | None = None
    seconds: float = 0.0
    test_seconds: float = 0.0
    f2p: int = 0
    p2p: int = 0


@dataclass
class YieldStats:
    """Counts behind the live view and the final yield table (thread-safe)."""

    seen: int = 0
    kept: int = 0
    running: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    test_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.test_seconds += outcome.test_seconds
            if outcome.kept:
                self.kept += 1
            else:
                self.drops[outcome.reason or "dropped"] += 1

    def drop(self, reason: str) -> None:
        with self.lock:
            self.seen += 1
            self.drops[reason] += 1

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def to_json(self) -> dict[str, Any]:
        return {
            "candidates": self.seen,
            "kept": self.kept,
            "dropped": dict(self.drops.most_common()),
            "seconds": round(self.elapsed, 2),
            "test_seconds": round(self.test_seconds, 2),
        }
