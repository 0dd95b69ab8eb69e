"""Human-readable output of a bootstrap result (used by ``repogym bootstrap``)."""

from __future__ import annotations

from rich.console import Console

from repogym.bootstrap.service import BootstrapResult
from repogym.ui import escape


def render_result(result: BootstrapResult, console: Console) -> None:
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
