"""``repogym serve`` (tasks as a live OpenEnv environment) and ``repogym export`` (as a
deployable package)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from repogym.cli.app import app
from repogym.cli.common import (
    MAX_SESSIONS,
    CaBundleOpt,
    HostOpt,
    JsonOpt,
    LimitOpt,
    PassEnvOpt,
    PortOpt,
    SandboxOpt,
    bad_input,
    host_limits_or_exit,
    not_a_file_or_exit,
    port_free_or_exit,
    sandbox_or_exit,
    trusted_or_exit,
    use_ca_bundle,
)
from repogym.ui import err, escape, out


@app.command()
def serve(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8000,
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    max_sessions: Annotated[
        int,
        typer.Option(
            "--max-sessions",
            min=1,
            max=MAX_SESSIONS,
            help="Concurrent episodes (one sandbox each).",
        ),
    ] = 8,
    idle_timeout: Annotated[
        float,
        typer.Option("--idle-timeout", min=1, help="Seconds before an idle session is reaped."),
    ] = 900.0,
    token: Annotated[
        str | None,
        typer.Option(
            "--orchestrator-token",
            envvar="REPOGYM_ORCHESTRATOR_TOKEN",
            help="Secret the trainer sends with evaluate/solve (default: random, printed).",
        ),
    ] = None,
    limit: LimitOpt = None,
    pass_env: PassEnvOpt = None,
    agent_submit: Annotated[
        bool,
        typer.Option(
            "--agent-submit",
            help="Let the agent send `submit` (terminal, once per episode): it gets the "
            "verifier's reward. Off: only the trainer grades (evaluate).",
        ),
    ] = False,
) -> None:
    """Serve tasks as an OpenEnv environment (WebSocket /ws, /health, /schema, /tasks)."""
    from repogym.openenv import INSTALL_HINT, OpenEnvMissing, require_openenv

    use_ca_bundle(ca_bundle)
    try:
        import uvicorn

        require_openenv()
    except OpenEnvMissing as exc:
        raise bad_input(str(exc)) from None
    except ImportError as exc:
        raise bad_input(f"{INSTALL_HINT} ({exc.name or 'uvicorn'} is missing)") from None
    sandbox_or_exit(sandbox)
    trusted_or_exit(path, limit, pass_env, strict=True)
    limits = host_limits_or_exit(limit, pass_env)
    port_free_or_exit(host, port)
    from repogym.openenv import build_app

    token = token or secrets.token_urlsafe(24)
    try:
        server_app = build_app(
            path,
            sandbox=sandbox,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout,
            orchestrator_token=token,
            limits=limits,
            agent_submit=agent_submit,
        )
    except (OpenEnvMissing, FileNotFoundError, ValueError) as exc:
        raise bad_input(str(exc)) from None
    err.print(f"orchestrator token (for the trainer, not the agent): {token}")
    uvicorn.run(server_app, host=host, port=port)


@app.command()
def export(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", help="Package folder to write (new or empty); for swebench a .jsonl file."
        ),
    ],
    fmt: Annotated[
        str, typer.Option("--format", help="Package format: openenv or swebench.")
    ] = "openenv",
    requirement: Annotated[
        str | None,
        typer.Option(
            "--requirement",
            help="repogym for the image: a pip spec (repogym==X) or a local wheel file, shipped "
            "in the package (default: this version; a wheel of it when not from an index).",
        ),
    ] = None,
    limit: LimitOpt = None,
    source: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="swebench: a git clone of the tasks' source (commit dates, owner/name).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Export tasks as a deployable package (an OpenEnv environment / HF Docker Space), or
    as SWE-bench instances (--format swebench: JSON Lines).

    The package is written beside --out and renamed into place: a failure leaves nothing.
    """
    from repogym.openenv.export import export_openenv

    if fmt == "swebench":
        from repogym.cli.export_swebench import export_swebench_cli

        export_swebench_cli(path, out_dir, source, limit, json_out)
        return
    if fmt != "openenv":
        raise bad_input(f"unknown format {fmt!r}: use --format openenv or swebench")
    not_a_file_or_exit(out_dir, "--out")
    trusted_or_exit(path, limit, strict=True)
    try:
        result = export_openenv(path, out_dir, requirement=requirement)
    except (OSError, ValueError) as exc:
        raise bad_input(str(exc)) from None
    for message in result.notes:
        err.print(escape(message))
    for message in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(message)}")
    out.print(f"exported {result.tasks} task(s) to {result.out}")
