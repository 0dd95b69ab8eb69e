"""What ``repogym validate`` reports over many tasks, as data: :class:`ValidationSummary` (the
``validate --json`` document and the figures its tables show). The checks themselves are
:mod:`repogym.taskdir.validate`'s; rendering is :mod:`repogym.ui.validate`'s."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.taskdir.validate import TaskReport, mark_duplicate_ids

__all__ = ["ValidationSummary", "summarize_validation"]


@dataclass(frozen=True)
class ValidationSummary:
    """Every task's report under ``path`` and their totals."""

    path: Path
    """What was validated (a task folder or a dataset folder), as given."""
    reports: list[TaskReport]

    @property
    def failed(self) -> list[TaskReport]:
        """The tasks with at least one error."""
        return [r for r in self.reports if not r.ok]

    @property
    def tasks(self) -> int:
        return len(self.reports)

    @property
    def invalid(self) -> int:
        return len(self.failed)

    @property
    def valid(self) -> int:
        return self.tasks - self.invalid

    @property
    def warnings(self) -> int:
        """Warnings over every task."""
        return sum(len(r.warnings) for r in self.reports)

    @property
    def ok(self) -> bool:
        """No task has an error (``validate`` exits 0)."""
        return not self.failed

    def by_check(self) -> list[tuple[str, str, int]]:
        """(severity, check, count) over every problem, sorted by severity then check."""
        counts: Counter[tuple[str, str]] = Counter(
            (p.severity, p.check) for r in self.reports for p in r.problems
        )
        return [(severity, check, n) for (severity, check), n in sorted(counts.items())]

    @property
    def measured(self) -> list[TaskReport]:
        """The tasks whose red-team figures were read (``--deep`` and recorded)."""
        return [r for r in self.reports if r.adversarial is not None]

    def to_json(self) -> dict[str, Any]:
        """What ``validate --json`` prints."""
        return {
            "path": str(self.path),
            "summary": {
                "tasks": self.tasks,
                "valid": self.valid,
                "invalid": self.invalid,
                "warnings": self.warnings,
            },
            "tasks": [r.to_json() for r in self.reports],
        }

    def to_text(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


def summarize_validation(path: Path, reports: list[TaskReport]) -> ValidationSummary:
    """The summary of ``reports`` (validated under ``path``), with every task whose id another
    shares given its ``unique_id`` error (:func:`~repogym.taskdir.validate.mark_duplicate_ids`)."""
    mark_duplicate_ids(reports)
    return ValidationSummary(path, reports)
