"""The merged pull requests both PR pipelines walk: from the hosting API or a local clone."""

from __future__ import annotations

from collections.abc import Iterator

from repogym.pipelines._instructions.text import issue_instruction_text
from repogym.sources import PullRequest, Source


def merged_prs(source: Source, rev: str) -> Iterator[tuple[str, PullRequest, str | None]]:
    """``(key, pr, drop reason or None)`` newest first, each PR number once.

    GitHub / GitLab sources give the API's merged PRs with a reason for unusable ones (drafts,
    landed commit missing); a local clone gives the PRs recognised in its history (see
    :meth:`Source.merged_pull_requests`). A number seen again is dropped as ``duplicate PR
    number``.
    """
    seen: set[int] = set()
    for pr, unusable in source.merged_pull_requests(rev):
        key = f"pr-{pr.number}"
        if pr.number in seen:
            yield f"{key}@{(pr.merge_sha or '')[:12]}", pr, "duplicate PR number"
            continue
        seen.add(pr.number)
        yield key, pr, unusable


def pr_reference(pr: PullRequest) -> str:
    """The PR's web URL when known, else ``PR #N (<merge sha>)``."""
    return getattr(pr, "url", "") or f"PR #{pr.number} ({pr.merge_sha})"


def pr_text(source: Source, pr: PullRequest) -> tuple[str, str]:
    """Title and body for the instruction: the linked issues' text first when the source can
    fetch them (one API call per issue: call it after the cheap checks), else the PR's own."""
    issues = source.linked_issues(pr)
    return issue_instruction_text(pr.title, pr.body, [(i.title, i.body) for i in issues])
