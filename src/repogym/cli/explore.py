"""``repogym explore``: serve the explorer web app (the default sub-command, ``serve``) or
build a snapshot for it (``index``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from repogym.cli import explore_runs as er
from repogym.cli.app import app, new_group
from repogym.cli.common import (
    HostOpt,
    JsonOpt,
    LimitOpt,
    PortOpt,
    SandboxOpt,
    bad_input,
    leave_nothing_on_failure,
    output_folder_or_exit,
    port_free_or_exit,
    sandbox_or_exit,
    trusted_or_exit,
)
from repogym.ui import err, escape, fail, out

DEFAULT_COMMAND = "serve"


class DefaultCommandGroup(TyperGroup):
    """A group whose arguments go to :data:`DEFAULT_COMMAND` unless they start with the name of
    another sub-command: ``repogym explore PATH`` is ``repogym explore serve PATH``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


explore_app = new_group(
    cls=DefaultCommandGroup,
    help="Browse and search RL environments' tasks in a web app (answers are never shown). "
    "'repogym explore [PATH...]' serves (the serve sub-command); 'repogym explore index "
    "PATH... --out DIR' builds a snapshot to serve.",
)
app.add_typer(explore_app, name="explore")

PathsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="PATH",
        help="Dataset folders (Harbor tasks or row files). Default: the bundled examples.",
        show_default=False,
    ),
]
HubOpt = Annotated[
    bool, typer.Option("--hub", help="Add Harbor datasets from the Hugging Face Hub.")
]
OpenEnvOpt = Annotated[
    list[str] | None,
    typer.Option("--openenv", metavar="URL", help="A live OpenEnv server URL (repeatable)."),
]
DataOpt = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help="Follow the curation settings 'repogym explore admin --data DIR' writes "
        "(hidden/pinned environments, banner, runs on/off, stop requests).",
    ),
]


def _public_url(value: str | None) -> str | None:
    """Check ``--public-url`` and hand it to the app (and worker processes) through
    ``$REPOGYM_PUBLIC_URL``, where the explorer reads it."""
    import os

    from repogym.explorer.web.seo import PUBLIC_URL_ENV, normalize_public_url

    if value:
        try:
            os.environ[PUBLIC_URL_ENV] = normalize_public_url(value)
        except ValueError as exc:
            raise bad_input(f"--public-url: {exc}") from None
    return value


PublicUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--public-url",
        metavar="URL",
        envvar="REPOGYM_PUBLIC_URL",
        callback=_public_url,
        help="The explorer's public address (https://explore.example.org): the base of the "
        "sitemap's URLs, canonical links and link previews. Default: the request's Host when "
        "it is an allowed name.",
    ),
]


def bundled_examples() -> Path | None:
    """examples/tasks of a source checkout (editable install), when present."""
    here = Path(__file__).resolve()
    for root in (here.parents[3], Path.cwd()):
        cand = root / "examples" / "tasks"
        if (cand / "hello-file" / "task.toml").is_file():
            return cand
    return None


def trusted_folders_or_exit(paths: list[str], limit: list[str] | None) -> None:
    """The trust boundary for the explorer's local folders that hold Harbor tasks."""
    from repogym.taskdir import iter_task_dirs

    for p in paths:
        if not Path(p).exists():
            raise bad_input(f"{p}: no such file or directory")
    for p in paths:
        if Path(p).is_dir() and next(iter(iter_task_dirs(p)), None) is not None:
            trusted_or_exit(Path(p), limit, quiet=True)


def _serve_paths(
    paths: list[str],
    hub: bool,
    sources: list[str],
    snapshot: Path | None,
    workers: int,
    limit: list[str] | None,
) -> list[str]:
    """The folders to serve once the flags are checked (the bundled examples when none)."""
    trusted_folders_or_exit(paths, limit)
    if snapshot is not None and not snapshot.is_dir():
        raise bad_input(
            f"--snapshot {snapshot}: no such folder (build one with: repogym explore index)"
        )
    if workers < 1:
        raise bad_input("--workers must be at least 1")
    if workers > 1 and snapshot is None:
        raise bad_input("--workers N needs --snapshot DIR (build one with: repogym explore index)")
    if not paths and not hub and not sources and snapshot is None:
        examples = bundled_examples()
        if examples is None:
            raise bad_input(
                "nothing to explore: give dataset folders (e.g. repogym explore examples/tasks)"
            )
        paths = [str(examples)]
    return paths


def _open_or_exit(
    paths: list[str],
    snapshot: Path | None,
    hub: bool,
    sources: list[str],
    host: str,
    port: int,
) -> tuple[Any, float]:
    """The explorer's store (and when its opening started), or exit 2 with one line."""
    import time

    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401

        from repogym.explorer.web import create_app  # noqa: F401
    except ImportError:
        raise bad_input(
            "the explorer needs FastAPI and uvicorn: pip install 'repogym[explorer]'"
        ) from None
    from repogym.explorer.adapters.base import AdapterError
    from repogym.explorer.snapshot import SnapshotError
    from repogym.explorer.store import open_store

    port_free_or_exit(host, port)
    t0 = time.perf_counter()
    try:
        # In-process sources are served as soon as every task list is known; the task pages
        # follow when packed (the snapshot swaps under the running server).
        store = open_store(
            paths, snapshot=snapshot, hub=hub, openenv=sources, background=snapshot is None
        )
    except (AdapterError, SnapshotError, OSError, ValueError) as exc:
        raise bad_input(str(exc)) from None
    total = store.search(size=1)["total"]
    err.print(
        f"explorer: {total} environment(s) listed in {time.perf_counter() - t0:.2f}s; "
        f"open http://{host}:{port}/"
    )
    return store, t0


def _run_options_or_exit(
    runs: bool,
    workers: int,
    runs_dir: Path | None,
    run_tasks: list[Path] | None,
    limit: list[str] | None,
    sandbox: str,
) -> None:
    """Bad run options end the command before the index starts its threads (an exit while
    they run can crash the interpreter's shutdown)."""
    if runs and workers == 1:  # before anything is announced: the records' folder works
        output_folder_or_exit(runs_dir or er.default_runs_dir(), "--runs-dir")
    for p in run_tasks or []:
        if not p.is_dir():
            raise bad_input(f"--run-tasks {p}: no such folder")
    if workers == 1:
        trusted_folders_or_exit([str(p) for p in run_tasks or []], limit)
        if runs:
            sandbox_or_exit(sandbox)


@explore_app.command(DEFAULT_COMMAND)
def explore_serve(
    paths: PathsArg = None,
    hub: HubOpt = False,
    openenv: OpenEnvOpt = None,
    snapshot: Annotated[
        Path | None,
        typer.Option("--snapshot", help="Serve a published snapshot folder (pointer file)."),
    ] = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8080,
    workers: Annotated[
        int,
        typer.Option("--workers", help="Server processes (more than 1 needs --snapshot)."),
    ] = 1,
    limit: LimitOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", hidden=True)] = None,
    runs: er.RunsOpt = True,
    runs_dir: er.RunsDirOpt = None,
    run_tasks: er.RunTasksOpt = None,
    max_concurrent_runs: er.MaxRunsOpt = 2,
    runs_per_hour: er.RunsPerHourOpt = 20,
    run_time_limit: er.RunTimeOpt = 900.0,
    run_budget_usd: er.RunBudgetOpt = 1.0,
    run_max_steps: er.RunStepsOpt = 50,
    allow_command_agent: er.CommandAgentOpt = False,
    allow_internal_endpoints: er.InternalOpt = None,
    runs_visibility: er.VisibilityOpt = "public",
    sandbox: SandboxOpt = "local",
    public_url: PublicUrlOpt = None,
    data: DataOpt = None,
) -> None:
    """Serve the explorer (the default: 'repogym explore PATH...' is this command)."""
    if out_dir is not None:
        raise bad_input("--out belongs to 'repogym explore index PATH... --out DIR'")
    paths = _serve_paths(list(paths or []), hub, list(openenv or []), snapshot, workers, limit)
    _run_options_or_exit(runs, workers, runs_dir, run_tasks, limit, sandbox)
    from repogym.cli import explore_admin as ea

    curation = ea.curation_or_exit(data, workers)
    store, t0 = _open_or_exit(paths, snapshot, hub, list(openenv or []), host, port)
    from repogym.explorer.web import create_app
    from repogym.explorer.web import serve as web
    from repogym.explorer.web.http import allowed_hosts_for
    from repogym.mcp import sdk_available
    from repogym.mcp.web import explorer_mounts

    mcp_hosts = allowed_hosts_for(host)
    if sdk_available():
        err.print(f"explorer: MCP (Streamable HTTP) at http://{host}:{port}/mcp/d/<env>")
    if snapshot is None:
        web.when_ready(
            store,
            t0,
            ready=lambda s: err.print(f"explorer: task pages ready in {s:.2f}s"),
            failed=lambda line: fail(f"indexing stopped: {line}"),
        )
    if workers > 1:  # each worker process opens the snapshot itself
        assert snapshot is not None  # checked above
        if runs:
            err.print("explorer: runs from task pages are off with --workers N (one process only)")
        store.close()
        web.serve_workers(snapshot, host=host, port=port, workers=workers, mounts=explorer_mounts)
        return
    service = er.run_service(
        store,
        enabled=runs,
        roots=[str(p) for p in run_tasks or []] or paths,
        folder=runs_dir,
        host=host,
        workers=workers,
        max_concurrent=max_concurrent_runs,
        per_hour=runs_per_hour,
        time_limit_s=run_time_limit,
        budget_usd=run_budget_usd,
        max_steps=run_max_steps,
        allow_command=allow_command_agent,
        allow_internal=allow_internal_endpoints,
        visibility=runs_visibility,
        sandbox=sandbox,
    )
    if service is not None:
        where = service.why_disabled() or f"records in {service.records.path}"
        err.print(f"explorer: runs from task pages: {where}")
    ea.watch_stops(curation, service)
    server_app = create_app(
        store, mcp_hosts=mcp_hosts, runs=service, mounts=explorer_mounts, curation=curation
    )
    web.serve(server_app, host=host, port=port)


@explore_app.command("index")
def explore_index(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATH",
            help="Dataset folders (Harbor tasks or row files).",
            show_default=False,
        ),
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Folder to publish the snapshot in.")
    ] = None,
    hub: HubOpt = False,
    openenv: OpenEnvOpt = None,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
    schedule: Annotated[
        str | None,
        typer.Option(
            "--schedule",
            metavar="EVERY",
            help="Keep running: rebuild and publish every EVERY (hourly, daily, 30m, 6h, 90s) "
            "until SIGINT/SIGTERM; one log line per round.",
        ),
    ] = None,
    shrink_ratio: Annotated[
        float,
        typer.Option(
            "--shrink-guard",
            metavar="RATIO",
            help="Keep the published snapshot when the new one has fewer than RATIO of its "
            "environments or tasks, overall or per source (0 turns the guard off).",
        ),
    ] = 0.8,
    force: Annotated[
        bool,
        typer.Option("--force", help="Publish even when the shrink guard refuses (once)."),
    ] = False,
) -> None:
    """Build and publish a snapshot of the sources in --out DIR (serve it with
    'repogym explore --snapshot DIR'). A failed run leaves nothing new in DIR; a listing that
    shrank below the shrink guard is not published (exit 3)."""
    paths = list(paths or [])
    sources = list(openenv or [])
    if out_dir is None:
        raise bad_input("repogym explore index needs --out DIR")
    if out_dir.exists() and not out_dir.is_dir():
        raise bad_input(f"--out {out_dir}: exists and is not a folder")
    if not paths and not hub and not sources:
        raise bad_input("repogym explore index needs at least one PATH (or --hub / --openenv)")
    from repogym.explorer import refresh

    try:
        interval = refresh.parse_schedule(schedule) if schedule is not None else None
        guard = refresh.shrink_guard(shrink_ratio)
    except ValueError as exc:
        raise bad_input(str(exc)) from None
    trusted_folders_or_exit(paths, limit)
    from repogym.explorer.adapters.base import AdapterError
    from repogym.explorer.build import build_snapshot
    from repogym.explorer.pack import PackError
    from repogym.explorer.snapshot import SnapshotError

    if interval is not None:
        _index_schedule(paths, out_dir, hub, sources, limit, interval, guard, force, json_out)
        return
    try:
        with leave_nothing_on_failure(out_dir):
            info = build_snapshot(
                paths, out_dir, hub=hub, openenv=sources, guard=None if force else guard
            )
    except refresh.ShrinkRefused as exc:
        if json_out:
            line = {"published": False, "reason": str(exc), "problems": exc.problems}
            sys.stdout.write(json.dumps(line) + "\n")
        fail(str(exc))
        raise typer.Exit(3) from None
    except (AdapterError, SnapshotError, PackError, OSError, ValueError) as exc:
        raise bad_input(str(exc)) from None
    if json_out:
        sys.stdout.write(json.dumps(info, default=str) + "\n")
    else:
        out.print(
            f"snapshot {escape(str(info.get('snapshot')))}: {info.get('envs')} environment(s), "
            f"{info.get('tasks')} task(s), {int(info.get('bytes') or 0) / 1e6:.2f} MB, "
            f"built in {float(info.get('snapshot_seconds') or 0):.2f}s; ingest "
            f"{float(info.get('ingest_seconds') or 0):.2f}s ({info.get('pages_new', 0)} task(s) "
            f"read, {info.get('pages_reused', 0)} unchanged); pack "
            f"{int(info.get('pack_bytes') or 0) / 1e6:.2f} MB"
        )
        for line in info.get("errors") or []:
            err.print(f"skipped: {escape(str(line))}")


def _index_schedule(
    paths: list[str],
    out_dir: Path,
    hub: bool,
    sources: list[str],
    limit: list[str] | None,
    interval: float,
    guard: Any,
    force: bool,
    json_out: bool,
) -> None:
    """``explore index --schedule``: rounds until SIGINT/SIGTERM (exit 0)."""
    from repogym.explorer import refresh
    from repogym.explorer.build import build_snapshot

    def build(checked: Any) -> dict[str, Any]:
        try:  # tasks added since the last round pass the trust boundary too
            trusted_folders_or_exit(paths, limit)
        except typer.Exit:
            raise ValueError("tasks refused at the trust boundary (see above)") from None
        return build_snapshot(paths, out_dir, hub=hub, openenv=sources, guard=checked)

    def on_round(r: dict[str, Any]) -> None:
        if json_out:
            sys.stdout.write(json.dumps(r, default=str) + "\n")
            sys.stdout.flush()
        else:
            out.print(escape(refresh.format_round(r)), soft_wrap=True)

    why = refresh.run_schedule(build, interval, guard=guard, force=force, on_round=on_round)
    err.print(f"explore index: stopped ({escape(why)})")
