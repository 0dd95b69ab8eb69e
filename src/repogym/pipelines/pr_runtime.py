"""``pr_runtime``: merged pull requests whose tests fail before and pass after become tasks.

Local clones: pull requests are recognised from merge commits and squash subjects. GitHub and
GitLab: they come from the hosting API (merged ones; drafts skipped), each one's landed commit
fetched into the cached clone when missing. The instruction is the text of the issues the pull
request says it fixes (``fixes/closes #N``) when there are any, with the pull request as
context; otherwise the pull request's title and body.
"""

from __future__ import annotations

from collections.abc import Iterator

from repogym.pipelines._instruction import issue_instruction_text
from repogym.pipelines._runtime import candidate_from_change
from repogym.pipelines.base import Candidate
from repogym.sources import LocalGitSource, PullRequest
from repogym.spec import RuntimeOptions

NAME = "pr_runtime"
VERSION = "1"
SOURCES = {"local", "github", "gitlab"}
"""Where this pipeline can read pull requests from (``generate`` refuses other sources)."""
LLM_REWRITE = True
"""Instructions may be rewritten by ``generate --llm``."""


def candidates(
    source: LocalGitSource, options: RuntimeOptions, slug: str, rev: str
) -> Iterator[Candidate | tuple[str, str]]:
    """Candidates newest first; cheap drops come back as (key, reason)."""
    remote = getattr(source, "remote_pull_requests", None)
    if remote is not None:
        prs: Iterator[tuple[PullRequest, str | None]] = remote()
    else:
        prs = ((pr, None) for pr in source.iter_pull_requests(rev))
    seen: set[int] = set()
    for pr, unusable in prs:
        key = f"pr-{pr.number}"
        if pr.number in seen:
            yield f"{key}@{pr.merge_sha[:12]}", "duplicate PR number"
            continue
        seen.add(pr.number)
        if unusable:
            yield key, unusable
            continue
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
            reference=getattr(pr, "url", "") or f"PR #{pr.number} ({pr.merge_sha})",
            number=pr.number,
            options=options,
        )
        if cand is None:
            yield key, why or "dropped"
            continue
        linked = getattr(source, "linked_issues", None)
        if linked is not None:  # after the cheap checks: one API call per issue
            issues = linked(pr)
            cand.title, cand.body = issue_instruction_text(
                pr.title, pr.body, [(i.title, i.body) for i in issues]
            )
        yield cand
