"""Where repositories come from: the ``Source`` protocol and the records every source yields.

A source walks a repository's history (commits, merged pull requests), produces diffs between
two commits, reads files and exports snapshots. ``LocalGitSource`` (a git checkout or bare
repository on disk) is the reference implementation; remote sources (GitHub, GitLab) follow the
same protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from repogym.errors import RepogymError

if TYPE_CHECKING:
    from repogym.sources._http import Issue
    from repogym.sources.local import LocalGitSource

__all__ = [
    "Commit",
    "FileChange",
    "LocalGitSource",
    "PullRequest",
    "Source",
    "SourceError",
]


class SourceError(RepogymError):
    """A repository cannot be read: not a repository, empty, unknown revision, git missing."""


@dataclass(slots=True)
class FileChange:
    """One file touched by a commit (or a pull request), relative to the first parent.

    ``status`` is git's letter: A added, M modified, D deleted, R renamed, C copied, T type
    changed (e.g. file → symlink). ``old_path`` is set for R and C. ``binary`` files have
    ``additions == deletions == 0``.
    """

    path: str
    status: str
    old_path: str | None = None
    binary: bool = False
    additions: int = 0
    deletions: int = 0


@dataclass(slots=True)
class Commit:
    """A commit. ``parents`` is empty for a root commit; ``date`` is the author date (ISO 8601).

    ``files`` is the change against the first parent (for a merge: what the merge brought
    into the first-parent line; for a root commit: every file it adds).
    """

    sha: str
    parents: list[str]
    author: str
    author_email: str
    date: str
    subject: str
    body: str
    files: list[FileChange] = field(default_factory=list)

    @property
    def is_merge(self) -> bool:
        """True when the commit has two or more parents."""
        return len(self.parents) > 1

    @property
    def message(self) -> str:
        """Subject and body as one text."""
        return f"{self.subject}\n\n{self.body}" if self.body else self.subject


@dataclass(slots=True)
class PullRequest:
    """A merged pull (or merge) request recognised in history.

    ``base_sha`` is the commit the change applies onto, ``head_sha`` the tip that was merged
    (the squash commit itself for squash merges) and ``files`` the change base → merge result.
    """

    number: int
    title: str
    body: str
    kind: Literal["merge", "squash"]
    merge_sha: str
    base_sha: str
    head_sha: str
    files: list[FileChange] = field(default_factory=list)
    author: str = ""
    date: str = ""


@runtime_checkable
class Source(Protocol):
    """What pipelines need from a repository, wherever it lives."""

    path: Path
    """The git repository on disk (for hosted repositories: the cached clone). Facts of a
    commit a snapshot lacks (its date, release tag, submodules) are read from it."""

    def resolve(self, ref: str) -> str:
        """The full commit sha ``ref`` names; :class:`SourceError` when it names none."""
        ...

    def commit_url(self, sha: str) -> str | None:
        """The commit's web page when the repository is hosted, else None."""
        ...

    def merged_pull_requests(self, rev: str = "HEAD") -> Iterator[tuple[PullRequest, str | None]]:
        """Merged pull requests newest first, each with None or the reason it cannot be used
        (hosted: from the API, ``draft``, ``no merge commit``…; local: recognised in the
        history reachable from ``rev``, always usable)."""
        ...

    def linked_issues(self, pr: PullRequest) -> list[Issue]:
        """The issues ``pr`` says it fixes (``fixes #N``), when the source can read them (one
        API call each); ``[]`` otherwise."""
        ...

    def iter_commits(
        self,
        rev: str = "HEAD",
        *,
        limit: int | None = None,
        first_parent: bool = True,
        since: str | None = None,
    ) -> Iterator[Commit]:
        """Commits reachable from ``rev``, newest first."""
        ...

    def iter_pull_requests(
        self, rev: str = "HEAD", *, limit: int | None = None
    ) -> Iterator[PullRequest]:
        """Merged pull requests reachable from ``rev``, newest first."""
        ...

    def diff(
        self,
        base: str,
        head: str,
        *,
        paths: Iterable[str] | None = None,
        binary: bool = True,
    ) -> str:
        """A unified diff base → head that ``git apply`` accepts on a checkout of ``base``."""
        ...

    def read_file(self, ref: str, path: str) -> bytes:
        """Bytes of ``path`` at ``ref``; FileNotFoundError when absent."""
        ...

    def list_files(self, ref: str) -> list[str]:
        """Every file path (blobs and symlinks) at ``ref``, sorted as git sorts them."""
        ...

    def export_snapshot(self, ref: str, dest: Path, *, exclude: Iterable[str] = ()) -> None:
        """Write the tree at ``ref`` into ``dest`` without history."""
        ...

    def remote_url(self) -> str | None:
        """The origin URL (credentials removed), or None."""
        ...

    def repo_id(self) -> str:
        """``owner/name`` for task ids."""
        ...


def __getattr__(name: str) -> object:
    # Lazy re-export: ``repogym.sources.local`` imports the records defined above.
    if name == "LocalGitSource":
        from repogym.sources.local import LocalGitSource

        return LocalGitSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
