"""``pr_runtime``: merged pull requests (from merge commits and squash subjects of a local clone)
whose tests fail before and pass after become tasks; the PR title and body are the instruction."""

from __future__ import annotations

from collections.abc import Iterator

from repogym.pipelines._runtime import candidate_from_change
from repogym.pipelines.base import Candidate
from repogym.sources import LocalGitSource
from repogym.spec import RuntimeOptions

NAME = "pr_runtime"
VERSION = "1"


def candidates(
    source: LocalGitSource, options: RuntimeOptions, slug: str, rev: str
) -> Iterator[Candidate | tuple[str, str]]:
    seen: set[int] = set()
    for pr in source.iter_pull_requests(rev):
        key = f"pr-{pr.number}"
        if pr.number in seen:
            yield f"{key}@{pr.merge_sha[:12]}", "duplicate PR number"
            continue
        seen.add(pr.number)
        if pr.title.lower().startswith("revert"):
            yield key, "revert"
            continue
        cand, why = candidate_from_change(
            source,
            key=key,
            task_id=f"{slug}-{pr.number}",
            kind="pr",
            base=pr.base_sha,
            head=pr.merge_sha,
            title=pr.title,
            body=pr.body,
            reference=f"PR #{pr.number} ({pr.merge_sha})",
            number=pr.number,
            options=options,
        )
        yield cand if cand is not None else (key, why or "dropped")
