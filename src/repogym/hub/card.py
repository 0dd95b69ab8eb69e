"""The dataset card (README.md) written with each pushed revision."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any


def dataset_card(
    name: str, revision: str, manifest: dict[str, Any], src: Path, *, private: bool
) -> str:
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
    if report.is_file():
        try:
            yield_ = json.loads(report.read_text()).get("yield", {})
        except ValueError:
            yield_ = {}
        if yield_:
            lines += [
                "## Yield",
                "",
                f"{yield_.get('candidates', 0)} candidates → {yield_.get('kept', 0)} tasks.",
                "",
                "| dropped because | count |",
                "|---|---|",
                *[f"| {k} | {v} |" for k, v in (yield_.get("dropped") or {}).items()],
                "",
            ]
    lines += [
        "Pull it with `repogym pull "
        f"{name}@{revision} DIR --registry <this registry>`; every task keeps its `content_hash`.",
        "",
    ]
    return "\n".join(lines)
