"""``pr_runtime``: merged pull requests whose tests fail before and pass after become tasks.

Local clones: pull requests are recognised from merge commits and squash subjects. GitHub and
GitLab: they come from the hosting API (merged ones; drafts skipped), each one's landed commit
fetched into the cached clone when missing. The instruction is the text of the issues the pull
request says it fixes (``fixes/closes #N``) when there are any, with the pull request as
context; otherwise the pull request's title and body.
"""

from __future__ import annotations

from collections.abc import Iterator

from repogym.pipelines._harness.runtime import RuntimePipeline
from repogym.pipelines._mined.candidates import candidate_from_change
from repogym.pipelines._mined.prs import merged_prs, pr_reference, pr_text
from repogym.pipelines.base import Candidate
from repogym.sources import Source
from repogym.spec import RuntimeOptions


def candidates(
    source: Source, options: RuntimeOptions, slug: str, rev: str
) -> Iterator[Candidate | tuple[str, str]]:
    """Candidates newest first; cheap drops come back as (key, reason)."""
    for key, pr, unusable in merged_prs(source, rev):
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
            reference=pr_reference(pr),
            number=pr.number,
            options=options,
            created_at=pr.date,
        )
        if cand is None:
            yield key, why or "dropped"
            continue
        cand.title, cand.body = pr_text(source, pr)  # after the cheap checks
        yield cand


class PrRuntime(RuntimePipeline):
    """Merged pull requests of local clones, GitHub or GitLab."""

    name = "pr_runtime"
    version = "1"

    def candidates(
        self, source: Source, options: RuntimeOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        return candidates(source, options, slug, rev)


PIPELINE = PrRuntime()
