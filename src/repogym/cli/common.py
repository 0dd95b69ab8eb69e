"""What several commands share: option types, the trust boundary, input checks that end the
command with one line on stderr and exit 2."""

from __future__ import annotations

import errno
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from repogym.atomic import MIN_FREE_BYTES, free_bytes
from repogym.ui import err, escape, fail

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
SandboxOpt = Annotated[
    str, typer.Option("--sandbox", help="Sandbox backend: local (bubblewrap, default) or docker.")
]
MAX_JOBS = 256
"""Ceiling of every ``--jobs`` (parallel trials, workers or repositories)."""
MAX_ATTEMPTS = 1000
"""Ceiling of ``--attempts`` (trials or rollouts per task), ``--reruns`` and ``--mutants``."""
MAX_SESSIONS = 4096
"""Ceiling of ``serve --max-sessions``."""
JobsOpt = Annotated[
    int, typer.Option("--jobs", "-j", min=1, max=MAX_JOBS, help="Trials run in parallel.")
]
CaBundleOpt = Annotated[
    Path | None,
    typer.Option(
        "--ca-bundle",
        help="PEM CA bundle offered inside sandboxes (build steps and sessions; e.g. "
        '"$SSL_CERT_FILE" where a proxy intercepts TLS). Default: $REPOGYM_CA_BUNDLE.',
    ),
]
LimitOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--max",
        metavar="KEY=VALUE",
        help="Raise or lower this host's maximum for what a task may ask (cpus, memory_mb, "
        "storage_mb, gpus, build/agent/verifier_timeout_sec); default from "
        "~/.config/repogym/limits.toml. Tasks asking more are refused.",
    ),
]
PassEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        metavar="VAR",
        help='Let the "${VAR}" templates of tasks\' verifier env take this host variable '
        "(repeatable). Others expand to nothing.",
    ),
]
HostOpt = Annotated[str, typer.Option("--host", help="Interface to listen on.")]
PORT_MAX = 65535


PortOpt = Annotated[int, typer.Option("--port", min=1, max=PORT_MAX, help="TCP port (1-65535).")]


def bad_input(message: str) -> typer.Exit:
    """Print ``message`` as the one error line and return the exit (2) to raise."""
    fail(message)
    return typer.Exit(2)


def output_folder_or_exit(path: Path, flag: str) -> None:
    """Create ``path`` now and prove it takes a file, so a read-only or full disk stops the
    command (one line, exit 2) before any work is announced; a folder made here is removed
    again on failure."""
    from repogym.atomic import prepare_output_folder

    try:
        prepare_output_folder(path)
    except OSError as exc:
        reason = "no space left on the device" if exc.errno == errno.ENOSPC else exc.strerror
        raise bad_input(f"{flag} {path}: cannot write there ({reason})") from None


def writable_tasks_or_exit(tasks: list[Any], why: str) -> None:
    """Exit 2 unless every task's ``task.toml`` can be rewritten (``why``: what would be
    written), checked before any work."""
    for task in tasks:
        for target in (task.path, task.path / "task.toml"):
            if not os.access(target, os.W_OK):
                reason = os.strerror(errno.EROFS) if _read_only(target) else "permission denied"
                raise bad_input(f"{target}: cannot record {why} ({reason})")
        if _free_bytes(task.path) < MIN_FREE_BYTES:
            raise bad_input(f"{task.path}: cannot record {why} (no space left on the device)")


def _free_bytes(path: Path) -> int:
    try:
        return free_bytes(path)
    except OSError:
        return MIN_FREE_BYTES  # unknown: let the write itself report


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def task_dirs_or_exit(path: Path) -> list[Path]:
    from repogym.taskdir import iter_task_dirs

    if not path.exists():
        raise bad_input(f"{path}: no such file or directory")
    if path.is_file():
        path = path.parent if path.name == "task.toml" else path
    dirs = list(iter_task_dirs(path))
    if not dirs:
        raise bad_input(f"{path}: no task.toml found (a task is a folder holding task.toml)")
    return dirs


def host_limits_or_exit(limit: list[str] | None, pass_env: list[str] | None = None) -> Any:
    from repogym.taskdir.trust import load_limits

    try:
        return load_limits().with_overrides(limit or (), pass_env or ())
    except ValueError as exc:
        raise bad_input(str(exc)) from None


def trusted_or_exit(
    path: Path,
    limit: list[str] | None = None,
    pass_env: list[str] | None = None,
    *,
    quiet: bool = False,
    strict: bool = False,
) -> list:  # list[Task]
    """The trust boundary for a command that reads a dataset: refused tasks stop the command
    (one line each, exit 2, nothing written); unreadable ones are skipped with a line, or with
    ``strict`` (a command that packages or serves the whole folder) stop it too; withheld host
    variables are reported."""
    from repogym.taskdir.trust import check_task

    limits = host_limits_or_exit(limit, pass_env)
    reports = [check_task(d, limits) for d in task_dirs_or_exit(path)]
    refused = [r for r in reports if r.refused]
    for r in refused:
        fail(f"{r.path.name}: refused: {'; '.join(r.problems)}")
    if refused:
        fail(f"{len(refused)} task(s) refused at the trust boundary; nothing was run or written")
        raise typer.Exit(2)
    unreadable = [(r.path, r.error) for r in reports if r.error is not None]
    for task_dir, error in unreadable:
        note = "" if strict else " (skipped)"
        fail(f"{task_dir.name}: {error.file}: {error}{note}")
    if strict and unreadable:
        fail(
            f"{len(unreadable)} task(s) cannot be read; fix or remove them (repogym validate "
            f"{path}); nothing was written"
        )
        raise typer.Exit(2)
    tasks = [r.task for r in reports if r.task is not None]
    if not tasks:
        raise bad_input(f"{path}: no readable task")
    withheld: dict[str, list[str]] = {}
    for r in reports:
        for name in r.withheld:
            withheld.setdefault(name, []).append(r.path.name)
    if withheld and not quiet:
        for name, ids in sorted(withheld.items()):
            shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
            err.print(
                f"[yellow]withheld:[/] host variable {escape(name)} asked by {escape(shown)}; "
                f"it expands to nothing (pass it with --pass-env {escape(name)})"
            )
    return tasks


def use_ca_bundle(path: Path | None) -> None:
    """Check ``--ca-bundle`` and hand it to every sandbox backend this command creates."""
    if path is None:
        return
    from repogym.sandbox import ca_bundle

    try:
        ca_bundle.use_ca_bundle(path)
    except ca_bundle.CaBundleError as exc:
        raise bad_input(str(exc)) from None


def sandbox_or_exit(name: str, *, here: bool = True) -> None:
    """Stop at once (exit 2) when the sandbox backend ``name`` is unknown or unavailable.

    ``here=False`` (the work runs on other machines): only the name is checked."""
    from repogym.sandbox import SandboxError, backend_names, get_backend

    if not here:
        if name not in backend_names():
            raise bad_input(
                f"unknown sandbox backend {name!r}; choose one of: {', '.join(backend_names())}"
            )
        return
    try:
        get_backend(name)
    except SandboxError as exc:
        raise bad_input(str(exc)) from None


def not_a_file_or_exit(path: Path, what: str) -> None:
    """``what`` (e.g. ``--out``) must name a folder: stop when ``path`` is an existing file."""
    if path.exists() and not path.is_dir():
        raise bad_input(f"{what} {path}: exists and is not a folder")


def port_free_or_exit(host: str, port: int) -> None:
    """Stop at once (exit 2) when nothing could listen on ``host:port``: the port is in use,
    or the address is not this machine's."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise bad_input(f"--host {host}: {exc.strerror or exc}") from None
    family, kind, proto, _name, addr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
        try:
            sock.bind(addr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise bad_input(f"port {port} in use on {host}: pick another --port") from None
            raise bad_input(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@contextmanager
def leave_nothing_on_failure(folder: Path) -> Iterator[None]:
    """Entries a failed (or interrupted) command created in ``folder`` are removed, and the
    folder itself when the command created it; what was there before stays."""
    existed = folder.is_dir()
    before = {p.name for p in folder.iterdir()} if existed else set()
    try:
        yield
    except BaseException:
        if not existed:
            shutil.rmtree(folder, ignore_errors=True)
        elif folder.is_dir():
            for entry in folder.iterdir():
                if entry.name in before:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        raise


ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where the work runs: local (threads on this machine) or ray (an existing Ray "
        "cluster; pip install 'repogym[ray]').",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="The Ray cluster's address (host:port of its head, or ray://host:port). "
        "Default: $RAY_ADDRESS, else a cluster started on this machine with 'ray start'.",
    ),
]


def executor_or_exit(
    name: str, *, jobs: int = 1, address: str | None = None, env: dict[str, str] | None = None
) -> Any:
    """The executor for ``--executor``/``--ray-address``, or one line and exit 2."""
    from repogym.executors import ExecutorError, get_executor

    if address is not None and name != "ray":
        raise bad_input("--ray-address is for --executor ray")
    try:
        return get_executor(name, jobs=jobs, address=address, env=env)
    except ExecutorError as exc:
        raise bad_input(str(exc)) from None


def remote_executor_or_exit(
    name: str, *, address: str | None = None, env: dict[str, str] | None = None
) -> Any:
    """None for ``--executor local`` (the command works in this process, as it always has);
    else the executor (Ray: connected now, ``env`` for its workers), or one line and exit 2."""
    if name == "local" and address is None:
        return None
    return executor_or_exit(name, address=address, env=env)
