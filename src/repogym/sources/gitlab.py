"""``GitLabSource``: merged merge requests, their files and linked issues over GitLab's REST API.

HTTP through :mod:`repogym.sources._http` (httpx). Works with gitlab.com and self-hosted
instances (``base_url`` or ``REPOGYM_GITLAB_URL``). Token: ``token`` argument, else
``GITLAB_TOKEN``; sent as ``PRIVATE-TOKEN``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from repogym.sources import FileChange
from repogym.sources._http import (
    HostedRepo,
    HttpClient,
    Issue,
    RemotePullRequest,
)
from repogym.sources.github import RepoInfo

__all__ = ["GitLabSource", "RepoInfo"]

DEFAULT_URL = "https://gitlab.com"


class GitLabSource(HostedRepo):
    """A GitLab project read through ``/api/v4``."""

    service = "GitLab"
    git_user = "oauth2"

    def __init__(
        self,
        project: str,
        *,
        token: str | None = None,
        base_url: str | None = None,
        max_wait_s: float = 60,
        backoff_s: float = 1.0,
    ) -> None:
        path = project.strip().strip("/").removesuffix(".git")
        if path.count("/") < 1 or any(not part for part in path.split("/")):
            raise ValueError(f"expected group/name (or group/sub/name), got {project!r}")
        self.project = path
        self.base_url = (base_url or os.environ.get("REPOGYM_GITLAB_URL") or DEFAULT_URL).rstrip(
            "/"
        )
        self._token = token or os.environ.get("GITLAB_TOKEN", "").strip() or None
        headers = {"Accept": "application/json"}
        if self._token:
            headers["PRIVATE-TOKEN"] = self._token
        self.http = HttpClient(
            service="GitLab",
            headers=headers,
            secrets=(self._token,) if self._token else (),
            token_hint="GITLAB_TOKEN",
            max_wait_s=max_wait_s,
            backoff_s=backoff_s,
        )
        self._info: RepoInfo | None = None

    def __repr__(self) -> str:
        return f"GitLabSource({self.project!r}, base_url={self.base_url!r})"

    def repo_id(self) -> str:
        """The project path (``group/sub/name``)."""
        return self.project

    def _url(self, tail: str) -> str:
        return f"{self.base_url}/api/v4/projects/{quote(self.project, safe='')}{tail}"

    def repo_info(self) -> RepoInfo:
        """Default branch, private flag (visibility other than public) and clone URL (cached)."""
        if self._info is None:
            data = self.http.get_json(self._url(""), what=f"project {self.project}")
            self._info = RepoInfo(
                default_branch=str(data.get("default_branch") or "main"),
                private=str(data.get("visibility") or "private") != "public",
                clone_url=str(data.get("http_url_to_repo") or ""),
                full_name=str(data.get("path_with_namespace") or self.project),
                web_url=str(data.get("web_url") or ""),
            )
        return self._info

    def iter_merged_pull_requests(self, limit: int | None = None) -> Iterator[RemotePullRequest]:
        """Merged merge requests, most recently updated first."""
        if limit is not None and limit <= 0:
            return
        url = self._url("/merge_requests?state=merged&order_by=updated_at&sort=desc&per_page=100")
        count = 0
        for item in self.http.paginate(url, what=f"merge requests of {self.project}"):
            if item.get("state", "merged") != "merged":
                continue
            yield _merge_request(item)
            count += 1
            if limit is not None and count >= limit:
                return

    def pull_request_files(self, number: int) -> list[FileChange]:
        """Files a merge request (by iid) changes."""
        data = self.http.get_json(
            self._url(f"/merge_requests/{int(number)}/changes"),
            what=f"changes of merge request !{number} in {self.project}",
        )
        return [_file_change(item) for item in (data or {}).get("changes") or []]

    def issue(self, number: int) -> Issue:
        """One issue by iid."""
        data = self.http.get_json(
            self._url(f"/issues/{int(number)}"), what=f"issue #{number} in {self.project}"
        )
        labels = [str(lb) for lb in data.get("labels") or []]
        return Issue(
            int(data["iid"]), data.get("title") or "", data.get("description") or "", labels
        )

    @staticmethod
    def pull_request_refspecs(number: int) -> list[str]:
        """Refspecs that bring a pull request's commits into a clone."""
        n = int(number)
        return [f"+refs/merge-requests/{n}/head:refs/merge-requests/{n}/head"]


def _merge_request(item: dict[str, Any]) -> RemotePullRequest:
    refs = item.get("diff_refs") or {}
    squash = item.get("squash_commit_sha")
    return RemotePullRequest(
        number=int(item["iid"]),
        title=item.get("title") or "",
        body=item.get("description") or "",
        kind="squash" if squash and not item.get("merge_commit_sha") else "merge",
        merge_sha=item.get("merge_commit_sha") or squash or "",
        base_sha=refs.get("base_sha") or "",
        head_sha=refs.get("head_sha") or item.get("sha") or "",
        author=((item.get("author") or {}).get("username")) or "",
        date=item.get("merged_at") or "",
        draft=bool(item.get("draft") or item.get("work_in_progress")),
        url=item.get("web_url") or "",
    )


def _file_change(item: dict[str, Any]) -> FileChange:
    if item.get("new_file"):
        status = "A"
    elif item.get("deleted_file"):
        status = "D"
    elif item.get("renamed_file"):
        status = "R"
    else:
        status = "M"
    diff = item.get("diff") or ""
    binary = not diff.strip() or diff.startswith("Binary files")
    adds = dels = 0
    if not binary:
        for line in diff.splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                adds += 1
            elif line.startswith("-") and not line.startswith("---"):
                dels += 1
    return FileChange(
        path=item.get("new_path") or item.get("old_path") or "",
        status=status,
        old_path=item.get("old_path") if status == "R" else None,
        binary=binary,
        additions=adds,
        deletions=dels,
    )
