"""A catalog that refreshes itself: the shrink guard and scheduled index rounds.

The **shrink guard** compares a new snapshot's environments and tasks, overall and per source,
with the published one's (read from its file) and refuses a listing that lost too much:
a source that stopped answering or a folder half deleted keeps the old snapshot served.

:func:`run_schedule` rebuilds the snapshot at an interval (``repogym explore index
--schedule``): one round is one :func:`repogym.explorer.build.build_snapshot` with the guard,
published atomically or kept; SIGINT/SIGTERM end the loop between rounds or abandon a round
(its temp files are removed, the published snapshot stays) unless it is already publishing,
which then finishes first.
"""

from __future__ import annotations

import datetime as _dt
import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from repogym.explorer.snapshot import (
    POINTER,
    SnapshotError,
    read_pointer,
    source_counts,
    versioned_pointer,
)
from repogym.explorer.snapshot_write import Guard

__all__ = [
    "DEFAULT_RATIO",
    "Guard",
    "ShrinkRefused",
    "Stopped",
    "compare",
    "format_round",
    "parse_schedule",
    "published_counts",
    "run_schedule",
    "shrink_guard",
]

DEFAULT_RATIO = 0.8
_NAMED = {"hourly": 3600.0, "daily": 86400.0}
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class ShrinkRefused(SnapshotError):
    """The new listing is smaller than the guard allows; the published one is kept."""

    def __init__(self, problems: list[dict[str, Any]], after: dict[str, Any], ratio: float):
        self.problems = sorted(problems, key=lambda p: p["source"] is None)  # sources first
        self.after = after
        self.ratio = ratio
        parts = [
            f"{'overall' if p['source'] is None else 'source ' + p['source']}: "
            f"{p['what']} {p['before']} -> {p['after']}"
            for p in self.problems[:3]
        ]
        if len(self.problems) > 3:
            parts.append(f"{len(self.problems) - 3} more")
        super().__init__(
            f"shrink guard: {'; '.join(parts)} (under {ratio:.0%} of the published snapshot); "
            "kept the published snapshot (--force publishes it anyway)"
        )


class Stopped(BaseException):
    """SIGINT or SIGTERM asked a scheduled run to stop."""


def parse_schedule(text: str) -> float:
    """Seconds between rounds: ``hourly``, ``daily`` or ``<N>s|m|h|d`` (N > 0)."""
    t = text.strip().lower()
    if t in _NAMED:
        return _NAMED[t]
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", t)
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"--schedule {text!r}: use hourly, daily, or a number with s, m, h or d")
    return float(m.group(1)) * _UNITS[m.group(2)]


def published_counts(out: Path) -> dict[str, Any] | None:
    """``{"envs", "tasks", "sources"}`` of the snapshot now published in ``out`` (this schema
    version's pointer, else ``CURRENT``); None when nothing is published. ``sources`` is None
    when the snapshot file cannot tell them (the overall counts are the pointer's)."""
    for name in (versioned_pointer(), POINTER):
        try:
            pointer = read_pointer(out, name)
        except SnapshotError:
            continue
        counts = pointer.get("counts") or {}
        try:
            sources: dict[str, Any] | None = source_counts(out / pointer["file"])
        except SnapshotError:
            sources = None
        return {"envs": counts.get("envs"), "tasks": counts.get("tasks"), "sources": sources}
    return None


def compare(before: dict[str, Any], after: dict[str, Any], ratio: float) -> list[dict[str, Any]]:
    """What shrank below ``ratio`` of ``before``, overall and per source (a source gone counts
    as zero): ``[{"source": None | str, "what": "envs" | "tasks", "before", "after"}]``."""
    problems: list[dict[str, Any]] = []

    def check(source: str | None, old: dict[str, Any], new: dict[str, Any]) -> None:
        for what in ("envs", "tasks"):
            b, a = old.get(what), new.get(what) or 0
            if isinstance(b, int) and b > 0 and a < ratio * b:
                problems.append({"source": source, "what": what, "before": b, "after": a})

    check(None, before, after)
    old_sources = before.get("sources") or {}
    new_sources = after.get("sources") or {}
    for source in sorted(old_sources):
        check(source, old_sources[source], new_sources.get(source) or {})
    return problems


def shrink_guard(ratio: float = DEFAULT_RATIO) -> Guard:
    """A publish guard refusing a listing under ``ratio`` of the published one."""
    if not 0 <= ratio <= 1:
        raise ValueError(f"--shrink-guard {ratio}: use a fraction from 0 to 1")

    def guard(out: Path, after: dict[str, Any]) -> None:
        before = published_counts(out)
        if before is None or ratio == 0:
            return
        problems = compare(before, after, ratio)
        if problems:
            raise ShrinkRefused(problems, after, ratio)

    return guard


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_round(r: dict[str, Any]) -> str:
    """The one-line log of a round."""
    envs = "-" if r.get("envs") is None else r["envs"]
    tasks = "-" if r.get("tasks") is None else r["tasks"]
    head = f"{r['time']} round {r['round']}: {envs} environment(s), {tasks} task(s); "
    if r["published"]:
        return head + f"published {str(r.get('sha256', ''))[:12]} in {r['seconds']:.2f}s"
    return head + f"kept: {r['reason']}"


class _State:
    def __init__(self) -> None:
        self.stop = False
        self.shielded = False  # publishing: a signal waits for the round to finish

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.stop = True
        if not self.shielded:
            raise Stopped(signal.Signals(signum).name)


@contextmanager
def _signals(state: _State) -> Iterator[None]:
    old = {s: signal.signal(s, state.handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def one_round(
    build: Callable[[Guard], dict[str, Any]],
    number: int,
    guard: Guard | None,
    on_publish: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Run ``build(guard)`` once; the result as a round record (published or kept, and why).

    ``on_publish`` is called once the guard let the snapshot through (it is then published).
    """

    def checked(out: Path, after: dict[str, Any]) -> None:
        if guard is not None:
            guard(out, after)
        on_publish()

    t0 = time.perf_counter()
    r: dict[str, Any] = {"time": _now(), "round": number}
    try:
        info = build(checked)
    except ShrinkRefused as exc:
        r.update(
            envs=exc.after.get("envs"),
            tasks=exc.after.get("tasks"),
            published=False,
            reason=str(exc),
            problems=exc.problems,
        )
    except Exception as exc:  # a source that cannot be read, a full disk: the next round retries
        reason = " ".join(str(exc).split()) or type(exc).__name__
        r.update(envs=None, tasks=None, published=False, reason=reason)
    else:
        r.update(
            envs=info.get("envs"),
            tasks=info.get("tasks"),
            published=True,
            reason="",
            sha256=info.get("sha256"),
            snapshot=info.get("snapshot"),
            errors=len(info.get("errors") or []),
        )
    r["seconds"] = round(time.perf_counter() - t0, 3)
    return r


def run_schedule(
    build: Callable[[Guard], dict[str, Any]],
    interval: float,
    *,
    guard: Guard | None,
    force: bool = False,
    on_round: Callable[[dict[str, Any]], None],
    rounds: int | None = None,
) -> str:
    """Run rounds every ``interval`` seconds (from the start of one to the next; a round that
    overran is followed at once) until SIGINT/SIGTERM or ``rounds`` rounds; ``force`` skips
    the guard in the first round only. Returns why it stopped (the signal's name or
    ``"rounds"``)."""
    state = _State()
    number = 0
    with _signals(state):
        try:
            while rounds is None or number < rounds:
                number += 1
                started = time.monotonic()
                state.shielded = False

                def shield() -> None:
                    state.shielded = True

                r = one_round(build, number, None if force and number == 1 else guard, shield)
                state.shielded = True  # the line is written whole
                on_round(r)
                state.shielded = False
                if state.stop:
                    return "signal"
                if rounds is not None and number >= rounds:
                    break
                time.sleep(max(0.0, started + interval - time.monotonic()))
        except Stopped as exc:
            return str(exc)
    return "rounds"
