"""``pr_diff``: text-only tasks from merged pull requests, graded by comparing diffs.

Each merged PR that passes the filters becomes a task whose instruction is the PR's title and
body (cleaned, checked for leaks) and whose environment is a thin image holding the repository
at the PR's base — no dependency install, nothing is run to grade. The agent edits the files in
``/workspace``; the verifier rebuilds the diff of those edits against the base snapshot and
scores it against the gold diff with :mod:`repogym.shipped.diff_reward` (shipped as
``tests/diff_reward.py``), optionally with an LLM judge. The gold lives only in
``tests/oracle.patch`` and ``solution/patch.diff``.

Pull requests come from merge commits and squash subjects of a local clone, or from the GitHub /
GitLab API (with the text of the issues a PR fixes as the instruction, as for ``pr_runtime``).
Filters (each is a drop reason in the yield table): ``draft``, ``revert``, ``empty change``,
``test-only``, ``binary-only``, ``docs-only``, ``too many files``, ``too large``, ``tiny diff``,
``duplicate PR number``; later, per candidate: ``instruction too vague``, ``instruction leaks
the fix``, ``no scorable text change`` and the verify gate (oracle 1.0 every run, nop 0.0).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from repogym.pipelines._harness.diff_task import (
    BASE_DIR,
    FOOTER,
    JUDGE_ENV,
    WORKDIR,
    DiffTaskHarness,
    dockerfile,
    verifier_module,
    with_footer,
    write_task,
)
from repogym.pipelines._mined.prs import merged_prs, pr_reference, pr_text
from repogym.pipelines.base import Candidate, HarnessContext
from repogym.shipped.testfiles import is_test_path
from repogym.sources import FileChange, PullRequest, Source
from repogym.sources.patches import split_patch
from repogym.spec import PrDiffOptions

__all__ = [
    "BASE_DIR",
    "FOOTER",
    "JUDGE_ENV",
    "PIPELINE",
    "WORKDIR",
    "PrDiff",
    "candidates",
    "dockerfile",
    "filter_reason",
    "is_doc_path",
    "is_draft",
    "is_revert",
    "verifier_module",
    "with_footer",
    "write_task",
]


_DRAFT = re.compile(r"^\s*(?:\[(?:draft|wip)\]|\((?:draft|wip)\)|(?:draft|wip)\s*:)", re.I)
_REVERT_TITLE = re.compile(r"^\s*(?:\[revert\]|revert\b)", re.I)
_REVERT_BODY = re.compile(r"^This reverts commit [0-9a-f]{7,40}", re.M)
DOC_EXTENSIONS = (".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc", ".rdoc", ".org")
DOC_DIRS = frozenset({"doc", "docs", "documentation", "man", "website"})
DOC_NAMES = re.compile(
    r"^(?:readme|changelog|changes|history|news|authors|contributors|license|licence|copying"
    r"|notice|contributing|code_of_conduct|security|support)(?:\.[\w.]+)?$",
    re.I,
)


def is_doc_path(path: str) -> bool:
    """Documentation: files under doc folders, prose extensions, README/CHANGELOG/LICENSE…"""
    parts = path.strip("/").split("/")
    if any(p.lower() in DOC_DIRS for p in parts[:-1]):
        return True
    name = parts[-1]
    return name.lower().endswith(DOC_EXTENSIONS) or bool(DOC_NAMES.match(name))


def is_draft(pr: PullRequest) -> bool:
    """Marked draft by the source (GitHub/GitLab APIs) or by a ``Draft:``/``WIP`` title."""
    return bool(getattr(pr, "draft", False)) or bool(_DRAFT.match(pr.title))


def is_revert(pr: PullRequest) -> bool:
    return bool(_REVERT_TITLE.match(pr.title) or _REVERT_BODY.search(pr.body or ""))


def _changed(files: list[FileChange]) -> int:
    return sum(f.additions + f.deletions for f in files)


def filter_reason(pr: PullRequest, options: PrDiffOptions) -> str | None:
    """The drop reason of a PR from its metadata and file list alone, or None to keep it."""
    if is_draft(pr) and not options.include_drafts:
        return "draft"
    if is_revert(pr) and not options.include_reverts:
        return "revert"
    files = list(pr.files)
    if not files:
        return "empty change"
    sources = [f for f in files if not is_test_path(f.path)]
    if not sources:
        return "test-only"
    text = [f for f in sources if not f.binary]
    if not text:
        return "binary-only"
    if all(is_doc_path(f.path) for f in text) and not options.include_docs_only:
        return "docs-only"
    if len(sources) > options.max_files:
        return "too many files"
    lines = _changed(text)
    if lines > options.max_patch_lines:
        return "too large"
    if lines < options.min_changed_lines:
        return "tiny diff"
    return None


def candidates(
    source: Source, options: PrDiffOptions, slug: str, rev: str
) -> Iterator[Candidate | tuple[str, str]]:
    """Merged PRs of ``source`` (newest first) as candidates, or ``(key, drop reason)``."""
    for key, pr, unusable in merged_prs(source, rev):
        if unusable:
            yield key, unusable
            continue
        reason = filter_reason(pr, options)
        if reason is not None:
            yield key, reason
            continue
        patch = source.diff(pr.base_sha, pr.merge_sha)
        source_patch, test_patch = split_patch(patch)
        if not source_patch.strip():
            yield key, "test-only"
            continue
        title, body = pr_text(source, pr)  # after the cheap checks
        yield Candidate(
            key=key,
            task_id=f"{slug}-{pr.number}",
            kind="pr",
            base=pr.base_sha,
            head=pr.merge_sha,
            title=title,
            body=body,
            reference=pr_reference(pr),
            patch=patch,
            source_patch=source_patch,
            test_patch=test_patch,
            number=pr.number,
            created_at=pr.date,
        )


class PrDiff:
    """Text-only tasks from merged pull requests of local clones, GitHub or GitLab."""

    name = "pr_diff"
    version = "1"
    options_model = PrDiffOptions
    sources = frozenset({"local", "github", "gitlab"})
    sources_note = ""
    llm_rewrite = True
    """Instructions may be rewritten by ``generate --llm`` (leak-checked against the gold)."""
    dedupe_changes = False

    def candidates(
        self, source: Source, options: PrDiffOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        return candidates(source, options, slug, rev)

    def harness(self, ctx: HarnessContext) -> DiffTaskHarness:
        return DiffTaskHarness(ctx)


PIPELINE = PrDiff()
