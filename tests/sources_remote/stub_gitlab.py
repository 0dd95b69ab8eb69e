"""A tiny GitLab ``/api/v4`` stand-in on 127.0.0.1 (random port, background thread)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.sources_remote.stub_github import Reply, StubServer

PROJECT = "/api/v4/projects/group%2Fsub%2Fname"


def gitlab_rate_limited(reset_in: float) -> Callable[[], Reply]:
    """A one-shot GitLab 429 with ``RateLimit-Reset`` computed when served."""

    def reply() -> Reply:
        reset = int(time.time() + reset_in) + 1
        headers = {
            "RateLimit-Limit": "600",
            "RateLimit-Remaining": "0",
            "RateLimit-Reset": str(reset),
        }
        return 429, headers, {"message": "Retry later"}

    return reply


class GitLabStub(StubServer):
    """``group/sub/name`` with 230 merged MRs paged by ``X-Next-Page`` only."""

    def __init__(self, clone_url: str = "", n_mrs: int = 230) -> None:
        super().__init__()
        self.clone_url = clone_url
        self.mrs: list[dict[str, Any]] = [
            {
                "iid": n,
                "state": "merged",
                "title": f"MR {n}",
                "description": f"Closes #{500 + n}" if n % 7 == 0 else "",
                "merge_commit_sha": f"m{n:039d}" if n % 2 else None,
                "squash_commit_sha": None if n % 2 else f"s{n:039d}",
                "diff_refs": {"base_sha": f"b{n:039d}", "head_sha": f"h{n:039d}"},
                "draft": False,
                "author": {"username": "dev"},
            }
            for n in range(n_mrs, 0, -1)
        ]

    def route(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Reply:
        if headers.get("private-token") == "bad-token":
            return 401, {}, {"message": "401 Unauthorized"}
        if path == PROJECT:
            return (
                200,
                {},
                {
                    "path_with_namespace": "group/sub/name",
                    "default_branch": "main",
                    "visibility": "internal",
                    "http_url_to_repo": self.clone_url,
                },
            )
        if path == f"{PROJECT}/merge_requests":
            per_page, page = int(query.get("per_page", "20")), int(query.get("page", "1"))
            chunk = self.mrs[(page - 1) * per_page : page * per_page]
            more = page * per_page < len(self.mrs)
            return 200, {"X-Next-Page": str(page + 1) if more else ""}, chunk
        if path.startswith(f"{PROJECT}/merge_requests/") and path.endswith("/changes"):
            return (
                200,
                {},
                {
                    "changes": [
                        {
                            "old_path": "a.py",
                            "new_path": "a.py",
                            "new_file": False,
                            "renamed_file": False,
                            "deleted_file": False,
                            "diff": "@@ -1,2 +1,2 @@\n-x\n+y\n+z\n ctx\n",
                        },
                        {
                            "old_path": "o.py",
                            "new_path": "n.py",
                            "new_file": False,
                            "renamed_file": True,
                            "deleted_file": False,
                            "diff": "",
                        },
                        {
                            "old_path": "d.py",
                            "new_path": "d.py",
                            "new_file": False,
                            "renamed_file": False,
                            "deleted_file": True,
                            "diff": "@@ -1 +0,0 @@\n-gone\n",
                        },
                        {
                            "old_path": "b.bin",
                            "new_path": "b.bin",
                            "new_file": True,
                            "renamed_file": False,
                            "deleted_file": False,
                            "diff": "Binary files /dev/null and b/b.bin differ\n",
                        },
                    ]
                },
            )
        if path.startswith(f"{PROJECT}/issues/"):
            num = int(path.rsplit("/", 1)[1])
            return (
                200,
                {},
                {"iid": num, "title": f"Issue {num}", "description": f"d {num}", "labels": ["bug"]},
            )
        return 404, {}, {"message": "404 Project Not Found"}
