"""What a ``generate`` run reports, as data: :class:`GenerateReport` is both the
``generate-report.json`` written into the dataset and what ``repogym generate --json`` prints
(the same bytes, :meth:`GenerateReport.to_text`). Rendering is :mod:`repogym.ui.generate`'s."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from repogym.pipelines.base import Outcome, YieldStats

__all__ = ["GenerateReport", "LlmUsage", "OutcomeRow"]


@dataclass(frozen=True)
class OutcomeRow:
    """One examined candidate: kept or why not, its time, its F2P/P2P counts."""

    key: str
    task_id: str
    kept: bool
    reason: str | None
    detail: str | None
    seconds: float
    test_seconds: float
    f2p: int
    p2p: int
    instruction_rewrite: dict[str, Any] | None = None
    """What the LLM rewrite of its instruction did (only with ``--llm``)."""

    @classmethod
    def of(cls, outcome: Outcome, rewrite: dict[str, Any] | None = None) -> OutcomeRow:
        return cls(
            key=outcome.candidate.key,
            task_id=outcome.candidate.task_id,
            kept=outcome.kept,
            reason=outcome.reason,
            detail=outcome.detail,
            seconds=round(outcome.seconds, 2),
            test_seconds=round(outcome.test_seconds, 2),
            f2p=outcome.f2p,
            p2p=outcome.p2p,
            instruction_rewrite=rewrite,
        )

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "key": self.key,
            "task_id": self.task_id,
            "kept": self.kept,
            "reason": self.reason,
            "detail": self.detail,
            "seconds": self.seconds,
            "test_seconds": self.test_seconds,
            "f2p": self.f2p,
            "p2p": self.p2p,
        }
        if self.instruction_rewrite is not None:
            row["instruction_rewrite"] = self.instruction_rewrite
        return row


@dataclass(frozen=True)
class LlmUsage:
    """The ``--llm`` instruction rewriter's totals: calls, tokens, cost (None when the model
    has no price) and how many rewrites were accepted, rejected or failed."""

    llm: str
    endpoint: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    unpriced_calls: int
    accepted: int
    rejected: int
    failed: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LlmUsage:
        """From :meth:`InstructionRewriter.summary` (every key, none other)."""
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return {
            "llm": self.llm,
            "endpoint": self.endpoint,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "unpriced_calls": self.unpriced_calls,
            "accepted": self.accepted,
            "rejected": self.rejected,
            "failed": self.failed,
        }


@dataclass(frozen=True)
class GenerateReport:
    """How a ``generate`` run went: the source, the pipeline and its options, how it ended,
    the yield, and one row per examined candidate."""

    repo: str
    """The repository as given (a URL with its credentials redacted) or the local path."""
    repo_id: str
    source: dict[str, Any]
    """What the source is (``{"kind": "local"}`` or the host's description)."""
    source_access: str
    pipeline: str
    options: dict[str, Any]
    status: str
    """``complete``, ``stopped``, ``interrupted`` or ``error``."""
    yield_counts: dict[str, Any]
    """``candidates``, ``kept``, ``dropped`` (reason → count), ``seconds``, ``test_seconds``
    (the JSON's ``yield``)."""
    overhead_ratio: float | None
    """Total time over time inside test runs (None when no test ran)."""
    outcomes: list[OutcomeRow] = field(default_factory=list)
    error: str | None = None
    """What ended the run early, when something did."""
    in_flight: list[str] | None = None
    """Keys of the candidates still being evaluated when the run ended early."""
    errors_log: str | None = None
    """The log of internal errors, when any was logged."""
    llm: LlmUsage | None = None

    @staticmethod
    def overhead(stats: YieldStats) -> float | None:
        return round(stats.elapsed / stats.test_seconds, 3) if stats.test_seconds else None

    @property
    def kept(self) -> int:
        return int(self.yield_counts.get("kept", 0))

    def to_json(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "repo": self.repo,
            "repo_id": self.repo_id,
            "source": self.source,
            "source_access": self.source_access,
            "pipeline": self.pipeline,
            "options": self.options,
            "status": self.status,
            "yield": self.yield_counts,
            "overhead_ratio": self.overhead_ratio,
            "outcomes": [o.to_json() for o in self.outcomes],
        }
        if self.error is not None:
            payload["error"] = self.error
        if self.in_flight:
            payload["in_flight"] = self.in_flight
        if self.errors_log is not None:
            payload["errors_log"] = self.errors_log
        if self.llm is not None:
            payload["llm"] = self.llm.to_json()
        return payload

    def to_text(self) -> str:
        """``generate-report.json``'s text: what ``generate --json`` prints."""
        return json.dumps(self.to_json(), indent=2) + "\n"
