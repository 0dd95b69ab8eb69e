"""The trust boundary: what a dataset from anyone must satisfy before a command reads it.

Datasets are untrusted input: people ``pull`` what strangers published and then ``run``,
``verify``, ``serve``, ``export``, ``push`` or index it. Every one of those commands loads tasks
through :func:`load_trusted`, which refuses a task (and with it the command: exit 2, nothing
written) when

* a file or folder of the task is a symlink leaving the task (absolute targets included), or a
  contract entry (``task.toml``, ``instruction.md``, ``environment/``, ``tests/``,
  ``solution/``) is a symlink at all, or the task holds a FIFO, socket or device node;
* ``task.toml`` is over :data:`MAX_TOML_BYTES` or nests deeper than :data:`MAX_TOML_DEPTH`;
* a resource it asks for (cpus, memory, storage, gpus, a timeout) exceeds this host's maximum
  (:class:`HostLimits`: defaults, ``~/.config/repogym/limits.toml``, ``--max KEY=VALUE``).

It also reports which host environment variables a task asks for (``"${VAR}"`` values in
``[verifier.env]``). Those reach a task only when the user names them (``--pass-env VAR`` or
``pass_env`` in the limits file); everything else expands to nothing and is reported withheld.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from repogym.taskdir.discover import iter_task_dirs
from repogym.taskdir.task import (
    MAX_TOML_DEPTH,
    TASK_TOML,
    Task,
    TaskError,
    UntrustedTask,
    load_task,
    toml_depth,
)

MAX_TOML_BYTES = 1 << 20
__all__ = [
    "MAX_TOML_BYTES",
    "MAX_TOML_DEPTH",
    "HostLimits",
    "TrustReport",
    "TrustedDataset",
    "UntrustedTask",
    "check_dataset",
    "check_files",
    "check_limits",
    "check_task",
    "expand_env",
    "load_limits",
    "load_trusted",
    "requested_env",
    "toml_depth",
]
CONTRACT_ENTRIES = ("task.toml", "instruction.md", "environment", "tests", "solution")
LIMITS_FILE_ENV = "REPOGYM_LIMITS"
_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _host_memory_mb() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 16384


@dataclass(frozen=True)
class HostLimits:
    """The most any task may ask of this host; a task asking more is refused."""

    cpus: float = 64.0
    memory_mb: int = field(default_factory=_host_memory_mb)
    storage_mb: int = 102400
    gpus: int = 8
    build_timeout_sec: float = 4 * 3600.0
    agent_timeout_sec: float = 24 * 3600.0
    verifier_timeout_sec: float = 4 * 3600.0
    pass_env: tuple[str, ...] = ()
    """Host environment variables tasks may receive through ``${VAR}`` templates."""

    def with_overrides(
        self, limits: Iterable[str] = (), pass_env: Iterable[str] = ()
    ) -> HostLimits:
        """Apply ``KEY=VALUE`` flags and extra ``--pass-env`` names (ValueError on bad input)."""
        changes: dict[str, Any] = {}
        for item in limits:
            key, sep, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep:
                raise ValueError(f"--max {item!r}: use KEY=VALUE, e.g. memory_mb=65536")
            changes[key] = value.strip()
        out = _coerce(self, changes, "--max")
        names = [*out.pass_env]
        for name in pass_env:
            if not _VAR_NAME.fullmatch(name):
                raise ValueError(f"--pass-env {name!r}: not an environment variable name")
            if name not in names:
                names.append(name)
        return replace(out, pass_env=tuple(names))

    def host_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The passed variables' values (only those set on this host)."""
        environ = os.environ if environ is None else environ
        return {name: environ[name] for name in self.pass_env if name in environ}


_NUMERIC = {f.name for f in fields(HostLimits)} - {"pass_env"}


def _coerce(base: HostLimits, changes: Mapping[str, Any], where: str) -> HostLimits:
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if key not in _NUMERIC:
            known = ", ".join(sorted(_NUMERIC))
            raise ValueError(f"{where}: unknown limit {key!r} (known: {known})")
        kind = int if key in ("memory_mb", "storage_mb", "gpus") else float
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: {key} = {value!r} is not a number") from None
        if number < 0 or number != number:
            raise ValueError(f"{where}: {key} must be a non-negative number")
        out[key] = number
    return replace(base, **out)


def limits_file() -> Path:
    """``$REPOGYM_LIMITS``, else ``$XDG_CONFIG_HOME/repogym/limits.toml`` (``~/.config``)."""
    if os.environ.get(LIMITS_FILE_ENV):
        return Path(os.environ[LIMITS_FILE_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "repogym" / "limits.toml"


def load_limits(path: Path | None = None) -> HostLimits:
    """Defaults overridden by the limits file (``[limits]`` table, ``pass_env`` list).

    A missing file is the defaults; an unreadable or malformed one is a ValueError.
    """
    path = path or limits_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HostLimits()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the limits file ({exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML ({exc})") from None
    unknown = set(data) - {"limits", "pass_env"}
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    table = data.get("limits", {})
    if not isinstance(table, dict):
        raise ValueError(f"{path}: [limits] must be a table")
    limits = _coerce(HostLimits(), table, str(path))
    names = data.get("pass_env", [])
    if not isinstance(names, list) or not all(
        isinstance(n, str) and _VAR_NAME.fullmatch(n) for n in names
    ):
        raise ValueError(f"{path}: pass_env must be a list of environment variable names")
    return replace(limits, pass_env=tuple(names))


# ------------------------------------------------------------------------------ one task


def _inside(base: str, target: str) -> bool:
    return target == base or target.startswith(base.rstrip("/") + "/")


def check_files(task_dir: Path) -> list[str]:
    """Problems with the task's files: symlinks leaving it, symlinked contract entries,
    special files. Nothing is followed."""
    problems: list[str] = []
    base = os.path.realpath(task_dir)
    for name in CONTRACT_ENTRIES:
        if os.path.islink(os.path.join(task_dir, name)):
            problems.append(f"{name} is a symlink (contract files and folders must be real)")
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(task_dir, rel) if rel else task_dir)
        except OSError as exc:
            problems.append(f"{rel or '.'}: cannot list ({exc.strerror})")
            continue
        with it:
            for entry in it:
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    problems.append(f"{child}: cannot stat ({exc.strerror})")
                    continue
                if stat.S_ISLNK(st.st_mode):
                    problem = _check_link(task_dir, base, child)
                    if problem:
                        problems.append(problem)
                elif stat.S_ISDIR(st.st_mode):
                    stack.append(child)
                elif not stat.S_ISREG(st.st_mode):
                    problems.append(f"{child} is a special file (FIFO, socket or device)")
    return sorted(problems)


def _check_link(task_dir: Path, base: str, rel: str) -> str | None:
    full = os.path.join(task_dir, rel)
    try:
        target = os.readlink(full)
    except OSError as exc:
        return f"{rel}: cannot read the symlink ({exc.strerror})"
    if os.path.isabs(target):
        return f"{rel} is a symlink to an absolute path"
    lexical = os.path.normpath(os.path.join(os.path.dirname(os.path.join(base, rel)), target))
    if not _inside(base, lexical) or not _inside(base, os.path.realpath(full)):
        return f"{rel} is a symlink leaving the task"
    return None


def check_toml(task_dir: Path) -> list[str]:
    """Problems with ``task.toml``'s size and nesting (checked before anything parses it)."""
    path = task_dir / TASK_TOML
    try:
        st = path.lstat()
    except FileNotFoundError:
        return []  # reported by load_task as a missing file
    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_TOML_BYTES:
        return [f"task.toml is {st.st_size} bytes (at most {MAX_TOML_BYTES})"]
    return []


_REQUESTS = (
    ("environment", "cpus", "cpus"),
    ("environment", "memory_mb", "memory_mb"),
    ("environment", "storage_mb", "storage_mb"),
    ("environment", "gpus", "gpus"),
    ("environment", "build_timeout_sec", "build_timeout_sec"),
    ("agent", "timeout_sec", "agent_timeout_sec"),
    ("verifier", "timeout_sec", "verifier_timeout_sec"),
)


def check_limits(task: Task, limits: HostLimits) -> list[str]:
    """Requests above this host's maxima."""
    problems = []
    for table, key, limit_key in _REQUESTS:
        asked = getattr(getattr(task.config, table), key)
        most = getattr(limits, limit_key)
        if asked is not None and asked > most:
            problems.append(
                f"[{table}] {key} = {asked:g} exceeds this host's maximum {most:g} "
                f"(raise it with --max {limit_key}=… or in {limits_file()})"
            )
    for step in task.config.steps or []:
        for phase, limit_key in (
            ("agent", "agent_timeout_sec"),
            ("verifier", "verifier_timeout_sec"),
        ):
            asked = getattr(step, phase).timeout_sec
            most = getattr(limits, limit_key)
            if asked is not None and asked > most:
                problems.append(
                    f"[steps.{phase}] timeout_sec = {asked:g} of step {step.name!r} exceeds "
                    f"this host's maximum {most:g} (raise it with --max {limit_key}=…)"
                )
    return problems


def requested_env(task: Task | Mapping[str, Any]) -> list[str]:
    """Host environment variables a ``[verifier.env]`` table (or a task's) asks for through
    ``${VAR}`` / ``${VAR:-default}`` templates, in order: names only, never values."""
    env = task.config.verifier.env if isinstance(task, Task) else task
    names: list[str] = []
    for value in env.values():
        for m in _TEMPLATE.finditer(str(value)):
            if m.group(1) not in names:
                names.append(m.group(1))
    return names


def expand_env(
    env: Mapping[str, str], allowed: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Expand ``${VAR}`` / ``${VAR:-default}`` templates in ``env`` values from ``allowed``
    only; any other variable becomes its default or nothing. Returns (env, withheld names)."""
    withheld: list[str] = []

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in allowed:
            return allowed[name]
        if name not in withheld:
            withheld.append(name)
        return m.group(2) or ""

    return {k: _TEMPLATE.sub(sub, str(v)) for k, v in env.items()}, withheld


@dataclass
class TrustReport:
    """What the boundary found for one task directory."""

    path: Path
    problems: list[str] = field(default_factory=list)
    env_requests: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    task: Task | None = None
    error: TaskError | None = None
    """The task could not be read at all (malformed TOML, missing file): not a refusal."""

    @property
    def refused(self) -> bool:
        return bool(self.problems)


def check_task(task_dir: Path | str, limits: HostLimits | None = None) -> TrustReport:
    """Run every check on one task directory; never raises for the task's content."""
    task_dir = Path(task_dir)
    limits = limits or HostLimits()
    report = TrustReport(task_dir)
    report.problems += check_files(task_dir)
    report.problems += check_toml(task_dir)
    if report.problems:
        return report
    try:
        task = load_task(task_dir)
    except UntrustedTask as exc:
        report.problems.append(str(exc))
        return report
    except TaskError as exc:
        report.error = exc
        return report
    report.problems += check_limits(task, limits)
    report.env_requests = requested_env(task)
    report.withheld = [n for n in report.env_requests if n not in limits.pass_env]
    task.host_env = limits.host_env()
    report.task = task
    return report


@dataclass
class TrustedDataset:
    """Every task under a folder after the boundary."""

    reports: list[TrustReport]

    @property
    def tasks(self) -> list[Task]:
        return [r.task for r in self.reports if r.task is not None and not r.refused]

    @property
    def refused(self) -> list[TrustReport]:
        return [r for r in self.reports if r.refused]

    @property
    def unreadable(self) -> list[TrustReport]:
        return [r for r in self.reports if r.error is not None]

    def withheld(self) -> dict[str, list[str]]:
        """Withheld variable → ids of the tasks that asked for it."""
        out: dict[str, list[str]] = {}
        for r in self.reports:
            for name in r.withheld:
                out.setdefault(name, []).append(r.path.name)
        return out

    def refusal_lines(self) -> list[str]:
        return [f"{r.path.name}: refused: {'; '.join(r.problems)}" for r in self.refused]


def check_dataset(root: Path | str, limits: HostLimits | None = None) -> TrustedDataset:
    """:func:`check_task` on every task under ``root`` (found by where ``task.toml`` is)."""
    limits = limits or HostLimits()
    return TrustedDataset([check_task(d, limits) for d in iter_task_dirs(root)])


def load_trusted(root: Path | str, limits: HostLimits | None = None) -> list[Task]:
    """The tasks under ``root``; :class:`UntrustedTask` naming the first refusal when any task
    is refused (callers that want every reason use :func:`check_dataset`)."""
    found = check_dataset(root, limits)
    if found.refused:
        first = found.refused[0]
        raise UntrustedTask(f"{first.path.name}: refused: {'; '.join(first.problems)}")
    return found.tasks
