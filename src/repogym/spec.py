"""What to generate: the input of ``repogym generate`` and each pipeline's options.

Models forbid unknown keys, so a typo in ``--opt`` or a config file is an error, not a no-op.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

BUG_OPERATORS: tuple[str, ...] = (
    "compare",  # < <-> <=, > <-> >=, == <-> !=, is <-> is not, in <-> not in
    "boolean",  # and <-> or (every operator of one boolean expression)
    "negate_condition",  # if/while condition c -> not c; not c -> c
    "off_by_one",  # int constants in indices, slice bounds and range() +-1; k -> k - 1 / k + 1
    "remove_guard",  # drop `if c: return|raise|continue|break`
    "remove_statement",  # drop a call statement, augmented assignment or re-assignment
    "swap_args",  # swap two adjacent positional arguments of a call
    "constant",  # n -> n + 1 (0 <-> 1), True <-> False, "text" -> ""
    "return_none",  # return x -> return None
    "exception_type",  # raise ValueError(...) -> raise RuntimeError(...) (builtin classes only)
)
"""Mutation operators of ``bug_synth`` (:mod:`repogym.pipelines._synthesis.mutants`), in the order a
function's mutants are interleaved; named here so the options model checks them without the
pipelines package."""


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
    adversarial: bool = Field(
        True,
        description="also run generic wrong solutions (hollow bodies, constants, the input "
        "unchanged, an object equal to everything); drop tasks any of them earns the full reward "
        "on",
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


def _comma_list(value: Any) -> Any:
    """``"a,b"`` (as ``--opt`` gives it) → ``["a", "b"]``; other values unchanged."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class SynthOptions(RuntimeOptions):
    """Options shared by the synthesized-task pipelines (``bug_synth``, ``code_instruct``):
    the runtime options, with defaults for many small edits of one revision."""

    reruns: int = Field(
        0, ge=0, description="extra runs of the suite (baseline and each edit); flips are dropped"
    )
    mutants: int = Field(
        2, ge=0, description="wrong solutions derived from the gold patch to test the tests with"
    )
    min_kill_rate: float = Field(
        0.5, ge=0, le=1, description="drop tasks whose tests kill fewer of the mutants"
    )
    max_break_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="drop edits that break more than this share of the tests in scope (a crash, "
        "not a bug)",
    )
    max_per_function: int = Field(3, ge=1, description="candidates per function at most")
    max_files: int | None = Field(None, ge=1, description="read at most this many source files")
    paths: list[str] = Field(
        default_factory=list,
        description="only edit files under these folders or paths (repository-relative; "
        "comma-separated on the command line)",
    )

    @field_validator("paths", mode="before")
    @classmethod
    def _comma_paths(cls, value: Any) -> Any:
        return _comma_list(value)


class BugSynthOptions(SynthOptions):
    """Options of ``bug_synth`` (procedural bugs the repository's own tests catch)."""

    operators: list[str] = Field(
        default_factory=list,
        description="only these mutation operators, comma-separated (default: all; see "
        "docs/generate.md)",
    )

    @field_validator("operators", mode="before")
    @classmethod
    def _known_operators(cls, value: Any) -> Any:
        value = _comma_list(value)
        unknown = [v for v in value if v not in BUG_OPERATORS] if isinstance(value, list) else []
        if unknown:
            raise ValueError(
                f"unknown operator(s) {', '.join(unknown)}; known: {', '.join(BUG_OPERATORS)}"
            )
        return value


class CodeInstructOptions(SynthOptions):
    """Options of ``code_instruct`` (implement a function whose body was removed)."""

    require_docstring: bool = Field(
        True, description="only functions with a docstring (the instruction quotes it)"
    )
    min_statements: int = Field(2, ge=1, description="skip functions with fewer statements")


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


class CvePatchesOptions(RuntimeOptions):
    """Options of ``cve_patches`` (OSV advisories whose fix commits are in the repository):
    where the advisories come from and how they are matched, the runtime options of the graded
    tasks, and the thin-image options of the text-only ones (fixes without a test change)."""

    osv: str | None = Field(
        None,
        description="the advisories: an OSV record (.json), a folder of records, a .zip export "
        "(osv.dev's all.zip), or 'api' to query the OSV API",
    )
    osv_url: str | None = Field(
        None, description="OSV API base URL (default $REPOGYM_OSV_URL, else https://api.osv.dev)"
    )
    package: str | None = Field(
        None, description="osv=api: the package to ask about (default: read from the repository)"
    )
    ecosystem: str | None = Field(
        None, description="osv=api: its OSV ecosystem (PyPI, npm, crates.io, Go, Packagist, …)"
    )
    api_commits: int = Field(
        0, ge=0, le=1000, description="osv=api: also ask about this many commits of the history"
    )
    match_repo: bool = Field(
        True, description="keep only advisories naming this repository (false: every advisory)"
    )
    repo_url: str | None = Field(
        None, description="the repository's URL as advisories name it (default: its origin)"
    )
    text_only: bool = Field(
        True, description="a fix without a test change becomes a text-only, diff-scored task"
    )
    verifier_timeout: float = Field(300.0, gt=0, description="text-only tasks: [verifier] timeout")
    verifier_network: Literal["no-network", "public"] = Field(
        "no-network", description="text-only tasks: [verifier].network_mode (LLM judge)"
    )
    base_image: str = Field("python:3.12-slim", description="text-only tasks: FROM image")

    @field_validator("osv")
    @classmethod
    def _check_osv(cls, value: str | None) -> str | None:
        if value is None or value.strip().lower() == "api":
            return None if value is None else "api"
        path = Path(value).expanduser()
        if not path.exists():
            raise ValueError(f"{value}: no such file or folder")
        if path.is_dir():
            return str(path)
        if path.suffix.lower() not in (".json", ".zip"):
            raise ValueError(
                f"{value}: not an OSV export (a .json record, a folder of records or a .zip)"
            )
        try:
            with open(path, "rb") as fh:
                head = fh.read(4)
        except OSError as exc:
            raise ValueError(f"{value}: unreadable ({exc.strerror or exc})") from None
        if path.suffix.lower() == ".zip" and head[:2] != b"PK":
            raise ValueError(f"{value}: not a zip archive")
        return str(path)

    @field_validator("osv_url")
    @classmethod
    def _check_osv_url(cls, value: str | None) -> str | None:
        return _http_url(value)


class EquivalenceOptions(SynthOptions):
    """Options of ``equivalence_tests`` (re-implement a function; graded by comparing it with
    the original on recorded and generated inputs)."""

    reward: Literal["resolved", "graded"] = Field(
        "graded",
        description="graded: the share of hidden inputs whose outcome matches the original's; "
        "resolved: 1 only when every input matches",
    )
    max_inputs: int = Field(50, ge=1, description="hidden inputs per task at most")
    max_recorded: int = Field(
        40, ge=0, description="distinct argument tuples recorded per function while tests run"
    )
    hypothesis_examples: int = Field(
        30, ge=0, description="inputs drawn from builtin type hints with hypothesis (0: none)"
    )
    infer_types: bool = Field(
        True,
        description="draw inputs for parameters without a type hint from the type their "
        "recorded arguments share",
    )
    min_inputs: int = Field(
        10, ge=1, validate_default=True, description="drop functions with fewer usable inputs"
    )
    examples: int = Field(
        3, ge=0, le=3, description="example calls shown in the instruction (never graded)"
    )
    call_timeout: float = Field(
        2.0,
        gt=0,
        le=600,
        description="seconds per call in the verifier; the original must answer each input "
        "within a quarter of it",
    )
    max_error_share: float = Field(
        0.5, ge=0, lt=1, description="at most this share of hidden inputs may expect an exception"
    )
    seed: int = Field(0, ge=0, description="seed of the hypothesis draws")

    @field_validator("min_inputs")
    @classmethod
    def _check_min_inputs(cls, value: int, info: ValidationInfo) -> int:
        top = info.data.get("max_inputs")
        if top is not None and value > top:
            raise ValueError(f"{value} is larger than max_inputs ({top})")
        sources = [info.data.get(k) for k in ("max_recorded", "hypothesis_examples")]
        if None not in sources and sum(sources) < value:  # type: ignore[arg-type]
            total = f"{sources[0]} + {sources[1]}"
            raise ValueError(f"max_recorded + hypothesis_examples ({total}) cannot reach it")
        return value


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

    @field_validator("llm_endpoint")
    @classmethod
    def _check_llm_endpoint(cls, value: str | None) -> str | None:
        return _http_url(value, "--llm-endpoint ")

    @field_validator("llm")
    @classmethod
    def _check_llm(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from repogym.llm import parse_llm_spec

        provider, model = parse_llm_spec(value)
        return f"{provider}/{model}"

    @property
    def shown_repo(self) -> str:
        """:attr:`repo` fit to print (a password in a URL removed)."""
        from repogym._secrets import redact_url

        return redact_url(self.repo)


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


def _http_url(value: str | None, label: str = "") -> str | None:
    """``value`` unless it is not an http(s) URL (:func:`repogym.http.url_problem`)."""
    if value is None:
        return None
    from repogym.http import url_problem

    problem = url_problem(value.strip())
    if problem:
        raise ValueError(f"{label}{value!r} {problem}")
    return value
