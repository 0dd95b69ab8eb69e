"""A Harbor task directory: task.toml, instruction.md, environment/, tests/, solution/."""

from __future__ import annotations

import errno
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from repogym.atomic import atomic_write, publish_dir
from repogym.errors import RepogymError
from repogym.taskdir.compose import Compose, ComposeError, task_compose
from repogym.taskdir.config import TaskConfig, normalize_legacy
from repogym.taskdir.hashing import content_hash, list_task_files, read_bytes
from repogym.taskdir.provenance import Provenance

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
MAX_TOML_DEPTH = 32


class TaskError(RepogymError, ValueError):
    """A task directory cannot be read. ``file`` names the offending file, relative to the task."""

    def __init__(self, message: str, file: str = TASK_TOML) -> None:
        super().__init__(message)
        self.file = file


class UntrustedTask(TaskError):
    """A task refused at the trust boundary (see :mod:`repogym.taskdir.trust`)."""


def toml_depth(value: Any) -> int:
    """How deeply tables and arrays nest (iterative: safe on any input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def format_validation_error(exc: ValidationError) -> str:
    """A pydantic error as one line: ``environment.memory_mb: Input should be greater than 0``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_task_toml(text: str) -> tuple[TaskConfig, dict[str, Any], list[str]]:
    """Parse ``task.toml`` text into (model, raw dict as read, legacy-key warnings).

    Raises :class:`TaskError` with a one-line reason on bad TOML or a schema mismatch.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if text.startswith("\ufeff"):  # Harbor's parser refuses it too: a reason, not a guess
            raise TaskError(
                "invalid TOML: the file starts with a byte-order mark (EF BB BF), which TOML "
                "does not allow (Harbor refuses it too); save it as UTF-8 without BOM"
            ) from None
        raise TaskError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise UntrustedTask(
            f"task.toml nests too deeply (at most {MAX_TOML_DEPTH} levels)"
        ) from None
    depth = toml_depth(raw)
    if depth > MAX_TOML_DEPTH:
        raise UntrustedTask(f"task.toml nests {depth} levels deep (at most {MAX_TOML_DEPTH})")
    try:
        data, warnings = normalize_legacy(raw)
        config = TaskConfig.model_validate(data)
    except ValidationError as exc:
        raise TaskError(f"schema: {format_validation_error(exc)}") from None
    except ValueError as exc:
        raise TaskError(f"schema: {exc}") from None
    return config, raw, warnings


@dataclass
class Task:
    """A task read from disk."""

    path: Path
    config: TaskConfig
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    """``task.toml`` exactly as parsed (before legacy translation)."""
    warnings: list[str] = field(default_factory=list)
    host_env: dict[str, str] = field(default_factory=dict, repr=False)
    """Host environment variables the user passed to this task (``--pass-env``); templates
    naming anything else expand to nothing. Filled by the trust boundary."""
    _compose: dict[tuple[tuple[str, str], ...], Compose | str | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def id(self) -> str:
        """The directory name: stable, unique within a dataset."""
        return self.path.name

    @property
    def name(self) -> str:
        """``[task].name`` when set, else the directory name."""
        return self.config.task.name or self.path.name

    @property
    def instruction_path(self) -> Path:
        return self.path / INSTRUCTION

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def repo2env(self) -> dict[str, Any] | None:
        return self.config.repo2env

    def compose(self) -> Compose | None:
        """The task's compose services (None without a compose file), parsed once for the
        task (per host environment it was given); every phase takes this one object.
        :class:`ComposeError` when the file cannot be read."""
        key = tuple(sorted(self.host_env.items()))
        if key not in self._compose:
            try:
                self._compose[key] = task_compose(self.config, self.path, self.host_env)
            except ComposeError as exc:
                self._compose[key] = str(exc)
        got = self._compose[key]
        if isinstance(got, str):
            raise ComposeError(got)
        return got

    @property
    def runs_offline(self) -> bool:
        """Whether the task's compose file takes ``main`` off the network (``network_mode:
        none``): then every phase runs with no network, whatever ``[environment]`` says."""
        try:
            compose = self.compose()
        except ComposeError:
            return False
        return compose is not None and compose.main.offline

    @property
    def provenance(self) -> Provenance | None:
        """The ``[metadata.repo2env]`` block read and validated, or None when the task has none
        (a foreign task) or it is not a table."""
        block = self.config.repo2env
        return None if block is None else Provenance.read(block)

    @property
    def is_multi_step(self) -> bool:
        """Whether ``task.toml`` declares ``[[steps]]``."""
        return bool(self.config.steps)

    def step_dir(self, name: str) -> Path:
        """``steps/<name>/``: the step's instruction, tests, solution and workdir."""
        return self.path / "steps" / name

    def instruction(self) -> str:
        """``instruction.md``; a multi-step task without one shows its steps' instructions."""
        if self.is_multi_step and not self.instruction_path.exists():
            return "\n\n".join(
                f"## Step {i}: {step.name}\n\n{self.step_instruction(step.name)}"
                for i, step in enumerate(self.config.steps or [], start=1)
            )
        return _read_text(self.instruction_path, INSTRUCTION)

    def step_instruction(self, name: str) -> str:
        """``steps/<name>/instruction.md``: what the agent is told in that step."""
        return _read_text(self.step_dir(name) / INSTRUCTION, f"steps/{name}/{INSTRUCTION}")

    def compute_hash(self) -> str:
        return content_hash(self.path, self.raw or None)


def _read_text(path: Path, rel: str) -> str:
    """A task's text file (no symlinks, UTF-8, newlines normalised); TaskError naming ``rel``."""
    try:
        data = read_bytes(str(path), follow=False)
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except FileNotFoundError:
        raise TaskError(f"{rel} is missing", rel) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TaskError(f"{rel} is a symlink", rel) from None
        raise TaskError(f"cannot read {rel}: {exc.strerror}", rel) from None
    except UnicodeDecodeError as exc:
        raise TaskError(f"{rel} is not UTF-8 ({exc.reason})", rel) from None


def load_task(path: Path | str) -> Task:
    """Read a task directory (the folder holding ``task.toml``)."""
    path = Path(path)
    toml_path = path / TASK_TOML
    try:
        text = read_bytes(str(toml_path), follow=False).decode("utf-8")
    except FileNotFoundError:
        raise TaskError("task.toml is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedTask("task.toml is a symlink") from None
        raise TaskError(f"cannot read task.toml: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TaskError(f"task.toml is not UTF-8 ({exc.reason})") from None
    config, raw, warnings = parse_task_toml(text)
    return Task(path=path, config=config, raw=raw, warnings=warnings)


def dump_task_toml(config: TaskConfig) -> str:
    """Serialize a config to TOML text (only keys that were read or set)."""
    return tomli_w.dumps(config.to_toml_dict())


def write_task_toml(task_dir: Path, config: TaskConfig) -> None:
    """Write ``config`` as the task's ``task.toml`` (atomically; the content hash untouched)."""
    atomic_write(task_dir / TASK_TOML, dump_task_toml(config))


def _files_with_toml(task_dir: Path) -> list[tuple[str, bool]]:
    """The task's files as the hash sees them once ``task.toml`` is (re)written."""
    files = [f for f in list_task_files(task_dir) if f[0] != TASK_TOML]
    files.append((TASK_TOML, False))
    files.sort(key=lambda item: item[0].encode("utf-8", "surrogateescape"))
    return files


def save_task_config(task_dir: Path, config: TaskConfig, *, rehash: bool = True) -> str | None:
    """Write ``config`` as the task's ``task.toml`` (atomically), with
    ``[metadata.repo2env].content_hash`` recomputed over the task's files when ``rehash``.

    The hash is computed once, from the model as it will be on disk (legacy keys translated),
    before the single write. Returns the new hash (None without ``rehash``)."""
    if not rehash:
        write_task_toml(task_dir, config)
        return None
    block = config.metadata.setdefault("repo2env", {})
    block.pop("content_hash", None)
    digest = content_hash(task_dir, config.to_toml_dict(), files=_files_with_toml(task_dir))
    block["content_hash"] = digest
    write_task_toml(task_dir, config)
    return digest


def update_task_toml(
    task_dir: Path, change: Callable[[TaskConfig], None] | None = None, *, rehash: bool = True
) -> str | None:
    """Load a task's ``task.toml``, apply ``change`` to its model, write it back atomically and
    refresh the content hash once. Returns the new hash (None without ``rehash``).

    Top-level tables the change leaves alone are written back exactly as read (legacy keys and
    number spellings included), so an update never alters content it did not mean to — with
    ``rehash=False`` (facts outside the hash, such as ``[metadata.repo2env.evaluation]``) the
    recorded hash stays valid, and a stale one stays stale, never silently blessed."""
    task = load_task(task_dir)
    before = task.config.to_toml_dict()
    if change is not None:
        change(task.config)
    after = task.config.to_toml_dict()
    data = dict(task.raw)
    for key in before.keys() | after.keys():
        if key not in after:
            data.pop(key, None)
        elif before.get(key) != after[key]:
            data[key] = after[key]
    digest = None
    if rehash:
        metadata = data["metadata"] = dict(data.get("metadata") or {})
        block = metadata["repo2env"] = dict(metadata.get("repo2env") or {})
        block.pop("content_hash", None)
        digest = content_hash(task_dir, data, files=_files_with_toml(task_dir))
        block["content_hash"] = digest
    atomic_write(task_dir / TASK_TOML, tomli_w.dumps(data))
    return digest


def set_content_hash(task_dir: Path) -> str:
    """Compute the task's content hash and store it in ``[metadata.repo2env].content_hash``."""
    digest = save_task_config(task_dir, load_task(task_dir).config)
    assert digest is not None
    return digest


def publish_task_dir(staging: Path, dest: Path) -> None:
    """Move a fully written task folder into place atomically (replacing an older one)."""
    publish_dir(staging, dest)
