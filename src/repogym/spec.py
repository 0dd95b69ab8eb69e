"""What to generate: the input of ``repogym generate`` and each pipeline's options.

Models forbid unknown keys, so a typo in ``--opt`` or a config file is an error, not a no-op.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RuntimeOptions(_Strict):
    """Options of the runtime pipelines (``commit_runtime``, ``pr_runtime``)."""

    reward: Literal["resolved", "graded"] = Field(
        "resolved",
        description="reward of the tasks: 1 only when every F2P and P2P test passes (resolved), "
        "or f2p_rate × p2p_rate (graded)",
    )
    suite_budget: float = Field(
        120.0,
        ge=0,
        description="grade the whole suite when it runs in under this many seconds (0: never)",
    )
    mutants: int = Field(
        4, ge=0, description="wrong solutions derived from the gold patch to test the tests with"
    )
    min_kill_rate: float = Field(
        0.6, ge=0, le=1, description="drop tasks whose tests kill fewer of the mutants"
    )
    reruns: int = Field(
        1, ge=0, description="extra runs of each state; tests that flip are dropped"
    )
    verify_reruns: int = Field(1, ge=0, description="extra oracle runs in the final verify gate")
    max_source_files: int = Field(20, ge=1, description="skip changes touching more source files")
    max_patch_lines: int = Field(2000, ge=1, description="skip gold patches with more +/- lines")
    test_timeout: float = Field(600.0, gt=0, description="seconds per test run")
    agent_timeout: float = Field(1800.0, gt=0, description="[agent].timeout_sec of the tasks")
    network: Literal["no-network", "public"] = Field(
        "no-network", description="network_mode of the emitted tasks"
    )
    min_instruction_words: int = Field(4, ge=1, description="drop candidates with vaguer text")
    max_candidates: int | None = Field(None, ge=1, description="stop after examining this many")
    instruction: Literal["evidence", "title", "tdd", "llm"] = Field(
        "evidence",
        description="evidence: the change's text plus the behaviour the failing tests prove and "
        "the interface they need; title: the text only; tdd: evidence with the new tests visible "
        "in the workspace; llm: evidence rewritten by --llm",
    )
    solvability: Literal["repair", "drop", "off"] = Field(
        "repair",
        description="an instruction missing a name the tests need, or short for the change: "
        "repair it from the evidence (then drop if still short), drop it, or keep it",
    )


class PrDiffOptions(_Strict):
    """Options of ``pr_diff`` (text-only tasks from merged PRs, graded by diff similarity).

    Sizes count the PR's non-test files and their changed (+/-) lines: tests are not part of
    the gold diff.
    """

    max_files: int = Field(20, ge=1, description="skip PRs touching more non-test files")
    min_changed_lines: int = Field(
        3, ge=1, description="skip PRs with fewer changed non-test lines (tiny diff)"
    )
    max_patch_lines: int = Field(
        1000, ge=1, description="skip PRs with more changed non-test lines (too large)"
    )
    include_drafts: bool = Field(
        False, description="keep PRs marked draft (by the source or a Draft:/WIP title)"
    )
    include_reverts: bool = Field(False, description="keep PRs that revert earlier changes")
    include_docs_only: bool = Field(False, description="keep PRs that change only docs")
    verify_reruns: int = Field(1, ge=0, description="extra oracle runs in the final verify gate")
    agent_timeout: float = Field(1800.0, gt=0, description="[agent].timeout_sec of the tasks")
    verifier_timeout: float = Field(300.0, gt=0, description="[verifier].timeout_sec")
    network: Literal["no-network", "public"] = Field(
        "no-network", description="network_mode of the emitted tasks (the agent phase)"
    )
    verifier_network: Literal["no-network", "public"] = Field(
        "no-network",
        description="[verifier].network_mode: 'public' lets the optional LLM judge be reached",
    )
    base_image: str = Field("python:3.12-slim", description="FROM image of the thin environment")
    min_instruction_words: int = Field(4, ge=1, description="drop candidates with vaguer text")
    max_candidates: int | None = Field(None, ge=1, description="stop after examining this many")


PIPELINE_OPTIONS: dict[str, type[_Strict]] = {
    "commit_runtime": RuntimeOptions,
    "pr_runtime": RuntimeOptions,
    "pr_diff": PrDiffOptions,
}


class GenerationInput(_Strict):
    repo: str
    pipeline: str
    out: Path = Path("out")
    limit: int | None = Field(None, ge=1, description="stop after emitting this many tasks")
    jobs: int = Field(1, ge=1)
    resume: bool = False
    sandbox: str = "local"
    rev: str = "HEAD"
    options: dict[str, Any] = Field(default_factory=dict)
    llm: str | None = Field(
        None, description="provider/model that rewrites instructions (optional; see docs)"
    )
    llm_endpoint: str | None = Field(None, description="OpenAI-compatible or Anthropic base URL")

    @field_validator("llm")
    @classmethod
    def _check_llm(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from repogym.llm import parse_llm_spec

        provider, model = parse_llm_spec(value)
        return f"{provider}/{model}"

    def pipeline_options(self) -> BaseModel:
        """The validated options model of the chosen pipeline."""
        try:
            cls = PIPELINE_OPTIONS[self.pipeline]
        except KeyError:
            known = ", ".join(sorted(PIPELINE_OPTIONS))
            raise ValueError(f"unknown pipeline {self.pipeline!r} (available: {known})") from None
        return cls.model_validate(self.options)


def parse_opts(pairs: list[str], *, flag: str = "--opt") -> dict[str, Any]:
    """``["k=v", …]`` → dict; values are kept as strings and coerced by the options model."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def describe_error(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
