"""Pydantic model of Harbor's ``task.toml`` (task schema 1.x), lenient on unknown keys.

Every table allows extra keys so that a read → write round trip keeps whatever a newer Harbor, or
another tool, put there. Legacy spellings (``version``, ``allow_internet``, ``memory = "2G"``,
``storage = "10G"``) are translated by :func:`normalize_legacy` before validation.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA_VERSION = "1.4"
"""The Harbor task schema repogym writes."""
LEGACY_VERSION = "1.0"
"""``version``: the legacy spelling older readers (and repo2rlenv) require next to
``schema_version``; Harbor takes ``schema_version`` when both are present."""
NETWORK_MODES = ("public", "no-network", "allowlist")
NetworkMode = Literal["public", "no-network", "allowlist"]
VerifierEnvironmentMode = Literal["shared", "separate"]
MultiStepRewardStrategy = Literal["mean", "final"]
STEP_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


class _Table(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_assignment=False)

    def to_toml_dict(self) -> dict[str, Any]:
        """Keys that were read, set or changed from their defaults (extras included); no Nones.

        Writing only these keeps a read → write round trip faithful to the file, while a value
        changed in code (even a mutated default like ``metadata``) is still written.
        """
        out: dict[str, Any] = {}
        unset_fields = set(type(self).model_fields) - self.model_fields_set
        for name, field_info in type(self).model_fields.items():
            value = getattr(self, name)
            if value is None:
                continue
            if name in unset_fields:
                default = field_info.get_default(call_default_factory=True)
                if value == default:
                    continue
            out[name] = _plain(value)
        for name, value in (self.model_extra or {}).items():
            if value is not None:
                out[name] = _plain(value)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, _Table):
        return value.to_toml_dict()
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    return value


class Author(_Table):
    name: str | None = None
    email: str | None = None


class TaskInfo(_Table):
    """``[task]``: identity of the task."""

    name: str | None = None
    description: str | None = None
    authors: list[Author | str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class AgentConfig(_Table):
    timeout_sec: float = Field(default=600.0, gt=0)
    user: str | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class EnvironmentConfig(_Table):
    build_timeout_sec: float = Field(default=600.0, gt=0)
    docker_image: str | None = None
    os: str | None = None
    cpus: float = Field(default=1, gt=0)
    memory_mb: int = Field(default=2048, gt=0)
    storage_mb: int = Field(default=10240, gt=0)
    gpus: int = Field(default=0, ge=0)
    network_mode: NetworkMode = "public"
    allowed_hosts: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    type: str | None = None
    """Harbor's environment type (``docker`` when absent); others are refused (see preflight)."""
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    """``[[environment.mcp_servers]]``: MCP servers offered to the agent (not supported yet)."""
    healthcheck: dict[str, Any] | None = None


class VerifierConfig(_Table):
    """``[verifier]``; ``environment_mode``/``environment`` choose where it runs (Harbor's
    shared vs separate verifier environments)."""

    timeout_sec: float = Field(default=600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None
    environment_mode: VerifierEnvironmentMode | None = None
    environment: EnvironmentConfig | None = None

    @model_validator(mode="after")
    def _mode_matches_environment(self) -> VerifierConfig:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError(
                "environment_mode = 'shared' cannot have a [verifier.environment] table"
            )
        return self


def verifier_mode(
    verifier: VerifierConfig | StepVerifierConfig, fallback: VerifierConfig | None = None
) -> VerifierEnvironmentMode:
    """Harbor's rule: an explicit mode wins; else a verifier environment table means
    ``separate``; else the task's own mode (for a step), else ``shared``."""
    if verifier.environment_mode is not None:
        return verifier.environment_mode
    if verifier.environment is not None:
        return "separate"
    return verifier_mode(fallback) if fallback is not None else "shared"


class ArtifactSpec(_Table):
    """One ``artifacts`` entry written as a table: a path copied out of the agent's sandbox."""

    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)


Artifact = str | ArtifactSpec


class StepAgentConfig(_Table):
    """``[steps.agent]``: unset values fall back to the task's ``[agent]``."""

    timeout_sec: float | None = Field(default=None, gt=0)
    user: str | None = None


class StepVerifierConfig(_Table):
    """``[steps.verifier]``: unset values fall back to the task's ``[verifier]``."""

    timeout_sec: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    environment_mode: VerifierEnvironmentMode | None = None
    environment: EnvironmentConfig | None = None


class StepConfig(_Table):
    """One ``[[steps]]`` entry: its files live in ``steps/<name>/`` (``instruction.md``,
    optional ``tests/``, ``solution/``, ``workdir/`` with ``setup.sh``)."""

    name: str
    agent: StepAgentConfig = Field(default_factory=StepAgentConfig)
    verifier: StepVerifierConfig = Field(default_factory=StepVerifierConfig)
    min_reward: float | dict[str, float] | None = None
    """Stop after this step when its rewards miss the threshold (a number gates ``reward``)."""
    artifacts: list[Artifact] = Field(default_factory=list)
    healthcheck: dict[str, Any] | None = None

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not STEP_NAME_RE.fullmatch(v) or v in (".", ".."):
            raise ValueError(f"step name {v!r} must be one path component (letters, digits, ._-)")
        return v


class SolutionConfig(_Table):
    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(_Table):
    """One ``task.toml``."""

    schema_version: str = SCHEMA_VERSION
    task: TaskInfo = Field(default_factory=TaskInfo)
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    steps: list[StepConfig] | None = None
    multi_step_reward_strategy: MultiStepRewardStrategy | None = None
    artifacts: list[Artifact] = Field(default_factory=list)
    """Paths copied out of the agent's sandbox into a separate verifier's."""

    @field_validator("steps")
    @classmethod
    def _unique_steps(cls, v: list[StepConfig] | None) -> list[StepConfig] | None:
        names = [s.name for s in v or []]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"step names must be unique ({', '.join(dupes)} repeated)")
        return v

    @field_validator("schema_version", mode="before")
    @classmethod
    def _version_str(cls, v: Any) -> Any:
        if isinstance(v, int | float):
            return str(v)
        return v

    @field_validator("schema_version")
    @classmethod
    def _version_1x(cls, v: str) -> str:
        if not re.fullmatch(r"1(\.\d+){0,2}", v):
            raise ValueError(
                f"unsupported schema_version {v!r} (repogym reads Harbor task schema 1.x)"
            )
        return v

    @property
    def repo2env(self) -> dict[str, Any] | None:
        """The ``[metadata.repo2env]`` provenance block, when present."""
        block = self.metadata.get("repo2env")
        return block if isinstance(block, dict) else None


def new_task_config(
    *,
    name: str,
    description: str,
    keywords: list[str],
    metadata: dict[str, Any],
    agent: AgentConfig,
    verifier: VerifierConfig,
    environment: EnvironmentConfig,
    solution: SolutionConfig,
) -> TaskConfig:
    """The config of a new task at :data:`SCHEMA_VERSION` (plus the legacy ``version`` key).

    Write it with :func:`repogym.taskdir.task.save_task_config`, which adds the content hash."""
    return TaskConfig(
        version=LEGACY_VERSION,  # type: ignore[call-arg]  # an extra key, kept for old readers
        schema_version=SCHEMA_VERSION,
        task=TaskInfo(name=name, description=description, keywords=keywords),
        metadata=metadata,
        agent=agent,
        verifier=verifier,
        environment=environment,
        solution=solution,
    )


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SIZE_FACTOR_MB = {"": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def parse_size_mb(value: Any) -> int:
    """``"2G"`` → 2048, ``"512M"`` → 512, ``"10Gi"`` → 10240; small bare numbers are MB."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int | float):
        return int(value) if value < 1 << 20 else int(value / (1024 * 1024))
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"not a size: {value!r} (use e.g. '2G' or '512M')")
    number, unit = float(m.group(1)), m.group(2).lower()
    if unit == "" and number < 1 << 20:
        return int(number)  # a plain small number is already megabytes
    return max(1, round(number * _SIZE_FACTOR_MB[unit]))


def normalize_legacy(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Translate Harbor's legacy keys to the current schema; return the new dict and warnings.

    The input is not modified. Translated keys are dropped (Harbor no longer writes them).
    """
    warnings: list[str] = []
    out = dict(data)
    if "version" in out and "schema_version" not in out:
        legacy = str(out.pop("version"))
        if re.fullmatch(r"1(\.\d+){0,2}", legacy):
            out["schema_version"] = legacy
            warnings.append(f"legacy key 'version' read as schema_version = {legacy!r}")
        else:
            # Task templates put their own version there ("2.0"); Harbor takes any string
            # and reads the task as its current schema, and so does repogym.
            out["schema_version"] = SCHEMA_VERSION
            warnings.append(
                f"legacy key 'version' = {legacy!r} is not a Harbor task schema version: "
                f"read as schema_version = {SCHEMA_VERSION!r}, as Harbor does"
            )
    # With both present, schema_version wins (as in Harbor) and `version` stays, unwarned, as a
    # key kept for older readers of the format.
    if isinstance(out.get("environment"), dict):
        out["environment"] = _normalize_env(out["environment"], "environment", warnings)
    verifier = out.get("verifier")
    if isinstance(verifier, dict) and isinstance(verifier.get("environment"), dict):
        out["verifier"] = {
            **verifier,
            "environment": _normalize_env(
                verifier["environment"], "verifier.environment", warnings
            ),
        }
    steps = out.get("steps")
    if isinstance(steps, list):
        out["steps"] = [_normalize_step(step, warnings) for step in steps]
    return out, warnings


def _normalize_step(step: Any, warnings: list[str]) -> Any:
    verifier = step.get("verifier") if isinstance(step, dict) else None
    if not isinstance(verifier, dict) or not isinstance(verifier.get("environment"), dict):
        return step
    where = f"steps.{step.get('name', '?')}.verifier.environment"
    env = _normalize_env(verifier["environment"], where, warnings)
    return {**step, "verifier": {**verifier, "environment": env}}


def _normalize_env(raw: dict[str, Any], where: str, warnings: list[str]) -> dict[str, Any]:
    """One environment table with ``allow_internet``/``memory``/``storage`` translated."""
    env = dict(raw)
    if "allow_internet" in env:
        allow = env.pop("allow_internet")
        if "network_mode" not in env:
            env["network_mode"] = "public" if allow else "no-network"
        warnings.append(
            f"legacy key '{where}.allow_internet = {str(allow).lower()}' read as "
            f"network_mode = {env['network_mode']!r}"
        )
    for legacy_key, new_key in (("memory", "memory_mb"), ("storage", "storage_mb")):
        if legacy_key in env:
            raw_value = env.pop(legacy_key)
            if new_key not in env:
                env[new_key] = parse_size_mb(raw_value)
            warnings.append(
                f"legacy key '{where}.{legacy_key} = {raw_value!r}' read as "
                f"{new_key} = {env[new_key]}"
            )
    return env
