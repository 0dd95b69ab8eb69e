"""``repogym explore admin``: the curation app of a hosted explorer, in its own process, and
the ``--data DIR`` option with which ``repogym explore`` follows its settings."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from repogym.cli.common import HostOpt, bad_input, port_free_or_exit
from repogym.cli.explore import explore_app
from repogym.ui import err, escape


def curation_or_exit(data: Path | None, workers: int = 1) -> Any:
    """The :class:`repogym.explorer.curation.CurationReader` of ``--data DIR`` (None
    without it); exit 2 when DIR is not a folder or with more than one worker process."""
    if data is None:
        return None
    if workers > 1:
        raise bad_input("--data needs one server process (--workers 1)")
    if data.exists() and not data.is_dir():
        raise bad_input(f"--data {data}: exists and is not a folder")
    from repogym.explorer.curation import CurationReader

    data.mkdir(parents=True, exist_ok=True)
    reader = CurationReader(data)
    if reader.error:
        err.print(f"explorer: curation settings ignored until fixed: {escape(reader.error)}")
    return reader


def watch_stops(curation: Any, service: Any) -> None:
    """End the rollouts admins ask to stop (a daemon thread), when both are there."""
    if curation is None or service is None:
        return
    from repogym.explorer.curated import StopWatcher

    StopWatcher(curation, service).start()


@explore_app.command("admin")
def explore_admin(
    data: Annotated[
        Path | None,
        typer.Option("--data", help="The folder the public explorer reads (--data DIR)."),
    ] = None,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8090,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="A file whose first line is the admin token."),
    ] = None,
    accounts: Annotated[
        Path | None,
        typer.Option("--accounts", help="A file of name:scrypt$… lines (--hash-password)."),
    ] = None,
    hash_password: Annotated[
        bool,
        typer.Option(
            "--hash-password",
            help="Read a password (stdin or prompt) and print its hash for --accounts; exit.",
        ),
    ] = False,
) -> None:
    """Serve the admin app: pin, hide and feature environments, collections, the banner,
    runs on/off and limits, agents offered, rollouts off the community view, stop requests.
    Every change goes to DIR/curation.json (atomic) and DIR/curation-audit.jsonl."""
    from repogym.explorer.admin.auth import AuthConfig, AuthError
    from repogym.explorer.admin.auth import hash_password as make_hash

    if hash_password:
        secret = sys.stdin.readline().rstrip("\n") if not sys.stdin.isatty() else getpass.getpass()
        if not secret:
            raise bad_input("an empty password")
        sys.stdout.write(make_hash(secret) + "\n")
        return
    if data is None:
        raise bad_input("repogym explore admin needs --data DIR (the public explorer's --data)")
    if data.exists() and not data.is_dir():
        raise bad_input(f"--data {data}: exists and is not a folder")
    if (token_file is None) == (accounts is None):
        raise bad_input("give exactly one of --token-file F or --accounts F")
    try:
        if token_file is not None:
            auth = AuthConfig.from_token_file(token_file)
        else:
            assert accounts is not None
            auth = AuthConfig.from_accounts_file(accounts)
    except (AuthError, OSError) as exc:
        raise bad_input(str(exc)) from None
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise bad_input(
            "the admin app needs FastAPI and uvicorn: pip install 'repogym[explorer]'"
        ) from None
    from repogym.explorer.admin import create_admin_app
    from repogym.explorer.web.http import allowed_hosts_for

    port_free_or_exit(host, port)
    data.mkdir(parents=True, exist_ok=True)
    app = create_admin_app(data, auth, allowed_hosts=allowed_hosts_for(host))
    err.print(f"explorer admin: settings in {escape(str(data))}; open http://{host}:{port}/admin/")
    uvicorn.run(app, host=host, port=port, log_level="warning")
