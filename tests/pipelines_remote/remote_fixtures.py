"""A hosted repository for the remote generate tests: a bare git repository (served to
``git clone`` as a ``file://`` URL) and GitHub / GitLab API stubs on 127.0.0.1 that describe
its pull requests with the real commit shas.

History of ``widgets`` (a Python package with pytest tests):

* ``#5``  merge commit on ``main``: rectangle() computes the area (fixes issue ``#3``);
* ``#9``  squash commit on ``main``: a circle() helper;
* ``#8``  commit on a branch deleted after the merge: only ``refs/pull/8/head`` (GitHub) /
  ``refs/merge-requests/8/head`` (GitLab) still reach it;
* ``#7``  a draft that the API reports as merged, ``#6`` closed without merging.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.pipelines.shapes import AREA_V1, PYPROJECT
from tests.sources.conftest import GitRepo, pin_git_env
from tests.sources_remote.stub_github import Reply, StubServer

TESTS_V1 = """\
from shapes.area import rectangle, square


def test_square():
    assert square(3) == 9
"""

ISSUE_TITLE = "rectangle() returns the wrong area"
ISSUE_BODY = (
    "Calling rectangle(2, 5) gives 7 but a rectangle of width 2 and height 5 has an area of 10. "
    "It looks like the sides are summed."
)
CIRCLE_BODY = "Round shapes need an area helper: provide circle(r), the area of a disc of radius r."
TRIANGLE_BODY = "Provide triangle(base, height) that returns the area of a triangle."
GOLD_TRIANGLE = "return base * height / 2"


@dataclass
class Hosted:
    """The bare repository and the facts the stubs publish about it."""

    bare: Path
    shas: dict[str, str]

    @property
    def url(self) -> str:
        return self.bare.as_uri()


def git_env() -> dict[str, str]:
    """Isolated git (no user/system config, fixed identity)."""
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    for who in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{who}_NAME"] = "Ada Tester"
        env[f"GIT_{who}_EMAIL"] = "ada@example.com"
    return env


def _git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def build_hosted(root: Path) -> Hosted:
    """Build the work repository, then the bare repository a host would serve."""
    repo = GitRepo(root / "work")
    shas: dict[str, str] = {}
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/shapes/__init__.py", "")
    repo.write("src/shapes/area.py", AREA_V1)
    repo.write("tests/test_area.py", TESTS_V1)
    shas["init"] = repo.commit("Initial shapes package")

    repo.checkout("-b", "fix-rect")
    repo.write("src/shapes/area.py", AREA_V1.replace("width + height", "width * height"))
    repo.write(
        "tests/test_area.py",
        TESTS_V1 + "\n\ndef test_rectangle():\n    assert rectangle(2, 5) == 10\n",
    )
    shas["pr5_head"] = repo.commit("compute the area")
    repo.checkout("main")
    shas["pr5"] = repo.merge("fix-rect", "Merge pull request #5 from ada/fix-rect", "Fix area")

    area = (repo.path / "src/shapes/area.py").read_text()
    area += "\n\ndef circle(r):\n    return 3.14159 * r * r\n"
    repo.write("src/shapes/area.py", area)
    repo.write(
        "tests/test_circle.py",
        "from shapes.area import circle\n\n\ndef test_circle():\n"
        "    assert round(circle(1), 2) == 3.14\n",
    )
    shas["pr9"] = repo.commit("Add a circle helper (#9)")

    repo.checkout("-b", "release")
    repo.write(
        "src/shapes/area.py", area + f"\n\ndef triangle(base, height):\n    {GOLD_TRIANGLE}\n"
    )
    repo.write(
        "tests/test_triangle.py",
        "from shapes.area import triangle\n\n\ndef test_triangle():\n"
        "    assert triangle(4, 3) == 6\n",
    )
    shas["pr8"] = repo.commit("Add triangle")
    repo.checkout("main")

    bare = root / "widgets.git"
    _git("clone", "--quiet", "--bare", str(repo.path), str(bare), cwd=root)
    _git("update-ref", "refs/pull/8/head", shas["pr8"], cwd=bare)
    _git("update-ref", "refs/merge-requests/8/head", shas["pr8"], cwd=bare)
    _git("update-ref", "refs/pull/5/head", shas["pr5_head"], cwd=bare)
    _git("branch", "-D", "release", cwd=bare)
    _git("branch", "-D", "fix-rect", cwd=bare)
    return Hosted(bare, shas)


def _pull(n: int, title: str, body: str, merge: str | None, base: str, **extra: Any) -> dict:
    return {
        "number": n,
        "title": title,
        "body": body,
        "merged_at": "2026-01-01T00:00:00Z" if merge else None,
        "merge_commit_sha": merge,
        "base": {"sha": base},
        "head": {"sha": extra.pop("head", merge)},
        "draft": extra.pop("draft", False),
        "user": {"login": "ada"},
        "html_url": f"https://github.com/acme/widgets/pull/{n}",
        **extra,
    }


class HostedGitHub(StubServer):
    """``acme/widgets`` (public) and ``acme/vault`` (private: 404 without the right token)."""

    def __init__(self, hosted: Hosted, *, token: str | None = None) -> None:
        super().__init__()
        self.hosted = hosted
        self.token = token
        s = hosted.shas
        self.pulls = [
            _pull(9, "Add a circle helper", CIRCLE_BODY, s["pr9"], s["pr5"]),
            _pull(8, "Add triangle", TRIANGLE_BODY, s["pr8"], s["pr9"]),
            _pull(7, "Work in progress", "Not ready.", s["pr9"], s["pr5"], draft=True),
            _pull(6, "Abandoned idea", "", None, s["init"]),
            _pull(5, "Fix area", "Fixes #3\n\nThe sides were summed.", s["pr5"], s["init"]),
        ]

    def _repo(self, name: str) -> dict[str, Any]:
        return {
            "full_name": f"acme/{name}",
            "default_branch": "main",
            "private": name == "vault",
            "clone_url": self.hosted.url,
            "html_url": f"https://github.com/acme/{name}",
        }

    def route(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Reply:
        auth = headers.get("authorization", "")
        if auth and self.token and auth != f"Bearer {self.token}":
            return 401, {}, {"message": "Bad credentials"}
        for name in ("widgets", "vault"):
            prefix = f"/repos/acme/{name}"
            if not (path == prefix or path.startswith(prefix + "/")):
                continue
            if name == "vault" and not auth:
                return 404, {}, {"message": "Not Found"}
            tail = path[len(prefix) :]
            if tail == "":
                return 200, {}, self._repo(name)
            if tail == "/pulls":
                return self.page(path, query, self.pulls)
            if tail == "/issues/3":
                return 200, {}, {"number": 3, "title": ISSUE_TITLE, "body": ISSUE_BODY}
        if path == "/user" and auth:
            return 200, {}, {"login": "ada"}
        return 404, {}, {"message": "Not Found"}


class HostedGitLab(StubServer):
    """``group/widgets`` (private: needs ``PRIVATE-TOKEN``) with merge requests !5, !8, !9."""

    PROJECT = "/api/v4/projects/group%2Fwidgets"

    def __init__(self, hosted: Hosted, *, token: str) -> None:
        super().__init__()
        self.hosted = hosted
        self.token = token
        s = hosted.shas

        def mr(n: int, title: str, body: str, merge: str | None, squash: str | None) -> dict:
            return {
                "iid": n,
                "state": "merged",
                "title": title,
                "description": body,
                "merge_commit_sha": merge,
                "squash_commit_sha": squash,
                "diff_refs": {"base_sha": s["init"], "head_sha": merge or squash},
                "draft": False,
                "author": {"username": "ada"},
                "web_url": f"https://gitlab.example/group/widgets/-/merge_requests/{n}",
            }

        self.mrs = [  # most recently updated first
            mr(5, "Fix area", "Closes #3", s["pr5"], None),
            mr(9, "Add a circle helper", CIRCLE_BODY, None, s["pr9"]),
            mr(8, "Add triangle", TRIANGLE_BODY, s["pr8"], None),
        ]

    def route(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Reply:
        if headers.get("private-token") != self.token:
            return 404, {}, {"message": "404 Project Not Found"}
        if path == self.PROJECT:
            return (
                200,
                {},
                {
                    "path_with_namespace": "group/widgets",
                    "default_branch": "main",
                    "visibility": "private",
                    "http_url_to_repo": self.hosted.url,
                    "web_url": "https://gitlab.example/group/widgets",
                },
            )
        if path == f"{self.PROJECT}/merge_requests":
            return 200, {}, self.mrs
        if path == f"{self.PROJECT}/issues/3":
            return 200, {}, {"iid": 3, "title": ISSUE_TITLE, "description": ISSUE_BODY}
        if path == "/api/v4/user":
            return 200, {}, {"username": "ada"}
        return 404, {}, {"message": "404 Not Found"}


CREDENTIALS = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "REPOGYM_LLM_API_KEY",
    "HF_TOKEN",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
)


def isolate(mp: pytest.MonkeyPatch, extra: tuple[str, ...] = ()) -> None:
    """Pinned git identity and config, and no credentials (nor ``extra`` variables) from the
    machine running the tests."""
    pin_git_env(mp, drop=(*CREDENTIALS, *extra))
