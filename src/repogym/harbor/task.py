"""A Harbor task directory: task.toml, instruction.md, environment/, tests/, solution/."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli
import tomli_w
from pydantic import ValidationError

from repogym.harbor.config import TaskConfig, normalize_legacy
from repogym.harbor.hashing import content_hash, read_bytes

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
MAX_TOML_DEPTH = 32


class TaskError(ValueError):
    """A task directory cannot be read. ``file`` names the offending file, relative to the task."""

    def __init__(self, message: str, file: str = TASK_TOML) -> None:
        super().__init__(message)
        self.file = file


class UntrustedTask(TaskError):
    """A task refused at the trust boundary (see :mod:`repogym.harbor.trust`)."""


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
        raw = tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
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


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write a file so that readers see the old or the new content, never half of it."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_task_toml(task_dir: Path, config: TaskConfig) -> None:
    atomic_write(task_dir / TASK_TOML, dump_task_toml(config))


def set_content_hash(task_dir: Path) -> str:
    """Compute the task's content hash and store it in ``[metadata.repo2env].content_hash``."""
    task = load_task(task_dir)
    block = task.config.metadata.setdefault("repo2env", {})
    block.pop("content_hash", None)
    # Hash what will be on disk (legacy keys translated), not what was read.
    digest = content_hash(task_dir, task.config.to_toml_dict())
    block["content_hash"] = digest
    write_task_toml(task_dir, task.config)
    return digest


def publish_task_dir(staging: Path, dest: Path) -> None:
    """Move a fully written task folder into place atomically (replacing an older one)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        os.replace(dest, old)
        os.replace(staging, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, dest)
