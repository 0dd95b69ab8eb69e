"""Options of ``repogym explore`` for rollouts from the explorer (the run panel)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from repogym.cli.common import bad_input

RunsOpt = Annotated[
    bool,
    typer.Option(
        "--runs/--no-runs",
        help="Let visitors run agents on tasks from the task pages (in the --sandbox backend).",
    ),
]
RunsDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--runs-dir",
        help="Where run records are kept (runs.sqlite). Default: "
        "$XDG_STATE_HOME/repogym/explorer (~/.local/state/repogym/explorer).",
    ),
]
RunTasksOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--run-tasks",
        metavar="DIR",
        help="Task folders the run panel may run (repeatable). Default: the PATHs served; "
        "needed with --snapshot.",
    ),
]
MaxRunsOpt = Annotated[
    int, typer.Option("--max-concurrent-runs", min=1, help="Runs at once (more wait, up to 4×).")
]
RunsPerHourOpt = Annotated[
    int, typer.Option("--runs-per-hour", min=1, help="Runs one visitor may start per hour.")
]
RunTimeOpt = Annotated[
    float, typer.Option("--run-time-limit", min=1, help="Seconds an agent may work per run.")
]
RunBudgetOpt = Annotated[
    float, typer.Option("--run-budget-usd", min=0.0, help="Cost cap of one LLM run.")
]
RunStepsOpt = Annotated[int, typer.Option("--run-max-steps", min=1, help="Model calls per run.")]
CommandAgentOpt = Annotated[
    bool,
    typer.Option(
        "--allow-command-agent",
        help="Offer the command: agent (visitors run any shell command in the sandbox).",
    ),
]
InternalOpt = Annotated[
    bool | None,
    typer.Option(
        "--allow-internal-endpoints/--deny-internal-endpoints",
        help="Whether visitors' model endpoints may be addresses of this host's networks "
        "(loopback, private). Default: allowed when listening on loopback only.",
        show_default=False,
    ),
]
VisibilityOpt = Annotated[
    str,
    typer.Option(
        "--runs-visibility",
        help="public: finished graded runs are listed to everyone (never who ran them); "
        "owner: each visitor sees only their own runs.",
    ),
]


def default_runs_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "repogym" / "explorer"


def run_service(
    store: Any,
    *,
    enabled: bool,
    roots: list[str],
    folder: Path | None,
    host: str,
    workers: int,
    max_concurrent: int,
    per_hour: int,
    time_limit_s: float,
    budget_usd: float,
    max_steps: int,
    allow_command: bool,
    allow_internal: bool | None,
    visibility: str,
    sandbox: str = "local",
) -> Any:
    """The explorer's RunService from the flags, or None when runs are off."""
    if not enabled:
        return None
    if visibility not in ("public", "owner"):
        raise bad_input("--runs-visibility must be public or owner")
    if workers > 1:
        return None
    from repogym.explorer.runs import RunLimits, RunService
    from repogym.explorer.runs.locate import TaskLocator

    loopback = host.strip("[]") in ("127.0.0.1", "localhost", "::1")
    limits = RunLimits(
        max_concurrent=max_concurrent,
        max_queued=max_concurrent * 4,
        per_visitor_per_hour=per_hour,
        time_limit_s=time_limit_s,
        budget_usd=budget_usd,
        max_steps=max_steps,
        allow_command=allow_command,
        allow_internal_endpoints=loopback if allow_internal is None else allow_internal,
        visibility=visibility,  # type: ignore[arg-type]
    )
    folder = folder or default_runs_dir()
    try:
        return RunService(store, TaskLocator(store, roots), folder, limits, sandbox=sandbox)
    except OSError as exc:
        raise bad_input(f"--runs-dir {folder}: {exc.strerror or exc}") from None
