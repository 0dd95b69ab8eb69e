"""The ``[metadata.repo2env]`` provenance block of a ``task.toml``, read and validated once.

The block is the de-facto one other tools write and read too (see DESIGN.md §2): ``spec_version``,
``pipeline``, ``pipeline_version``, ``repo``, ``ref``, ``reference``, ``source_access``,
``built_at``, ``synthesis_llm``, ``content_hash``, ``reward_kinds``, the per-pipeline subtable
(named by ``pipeline``), ``[…reproducibility]`` (``mode = registry | inline_dockerfile |
local_only``), and repogym's ``[…verification]`` and ``[…evaluation]``. Keys this model does not
name are kept (:attr:`Provenance.extra`), since other tools write them.

Reading never fails: :meth:`Provenance.read` keeps every well-formed value and records each
malformed one in :attr:`Provenance.problems` (key → message), so ``validate`` reports them while
readers (the manifest, the dataset card, the runner) use what is there. A malformed
``verification`` table is never read as the default: :meth:`Provenance.read_verification` raises.
``taskdir/task.py`` stays the one writer of ``task.toml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from repogym.taskdir.hashing import HASH_PREFIX
from repogym.taskdir.verification import Verification, parse_verification

__all__ = [
    "REPRODUCIBILITY_MODES",
    "Provenance",
    "Reproducibility",
    "ReproducibilityMode",
    "read_verification",
]

ReproducibilityMode = Literal["registry", "inline_dockerfile", "local_only"]
REPRODUCIBILITY_MODES: tuple[ReproducibilityMode, ...] = (
    "registry",
    "inline_dockerfile",
    "local_only",
)


class Reproducibility(BaseModel):
    """``[metadata.repo2env.reproducibility]``: how the environment is reproduced."""

    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    mode: str | None = None
    """``registry`` | ``inline_dockerfile`` | ``local_only`` (other values are kept as written)."""
    image_ref: str | None = None
    """The published image (mode ``registry``)."""


class Provenance(BaseModel):
    """The ``[metadata.repo2env]`` block (read with :meth:`read`)."""

    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    spec_version: str | None = None
    pipeline: str | None = None
    pipeline_version: str | None = None
    repo: str | None = None
    ref: str | None = None
    reference: str | None = None
    source_access: str | None = None
    built_at: str | None = None
    synthesis_llm: str | None = None
    content_hash: str | None = None
    """``sha256:<hex>`` over the task's files (see :mod:`repogym.taskdir.hashing`)."""
    reward_kinds: list[str] | None = None
    reproducibility: Reproducibility = Field(default_factory=Reproducibility)
    verification: Verification | None = None
    """The verification table when present and well-formed (see :meth:`read_verification`)."""
    evaluation: dict[str, Any] = Field(default_factory=dict)
    """repogym's verification results (outside the content hash)."""

    _problems: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("reward_kinds", mode="before")
    @classmethod
    def _kinds(cls, value: Any) -> Any:
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(k, str) and k for k in value)
        ):
            raise ValueError("reward_kinds must be a list of non-empty strings")
        return value

    @field_validator("content_hash", mode="before")
    @classmethod
    def _hash(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or not value.startswith(HASH_PREFIX)):
            raise ValueError("content_hash must be 'sha256:<hex>'")
        return value

    @field_validator("verification", mode="before")
    @classmethod
    def _verification(cls, value: Any) -> Any:
        return None if value is None else parse_verification(value)

    @field_validator("reproducibility", "evaluation", mode="before")
    @classmethod
    def _table(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError("must be a table")
        return value

    @classmethod
    def read(cls, block: Mapping[str, Any] | None) -> Provenance:
        """The model of ``block`` (``{}`` when None); malformed values are left out and
        recorded in :attr:`problems`."""
        data = dict(block or {})
        problems: dict[str, str] = {}
        while True:
            try:
                model = cls.model_validate(data)
            except ValidationError as exc:
                bad = {str(e["loc"][0]): _message(e) for e in exc.errors() if e["loc"]}
                if not bad or not bad.keys() & data.keys():
                    raise
                for key, message in bad.items():
                    problems.setdefault(key, message)
                    data.pop(key, None)
                continue
            model._problems = problems
            return model

    @property
    def problems(self) -> dict[str, str]:
        """Malformed keys and why (the values themselves are left out of the model)."""
        return dict(self._problems)

    @property
    def extra(self) -> dict[str, Any]:
        """Keys this model does not name (the per-pipeline subtable, other tools' keys)."""
        return dict(self.model_extra or {})

    @property
    def pipeline_table(self) -> dict[str, Any] | None:
        """The per-pipeline subtable (``[metadata.repo2env.<pipeline>]``), when it is a table."""
        sub = self.extra.get(self.pipeline) if self.pipeline else None
        return sub if isinstance(sub, dict) else None

    @property
    def reproducibility_mode(self) -> str | None:
        """``registry`` | ``inline_dockerfile`` | ``local_only`` as recorded, or None."""
        return self.reproducibility.mode or None

    def read_verification(self) -> Verification:
        """How the task wants to be verified (``in_place`` when the table is absent).

        Raises ValueError for a malformed table (an unknown mode, a bad pattern list)."""
        if "verification" in self._problems:
            raise ValueError(self._problems["verification"])
        return self.verification or Verification()


def _message(error: Any) -> str:
    """A validation error's own message (a validator's ValueError text as raised)."""
    key = str(error["loc"][0])
    ctx = error.get("ctx") or {}
    if isinstance(ctx.get("error"), ValueError):
        text = str(ctx["error"])
        return text if text.startswith((key, "[")) else f"{key} {text}"
    return f"{key}: {error['msg']}"


def read_verification(block: Provenance | Mapping[str, Any] | None) -> Verification:
    """The verification of a task's provenance (``in_place`` when absent); ValueError when
    malformed. ``block`` is a :class:`Provenance` or the raw ``[metadata.repo2env]`` table."""
    prov = block if isinstance(block, Provenance) else Provenance.read(block)
    return prov.read_verification()
