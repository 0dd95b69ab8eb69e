"""``GitHubSource``: merged pull requests, their files and linked issues over the GitHub REST API.

HTTP through :mod:`repogym.sources._http` (httpx, one retry policy). Token: ``token`` argument, else
``GITHUB_TOKEN``, ``GH_TOKEN``, else ``gh auth token`` when the GitHub CLI is installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from repogym.auth import github_token_source
from repogym.sources import FileChange
from repogym.sources._http import (
    HostedRepo,
    HttpClient,
    Issue,
    RemotePullRequest,
)

__all__ = ["GitHubSource", "RepoInfo", "github_token"]

DEFAULT_API = "https://api.github.com"
_STATUS = {"added": "A", "removed": "D", "modified": "M", "renamed": "R", "copied": "C"}


@dataclass(slots=True)
class RepoInfo:
    """What the API says about a repository."""

    default_branch: str
    private: bool
    clone_url: str
    full_name: str = ""
    web_url: str = ""
    """The repository's page (``https://github.com/owner/name``); empty when not reported."""

    @property
    def access(self) -> str:
        """``"private"`` or ``"public"`` (provenance ``source_access``)."""
        return "private" if self.private else "public"


def github_token(token: str | None = None) -> str | None:
    """``token``, else ``GITHUB_TOKEN``, ``GH_TOKEN``, else ``gh auth token``; None if none."""
    return token or github_token_source()[0]


class GitHubSource(HostedRepo):
    """A GitHub repository read through the REST API."""

    service = "GitHub"
    git_user = "x-access-token"

    def __init__(
        self,
        repo: str,
        *,
        token: str | None = None,
        base_url: str | None = None,
        max_wait_s: float = 60,
        backoff_s: float = 1.0,
    ) -> None:
        parts = repo.strip().removesuffix(".git").split("/")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"expected owner/name, got {repo!r}")
        self.owner, self.name = parts
        self.base_url = (base_url or os.environ.get("REPOGYM_GITHUB_API") or DEFAULT_API).rstrip(
            "/"
        )
        self._token = github_token(token)
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        self.http = HttpClient(
            service="GitHub",
            headers=headers,
            secrets=(self._token,) if self._token else (),
            token_hint="GITHUB_TOKEN (or GH_TOKEN / gh auth login)",
            max_wait_s=max_wait_s,
            backoff_s=backoff_s,
        )
        self._info: RepoInfo | None = None

    def __repr__(self) -> str:
        return f"GitHubSource({self.repo_id()!r}, base_url={self.base_url!r})"

    def repo_id(self) -> str:
        """``owner/name``."""
        return f"{self.owner}/{self.name}"

    def _url(self, tail: str) -> str:
        return f"{self.base_url}/repos/{quote(self.owner)}/{quote(self.name)}{tail}"

    def repo_info(self) -> RepoInfo:
        """Default branch, private flag and clone URL (cached)."""
        if self._info is None:
            data = self.http.get_json(self._url(""), what=f"repository {self.repo_id()}")
            self._info = RepoInfo(
                default_branch=str(data.get("default_branch") or "main"),
                private=bool(data.get("private")),
                clone_url=str(data.get("clone_url") or ""),
                full_name=str(data.get("full_name") or self.repo_id()),
                web_url=str(data.get("html_url") or ""),
            )
        return self._info

    def iter_merged_pull_requests(self, limit: int | None = None) -> Iterator[RemotePullRequest]:
        """Merged pull requests, most recently updated first (closed-unmerged ones skipped)."""
        if limit is not None and limit <= 0:
            return
        url = self._url("/pulls?state=closed&sort=updated&direction=desc&per_page=100")
        count = 0
        for item in self.http.paginate(url, what=f"pull requests of {self.repo_id()}"):
            if not item.get("merged_at"):
                continue
            yield _pull_request(item)
            count += 1
            if limit is not None and count >= limit:
                return

    def pull_request_files(self, number: int) -> list[FileChange]:
        """Files a pull request changes (GitHub lists at most 3000)."""
        url = self._url(f"/pulls/{int(number)}/files?per_page=100")
        what = f"files of pull request #{number} in {self.repo_id()}"
        return [_file_change(item) for item in self.http.paginate(url, what=what)]

    def issue(self, number: int) -> Issue:
        """One issue by number."""
        data = self.http.get_json(
            self._url(f"/issues/{int(number)}"), what=f"issue #{number} in {self.repo_id()}"
        )
        labels = [
            str(lb.get("name", "")) for lb in data.get("labels") or [] if isinstance(lb, dict)
        ]
        return Issue(int(data["number"]), data.get("title") or "", data.get("body") or "", labels)

    @staticmethod
    def pull_request_refspecs(number: int) -> list[str]:
        """Refspecs that bring a pull request's commits into a clone."""
        n = int(number)
        return [
            f"+refs/pull/{n}/head:refs/pull/{n}/head",
            f"+refs/pull/{n}/merge:refs/pull/{n}/merge",
        ]


def _pull_request(item: dict[str, Any]) -> RemotePullRequest:
    return RemotePullRequest(
        number=int(item["number"]),
        title=item.get("title") or "",
        body=item.get("body") or "",
        kind="merge",
        merge_sha=item.get("merge_commit_sha") or "",
        base_sha=(item.get("base") or {}).get("sha") or "",
        head_sha=(item.get("head") or {}).get("sha") or "",
        author=((item.get("user") or {}).get("login")) or "",
        date=item.get("merged_at") or "",
        draft=bool(item.get("draft")),
        url=item.get("html_url") or "",
    )


def _file_change(item: dict[str, Any]) -> FileChange:
    status = _STATUS.get(str(item.get("status")), "M")
    binary = "patch" not in item or item.get("patch") is None
    return FileChange(
        path=item["filename"],
        status=status,
        old_path=item.get("previous_filename") if status in ("R", "C") else None,
        binary=binary,
        additions=0 if binary else int(item.get("additions") or 0),
        deletions=0 if binary else int(item.get("deletions") or 0),
    )
