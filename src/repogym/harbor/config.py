"""Pydantic model of Harbor's ``task.toml`` (task schema 1.x), lenient on unknown keys.

Every table allows extra keys so that a read → write round trip keeps whatever a newer Harbor, or
another tool, put there. Legacy spellings (``version``, ``allow_internet``, ``memory = "2G"``,
``storage = "10G"``) are translated by :func:`normalize_legacy` before validation.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = "1.4"
NETWORK_MODES = ("public", "no-network", "allowlist")
NetworkMode = Literal["public", "no-network", "allowlist"]


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


class VerifierConfig(_Table):
    timeout_sec: float = Field(default=600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
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
        out["schema_version"] = str(out.pop("version"))
        warnings.append(f"legacy key 'version' read as schema_version = {out['schema_version']!r}")
    # With both present, schema_version wins (as in Harbor) and `version` stays, unwarned, as a
    # key kept for older readers of the format.
    env = out.get("environment")
    if isinstance(env, dict):
        env = dict(env)
        if "allow_internet" in env:
            allow = env.pop("allow_internet")
            if "network_mode" not in env:
                env["network_mode"] = "public" if allow else "no-network"
            warnings.append(
                f"legacy key 'environment.allow_internet = {str(allow).lower()}' read as "
                f"network_mode = {env['network_mode']!r}"
            )
        for legacy_key, new_key in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if legacy_key in env:
                raw = env.pop(legacy_key)
                if new_key not in env:
                    env[new_key] = parse_size_mb(raw)
                warnings.append(
                    f"legacy key 'environment.{legacy_key} = {raw!r}' read as "
                    f"{new_key} = {env[new_key]}"
                )
        out["environment"] = env
    return out, warnings
