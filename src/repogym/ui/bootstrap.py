"""Human-readable output of ``repogym bootstrap``: one result, and a survey's progress lines
and report.

The bootstrap library computes (:class:`repogym.bootstrap.BootstrapResult`,
:class:`repogym.bootstrap.survey.SurveyReport`); this module only prints. It reads them through
the read-only protocols below, which name exactly the fields printed, so ``ui`` (a foundation
layer) never imports ``bootstrap``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from repogym.ui import escape


class RecipeView(Protocol):
    """The recipe fields printed (:class:`repogym.bootstrap.Recipe`)."""

    @property
    def language(self) -> str: ...
    @property
    def runner(self) -> str: ...
    @property
    def base_image(self) -> str: ...
    @property
    def dockerfile(self) -> str: ...
    @property
    def test_command(self) -> str: ...
    @property
    def collect_command(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def commit_date(self) -> str: ...
    @property
    def notes(self) -> Sequence[str]: ...


class DetectionView(Protocol):
    """The detection field printed (:class:`repogym.bootstrap.Detection`)."""

    @property
    def toolchain(self) -> str | None: ...


class CheckView(Protocol):
    """The check fields printed (:class:`repogym.bootstrap.CheckResult`)."""

    @property
    def ok(self) -> bool: ...
    @property
    def sandbox(self) -> str: ...
    @property
    def tests_collected(self) -> int: ...
    @property
    def sample_ids(self) -> Sequence[str]: ...
    @property
    def failed_step(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def log_tail(self) -> str: ...
    @property
    def timings(self) -> Mapping[str, float]: ...


class BootstrapView(Protocol):
    """One bootstrap outcome (:class:`repogym.bootstrap.BootstrapResult`)."""

    @property
    def recipe(self) -> RecipeView: ...
    @property
    def detection(self) -> DetectionView | None: ...
    @property
    def check(self) -> CheckView | None: ...
    @property
    def cached(self) -> bool: ...
    @property
    def repo_id(self) -> str: ...
    @property
    def ref(self) -> str | None: ...


class SurveyRepoView(Protocol):
    """One repository of a survey (:class:`repogym.bootstrap.survey.RepoResult`)."""

    @property
    def repo(self) -> str: ...
    @property
    def repo_id(self) -> str | None: ...
    @property
    def ref(self) -> str | None: ...
    @property
    def commit_date(self) -> str | None: ...
    @property
    def ok(self) -> bool: ...
    @property
    def cause(self) -> str: ...
    @property
    def detail(self) -> str: ...
    @property
    def tests_collected(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def cached(self) -> bool: ...


class SurveyView(Protocol):
    """A finished survey (:class:`repogym.bootstrap.survey.SurveyReport`)."""

    @property
    def at(self) -> str: ...
    @property
    def sandbox(self) -> str: ...
    @property
    def results(self) -> Sequence[SurveyRepoView]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def results_file(self) -> Path | None: ...
    @property
    def resumed(self) -> int: ...
    @property
    def errors_log(self) -> Path | None: ...
    @property
    def totals(self) -> Mapping[str, Any]: ...


def render_result(result: BootstrapView, console: Console) -> None:
    """Print the recipe (Dockerfile, commands, notes) and the check outcome."""
    recipe = result.recipe
    where = escape(result.repo_id) + (f" @ {escape(result.ref[:12])}" if result.ref else "")
    cached = " [dim](cached)[/]" if result.cached else ""
    console.print(
        f"[bold]bootstrap[/] {where}: {recipe.language}, runner {recipe.runner},"
        f" {escape(recipe.base_image)}{cached}"
    )
    if result.detection and result.detection.toolchain:
        console.print(f"toolchain: {escape(result.detection.toolchain)}")
    console.print("\n[bold]Dockerfile[/]")
    console.print(escape(recipe.dockerfile.rstrip()), style="cyan")
    console.print(f"\n[bold]test command[/]    {escape(recipe.test_command)}")
    first, _, more = recipe.collect_command.partition("\n")
    console.print(f"[bold]collect command[/] {escape(first)}" + (" …" if more else ""))
    console.print(f"[bold]recipe hash[/]     {recipe.hash}")
    if recipe.language == "python":
        as_of = recipe.commit_date or "not capped (no commit date)"
        console.print(f"[bold]dependencies as of[/] {escape(as_of)}")
    if recipe.notes:
        console.print("\n[bold]notes[/]")
        for note in recipe.notes:
            console.print(f"  - {escape(note)}")
    check = result.check
    console.print()
    if check is None:
        console.print("[yellow]not checked[/] (--no-check)")
        return
    times = ", ".join(f"{k.removesuffix('_s')} {v:.1f}s" for k, v in check.timings.items())
    if check.ok:
        console.print(
            f"[green]check ok[/] on {check.sandbox}: {check.tests_collected} tests collected"
            f" [dim]({times})[/]"
        )
        for test_id in check.sample_ids[:5]:
            console.print(f"  [dim]{escape(test_id)}[/]")
        return
    console.print(f"[red]check FAILED[/] on {check.sandbox} at {escape(check.failed_step)}")
    console.print(f"  reason: {escape(check.reason)}")
    if check.log_tail:
        console.print("  log tail:")
        for line in check.log_tail.splitlines()[-15:]:
            console.print(f"    [dim]{escape(line)}[/]")


def render_line(result: SurveyRepoView, finished: int, total: int) -> str:
    """One progress line (rich markup) for a finished repository."""
    where = escape(result.repo_id or result.repo)
    if result.ref:
        where += f" @ {result.ref[:12]}" + (
            f" ({result.commit_date[:10]})" if result.commit_date else ""
        )
    head = f"[{finished}/{total}]"
    if result.ok:
        cached = ", cached" if result.cached else ""
        return (
            f"{head} [green]ok[/]   {where}: {result.tests_collected} tests "
            f"({result.seconds:.1f} s{cached})"
        )
    return f"{head} [red]FAIL[/] {where}: {escape(result.cause)} ({result.seconds:.1f} s)"


def render_survey(report: SurveyView, console: Console) -> None:
    """The success rate, the failure causes grouped (with example repositories), and where
    the per-repository results are."""
    t = report.totals
    rate = f"{100 * t['success_rate']:.1f}%" if t["success_rate"] is not None else "n/a"
    console.print(
        f"[bold]bootstrap survey[/] at {escape(report.at)} on {escape(report.sandbox)}: "
        f"[bold]{t['ok']}/{t['repos']} ok ({rate})[/], {t['tests_collected']} tests collected, "
        f"{report.seconds:.1f} s"
        + (f" ({report.resumed} from an earlier run)" if report.resumed else "")
    )
    if t["failed"]:
        table = Table(title="failure causes", title_justify="left")
        table.add_column("repos", justify="right")
        table.add_column("cause")
        table.add_column("e.g.")
        for cause, count in t["causes"].items():
            names = [r.repo_id or r.repo for r in report.results if not r.ok and r.cause == cause]
            more = f" +{len(names) - 3}" if len(names) > 3 else ""
            table.add_row(str(count), escape(cause), escape(", ".join(names[:3]) + more))
        console.print(table)
        for r in report.results:
            if not r.ok:
                console.print(f"  [dim]{escape(r.repo_id or r.repo)}: {escape(r.detail)}[/]")
    if report.results_file is not None:
        console.print(f"results: {escape(str(report.results_file))}")
    if report.errors_log is not None:
        console.print(f"tracebacks of internal errors: {escape(str(report.errors_log))}")
