"""The live view and the final yield table of ``repogym generate``."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.live import Live
from rich.table import Table

from repogym.ui import err, escape, escape_name, out

HEADER_AFTER_S = 2.0
"""Silence after which a non-terminal run says what it is waiting for."""
PRINTED_STEPS = frozenset({"build_started", "tests_after", "tests_before", "verify"})
"""The steps of a candidate a non-terminal run prints a line for (the long ones)."""


class GenerateView:
    """Candidates seen, running, kept, drops by reason, elapsed time and the step each candidate
    in flight is at, refreshed live on a terminal; otherwise one line per long step (building,
    running the tests, verifying) and per finished candidate."""

    def __init__(self, *, enabled: bool, title: str, jobs: int = 1) -> None:
        self.enabled = enabled
        self.title = title
        self.jobs = jobs
        self.stats: Any = None
        self.live: Live | None = None
        self.timer: threading.Timer | None = None
        self.started = time.monotonic()
        self.last_event = self.started
        self.steps: dict[str, tuple[str, float]] = {}
        """task id → (what it is doing, since when) for the candidates in flight."""
        self.lock = threading.Lock()

    def __enter__(self) -> GenerateView:
        self.started = self.last_event = time.monotonic()
        if self.enabled and err.is_terminal:
            # Re-rendered on every refresh, so the elapsed time moves while a candidate's
            # environment builds and its tests run (minutes with no finished candidate).
            self.live = Live(
                get_renderable=self.table, console=err, refresh_per_second=4, transient=True
            )
            self.live.__enter__()
        elif self.enabled:
            # Said only when the run really starts waiting (a bad input fails before, in one
            # line of its own): after a short silence, unless a candidate finished first.
            self.timer = threading.Timer(HEADER_AFTER_S, self._header)
            self.timer.daemon = True
            self.timer.start()
        return self

    def _header(self) -> None:
        if (self.stats is None or not self.stats.seen) and not self.steps:
            err.print(
                f"{escape(self.title)}: each candidate builds its environment and runs its "
                "tests (the first build takes longest); one line per long step and per "
                "finished candidate"
            )

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def now_line(self) -> str:
        """What is happening now: the builds and test runs of the candidates in flight."""
        now = time.monotonic()
        with self.lock:
            steps = sorted(self.steps.values(), key=lambda step: step[1])
        if steps:
            text, since = steps[0]
            line = f"{escape(text)} … {now - since:,.0f} s"
            if len(steps) > 1:
                line += "; " + "; ".join(escape(text) for text, _ in steps[1:])
            return line
        s = self.stats
        if s is None:
            return (
                "building the environment and running the tests of the first candidate(s) "
                f"… {now - self.started:,.0f} s"
            )
        if s.running:
            return (
                f"building environments and running tests of {s.running} candidate(s) "
                f"… {now - self.last_event:,.0f} s since the last result"
            )
        return "reading history for the next candidates …"

    def table(self) -> Table:
        table = Table(title=escape(self.title), title_justify="left", show_header=False)
        table.add_row("now", self.now_line())
        s = self.stats
        if s is None:
            table.add_row("elapsed", f"{time.monotonic() - self.started:,.0f} s")
            return table
        table.add_row("elapsed", f"{time.monotonic() - self.started:,.0f} s")
        table.add_row("candidates seen", str(s.seen))
        table.add_row("running", str(s.running))
        table.add_row("tasks emitted", f"[green]{s.kept}[/]")
        for reason, count in s.drops.most_common(8):
            table.add_row(f"  skipped: {escape(reason)}", str(count))
        return table

    def _refresh(self, stats: Any) -> None:
        self.stats = stats
        self.last_event = time.monotonic()
        if self.live is not None:
            self.live.refresh()

    def progress(self, event: Any) -> None:
        """A step of a candidate (:class:`repogym.pipelines.Progress`), from a worker thread."""
        with self.lock:
            if event.step == "finished":
                self.steps.pop(event.task_id, None)
            else:
                self.steps[event.task_id] = (event.text, time.monotonic())
        if self.enabled and self.live is None and event.step in PRINTED_STEPS:
            err.print(f"  {escape(event.text)} …")

    def outcome(self, outcome: Any, stats: Any) -> None:
        with self.lock:
            self.steps.pop(outcome.candidate.task_id, None)
        self._refresh(stats)
        if self.enabled and self.live is None:
            what = "[green]kept[/]" if outcome.kept else f"dropped: {escape(outcome.reason or '')}"
            err.print(
                f"  {escape_name(outcome.candidate.task_id)}: {what} ({outcome.seconds:.1f} s)"
            )
        elif self.live is not None and outcome.kept:
            self.live.console.print(f"  [green]+[/] {escape_name(outcome.candidate.task_id)}")

    def drop(self, key: str, reason: str, stats: Any) -> None:
        self._refresh(stats)

    def final(self, stats: Any, result: Any) -> None:
        table = Table(title="yield", title_justify="left")
        table.add_column("stage")
        table.add_column("count", justify="right")
        table.add_row("candidates", str(stats.seen))
        for reason, count in stats.drops.most_common():
            table.add_row(f"  dropped: {escape(reason)}", str(count))
        table.add_row("[green]tasks emitted[/]", f"[green]{stats.kept}[/]")
        out.print(table)
        ratio = f"{stats.elapsed / stats.test_seconds:.2f}" if stats.test_seconds else "—"
        out.print(
            f"{stats.elapsed:.1f} s total, {stats.test_seconds:.1f} s inside test runs "
            f"(overhead ratio {ratio}); tasks in {escape(str(result.out / 'tasks'))}, "
            f"report {escape(str(result.report))}"
        )


def print_llm_usage(usage: Any) -> None:
    """The ``--llm`` rewriter's calls, tokens, cost and verdicts
    (:class:`repogym.pipelines.report.LlmUsage`)."""
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    out.print(
        f"LLM {escape(usage.llm)}: {usage.calls} call(s), "
        f"{usage.input_tokens} input + {usage.output_tokens} output tokens, "
        f"cost {cost}; rewrites accepted {usage.accepted}, rejected "
        f"{usage.rejected}, failed {usage.failed}"
    )
