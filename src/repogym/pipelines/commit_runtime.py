"""``commit_runtime``: every commit that changes source and tests and whose new tests fail
before and pass after becomes a task ("here is the repo at the parent; make these tests pass")."""

from __future__ import annotations

from collections.abc import Iterator

from repogym.pipelines._harness.runtime import RuntimePipeline
from repogym.pipelines._mined.candidates import candidate_from_change
from repogym.pipelines.base import Candidate
from repogym.sources import Source
from repogym.spec import RuntimeOptions


def candidates(
    source: Source, options: RuntimeOptions, slug: str, rev: str
) -> Iterator[Candidate | tuple[str, str]]:
    """Candidates newest first; cheap drops come back as (key, reason)."""
    for commit in source.iter_commits(rev, first_parent=True):
        key = commit.sha
        if not commit.parents:
            yield key, "root commit"
            continue
        if len(commit.parents) > 1:
            yield key, "merge commit"
            continue
        cand, why = candidate_from_change(
            source,
            key=key,
            task_id=f"{slug}-{commit.sha[:12]}",
            kind="commit",
            base=commit.parents[0],
            head=commit.sha,
            title=commit.subject,
            body=commit.body,
            reference=_commit_reference(source, commit.sha),
            number=None,
            options=options,
            created_at=commit.date,
        )
        yield cand if cand is not None else (key, why or "dropped")


def _commit_reference(source: Source, sha: str) -> str:
    """The commit's web page for remote repositories, else its sha."""
    return source.commit_url(sha) or sha


class CommitRuntime(RuntimePipeline):
    """Local clones, or GitHub/GitLab repositories through a cached clone (default branch)."""

    name = "commit_runtime"
    version = "1"

    def candidates(
        self, source: Source, options: RuntimeOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        return candidates(source, options, slug, rev)


PIPELINE = CommitRuntime()
