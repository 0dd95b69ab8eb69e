"""What a verify run reports, as data: the ``repogym verify --json`` document and, per task, the
facts its table shows (measured now, else recorded in the task's evaluation block). Rendering
is :mod:`repogym.ui.run`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repogym.run.gate import ERROR, VERIFIED, Verdict
from repogym.taskdir import Task, load_task
from repogym.taskdir.provenance import read_verification

__all__ = ["Adversarial", "VerdictFacts", "verdict_facts", "verify_payload"]


def verify_payload(verdicts: list[Verdict]) -> dict[str, Any]:
    """What ``verify --json`` prints: counts by status, then each task's verdict."""
    bad = [v for v in verdicts if v.status != VERIFIED]
    errors = sum(v.status == ERROR for v in verdicts)  # their gate could not run
    gameable = sum(v.status == "gameable" for v in verdicts)
    return {
        "summary": {
            "tasks": len(verdicts),
            "verified": len(verdicts) - len(bad),
            "flaky": sum(v.status == "flaky" for v in verdicts),
            "broken": sum(v.status == "broken" for v in verdicts),
            **({"gameable": gameable} if gameable else {}),
            **({"error": errors} if errors else {}),
        },
        "tasks": [v.to_json() for v in verdicts],
    }


@dataclass(frozen=True)
class Adversarial:
    """The red-team figures of a task: the floor (best reward of the wrong solutions), how many
    were built, and the gap above nop."""

    floor: float | None
    runs: int
    gap: float | None


@dataclass(frozen=True)
class VerdictFacts:
    """One row of the verify table beside the verdict itself."""

    verdict: Verdict
    verified: bool
    mode: str | None  # the task's verification mode; None: no task; "invalid": unreadable
    kill_rate: float | None
    mutant_runs: int
    adversarial: Adversarial | None  # None: neither measured nor recorded
    canaries: int | None  # None: not known


def verdict_facts(tasks: list[Task], verdicts: list[Verdict]) -> list[VerdictFacts]:
    """The verify table's facts, one per verdict, in the verdicts' order."""
    by_id = {t.id: t for t in tasks}
    return [_facts(by_id.get(v.task_id), v) for v in verdicts]


def _facts(task: Task | None, verdict: Verdict) -> VerdictFacts:
    if task is None:
        return VerdictFacts(verdict, verdict.status == VERIFIED, None, None, 0, None, None)
    mode: str
    try:
        mode = read_verification(task.provenance).mode
    except ValueError:
        mode = "invalid"
    try:  # as recorded now (the gate may have just written it)
        prov = load_task(task.path).provenance
    except Exception:  # noqa: BLE001 - a table cell, never a crash
        prov = None
    block = prov.evaluation if prov is not None else {}
    if verdict.mutants is not None:
        rate: Any = verdict.mutants.kill_rate
        runs = len(verdict.mutants.results)
    else:
        rate = block.get("mutant_kill_rate")
        rate = rate if isinstance(rate, int | float) else None
        runs = block.get("mutants", 0)
    canaries = verdict.canaries if verdict.canaries is not None else block.get("canaries")
    return VerdictFacts(
        verdict,
        verdict.status == VERIFIED,
        mode,
        rate,
        runs,
        _adversarial(verdict, block),
        canaries if isinstance(canaries, int) else None,
    )


def _adversarial(verdict: Verdict, block: dict[str, Any]) -> Adversarial | None:
    report = verdict.adversarial
    if report is not None:
        return Adversarial(report.floor, len(report.results), report.gap)
    floor = block.get("adversarial_floor")
    if not isinstance(floor, int | float):
        return None
    gap = block.get("gameability_gap")
    return Adversarial(floor, block.get("adversarial_candidates", 0), gap)
