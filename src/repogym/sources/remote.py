"""Remote repositories (GitHub, GitLab) as pipelines see them: the hosting API plus a cached
bare clone that :class:`~repogym.sources.LocalGitSource` reads.

Clones live under ``$REPOGYM_CACHE/clones/<host>/<owner>/<name>`` (default
``~/.cache/repogym``; ``$REPOGYM_CLONE_CACHE`` replaces ``…/clones``). The first run clones into
a temporary folder beside the target and renames it into place, so an interrupted clone never
leaves a half repository; later runs reuse the clone and fetch what changed. Commits a pull
request needs that are not on any branch (merged into a deleted branch, …) are fetched on demand
through the host's pull-request refs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from repogym._secrets import redact_url
from repogym.plugins import PluginError, Registry, subclass_of
from repogym.sources import PullRequest, SourceError
from repogym.sources._http import Issue, RemotePullRequest
from repogym.sources.github import GitHubSource, RepoInfo
from repogym.sources.gitlab import GitLabSource
from repogym.sources.local import LocalGitSource
from repogym.sources.resolve import RepoArg

HostApi = type[GitHubSource] | type[GitLabSource]


HOSTS: Registry[HostApi] = Registry(
    "repository host",
    group="repogym.sources",
    builtins={
        "github": "repogym.sources.github:GitHubSource",
        "gitlab": "repogym.sources.gitlab:GitLabSource",
    },
    check=subclass_of((GitHubSource, GitLabSource), "a repository host API class"),
)
"""Hosts of remote repositories (``RepoArg.kind``) → their API class, built as
``cls(locator, base_url=…, max_wait_s=…)``; plug-ins: entry points of ``repogym.sources``
naming a subclass of one of them."""

__all__ = ["RemoteGitSource", "RemoteRepo", "clone_dir", "clones_root", "open_remote"]

BRANCHES = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]


def clones_root() -> Path:
    """``$REPOGYM_CLONE_CACHE``, else ``$REPOGYM_CACHE/clones`` (``~/.cache/repogym/clones``)."""
    env = os.environ.get("REPOGYM_CLONE_CACHE")
    if env:
        return Path(env).expanduser()
    env = os.environ.get("REPOGYM_CACHE")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "repogym"
    return base / "clones"


def _host(kind: str, base_url: str) -> str:
    """The folder a host's clones go in: ``github.com``, ``gitlab.com``, ``127.0.0.1_8080``."""
    netloc = (urlsplit(base_url).netloc or kind).rsplit("@", 1)[-1].lower()
    if netloc == "api.github.com":
        return "github.com"
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in netloc)


def clone_dir(kind: str, base_url: str, repo_id: str, root: Path | None = None) -> Path:
    """Where the clone of ``repo_id`` on that host is cached."""
    parts = [p for p in repo_id.split("/") if p and p not in (".", "..")]
    return (root or clones_root()) / _host(kind, base_url) / Path(*parts)


@dataclass
class RemoteRepo:
    """A GitHub or GitLab repository: its API, what the API said about it, and a local clone."""

    kind: str
    """``github``, ``gitlab`` or a plug-in host's name (:data:`HOSTS`)."""
    api: GitHubSource | GitLabSource
    info: RepoInfo
    clone: Path
    cache: Literal["cloned", "fetched"]
    fetched_refs: list[str] = field(default_factory=list)

    @property
    def repo_id(self) -> str:
        """``owner/name`` (GitLab: ``group/sub/name``) as the API spells it."""
        return self.info.full_name or self.api.repo_id()

    @property
    def access(self) -> str:
        """Provenance ``source_access``: ``public`` or ``private``."""
        return self.info.access

    def describe(self) -> dict[str, object]:
        """What the report records about the source (no secrets: URLs carry no credentials)."""
        return {
            "kind": self.kind,
            "repo_id": self.repo_id,
            "api": redact_url(self.api.base_url),
            "web_url": redact_url(self.info.web_url),
            "default_branch": self.info.default_branch,
            "access": self.access,
            "clone": str(self.clone),
            "cache": self.cache,
        }

    def merged_pull_requests(self, limit: int | None = None) -> Iterator[RemotePullRequest]:
        """Merged pull (merge) requests, most recently updated first."""
        return self.api.iter_merged_pull_requests(limit)

    def linked_issues(self, pr: RemotePullRequest) -> list[Issue]:
        """Issues the pull request says it fixes (``fixes/closes/resolves #N``)."""
        return self.api.linked_issues(pr)

    def commit_url(self, sha: str) -> str:
        """The web page of a commit, or the bare sha when the API gave no web URL."""
        if not self.info.web_url:
            return sha
        sep = "/-/commit/" if self.kind == "gitlab" else "/commit/"
        return f"{self.info.web_url.rstrip('/')}{sep}{sha}"

    def ensure_commits(self, checkout: LocalGitSource, number: int, shas: list[str]) -> bool:
        """True when every sha is in the clone, fetching the pull request's refs, then the
        shas themselves, when some are missing."""
        wanted = [s for s in shas if s]
        if all(_has(checkout, s) for s in wanted):
            return True
        attempts = [[spec] for spec in self.api.pull_request_refspecs(number)]
        attempts += [[s] for s in wanted]
        for refspecs in attempts:
            try:
                self.api.fetch(self.clone, refspecs)
            except SourceError:
                continue  # that ref is gone or the host refuses fetching by sha
            self.fetched_refs += refspecs
            checkout.close()  # the cat-file helper restarts and sees the new objects
            if all(_has(checkout, s) for s in wanted):
                return True
        return False


def _has(checkout: LocalGitSource, sha: str) -> bool:
    try:
        checkout.resolve(sha)
    except SourceError:
        return False
    return True


def _valid_clone(path: Path) -> bool:
    if not path.is_dir():
        return False
    proc = subprocess.run(
        ["git", "--git-dir", str(path), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode == 0


def open_remote(
    arg: RepoArg,
    *,
    root: Path | None = None,
    max_wait_s: float = 60,
) -> RemoteRepo:
    """Ask the API about ``arg`` and clone it into the cache (or fetch into the cached clone).

    Raises :class:`SourceError` (one line, no secrets) when the repository cannot be read.
    """
    try:
        host = HOSTS.get(arg.kind)
    except PluginError:
        raise SourceError(f"not a remote repository: {arg.locator}") from None
    api = host(arg.locator, base_url=arg.base_url, max_wait_s=max_wait_s)
    info = api.repo_info()
    dest = clone_dir(arg.kind, api.base_url, info.full_name or api.repo_id(), root)
    if _valid_clone(dest):
        api.fetch(dest, BRANCHES)
        cache: Literal["cloned", "fetched"] = "fetched"
    else:
        if dest.exists():
            shutil.rmtree(dest)  # an unusable leftover (e.g. an older layout)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
        try:
            api.clone(tmp / "repo.git", bare=True)
            try:
                (tmp / "repo.git").rename(dest)
            except OSError:
                if not _valid_clone(dest):  # a concurrent run won the race: use its clone
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        cache = "cloned"
    return RemoteRepo(arg.kind, api, info, dest, cache)


class RemoteGitSource(LocalGitSource):
    """A :class:`LocalGitSource` over a remote repository's cached clone whose pull requests
    come from the hosting API (merged ones; drafts flagged) rather than from merge-commit
    messages, and whose ``repo_id`` is the remote ``owner/name``.

    Each pull request's commits are fetched into the clone when missing. Its ``merge_sha`` is
    the commit that landed (merge, squash or fast-forward head) and ``base_sha`` that commit's
    first parent, so the change is exactly what the pull request brought into its target branch
    (the API's base sha can lag behind the branch and would fold unrelated commits in); the API's
    base sha is kept when the landed commit has no parent in the clone.
    """

    def __init__(self, remote: RemoteRepo) -> None:
        super().__init__(remote.clone)
        self.remote = remote
        self.unavailable: list[tuple[int, str]] = []
        """Pull requests skipped by :meth:`iter_pull_requests`: (number, reason)."""

    def __repr__(self) -> str:
        return f"RemoteGitSource({self.remote.repo_id!r}, clone={str(self.path)!r})"

    def repo_id(self) -> str:
        """The remote ``owner/name`` (GitLab: ``group/sub/name``)."""
        return self.remote.repo_id

    def remote_pull_requests(
        self, *, limit: int | None = None
    ) -> Iterator[tuple[RemotePullRequest, str | None]]:
        """Merged pull requests from the API, newest first, each with None or the reason it
        cannot be used (``draft``, ``no merge commit``, ``commits not fetchable``). Usable ones
        have ``base_sha``/``merge_sha`` resolved in the clone and ``files`` filled in."""
        for pr in self.remote.merged_pull_requests(limit):
            if pr.draft:
                yield pr, "draft"
                continue
            head = pr.merge_sha or pr.head_sha
            if not head:
                yield pr, "no merge commit"
                continue
            if not self.remote.ensure_commits(self, pr.number, [head]):
                yield pr, "commits not fetchable"
                continue
            pr.merge_sha = self.resolve(head)
            try:
                pr.base_sha = self.resolve(f"{pr.merge_sha}^1")
            except SourceError:
                if not pr.base_sha or not self.remote.ensure_commits(
                    self, pr.number, [pr.base_sha]
                ):
                    yield pr, "no base commit"
                    continue
            self._with_files([pr])
            yield pr, None

    def commit_url(self, sha: str) -> str | None:
        """The commit's web page (the bare sha when the API gave no web URL)."""
        return self.remote.commit_url(sha)

    def merged_pull_requests(self, rev: str = "HEAD") -> Iterator[tuple[PullRequest, str | None]]:
        """:meth:`remote_pull_requests` (``rev`` is ignored: the API lists them)."""
        return self.remote_pull_requests()

    def iter_pull_requests(
        self, rev: str = "HEAD", *, limit: int | None = None, first_parent: bool = True
    ) -> Iterator[PullRequest]:
        """Usable merged pull requests from the API (drafts included, flagged ``draft``);
        others are listed in :attr:`unavailable`. ``rev`` and ``first_parent`` are ignored."""
        for pr, why in self.remote_pull_requests(limit=limit):
            if why is None or why == "draft":
                yield pr
            else:
                self.unavailable.append((pr.number, why))

    def linked_issues(self, pr: PullRequest) -> list[Issue]:
        """Issues the pull request says it fixes."""
        return self.remote.linked_issues(pr)  # type: ignore[arg-type]
