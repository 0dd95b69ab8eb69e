"""The dataset card (README.md) written with each pushed revision."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repogym.taskdir import Task


def _verdicts(tasks: list[Task]) -> list[str]:
    """Table rows for the tasks whose ``[metadata.repo2env.evaluation]`` holds a verdict."""
    rows = []
    for task in sorted(tasks, key=lambda t: t.id):
        prov = task.provenance
        ev = prov.evaluation if prov is not None else {}
        if not ev.get("status"):
            continue
        oracle = f"{ev.get('oracle_passes', '?')}/{ev.get('oracle_runs', '?')}"
        reasons = "; ".join(str(r) for r in ev.get("reasons") or [])
        reasons = reasons.replace("|", "\\|").replace("\n", " ")
        rows.append(
            f"| {task.id} | {ev['status']} | {oracle} | {ev.get('nop_reward', '')} | "
            f"{ev.get('backend', '')} | {reasons} |"
        )
    return rows


def dataset_card(
    name: str,
    revision: str,
    manifest: dict[str, Any],
    src: Path,
    *,
    private: bool,
    tasks: list[Task] | None = None,
    registry: str = "<this registry>",
) -> str:
    """The card: counts by verification status and pipeline, yield, per-task verdicts."""
    rows = manifest["tasks"]
    status = Counter(r.get("verification") or "unverified" for r in rows)
    pipelines = Counter(r.get("pipeline") or "other" for r in rows)
    lines = [
        "---",
        "tags:",
        "  - harbor",
        "  - repogym",
        "  - rl-environment",
        f"private: {'true' if private else 'false'}",
        "---",
        "",
        f"# {name}",
        "",
        f"Revision `{revision}`: {len(rows)} Harbor task(s) made with repogym.",
        "",
        "| verification | tasks |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in sorted(status.items())],
        "",
        "| pipeline | tasks |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in sorted(pipelines.items())],
        "",
    ]
    report = src / "generate-report.json"
    # Read only a regular file of the dataset itself: a symlink could name any host file.
    if report.is_file() and not report.is_symlink():
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError):
            data = {}
        yield_ = data.get("yield") if isinstance(data, dict) else None
        if isinstance(yield_, dict) and yield_:
            dropped = yield_.get("dropped")
            dropped = dropped if isinstance(dropped, dict) else {}
            lines += [
                "## Yield",
                "",
                f"{yield_.get('candidates', 0)} candidates → {yield_.get('kept', 0)} tasks.",
                "",
                "| dropped because | count |",
                "|---|---|",
                *[f"| {k} | {v} |" for k, v in dropped.items()],
                "",
            ]
    verdicts = _verdicts(tasks or [])
    if verdicts:
        lines += [
            "## Verification",
            "",
            "Oracle passes out of runs, the no-op agent's reward, and why a task is not verified.",
            "",
            "| task | status | oracle | no-op reward | backend | reasons |",
            "|---|---|---|---|---|---|",
            *verdicts,
            "",
        ]
    lines += [
        "Pull it with `repogym pull "
        f"{name}@{revision} DIR --registry {registry}`; every task keeps its `content_hash`.",
        "",
    ]
    return "\n".join(lines)
