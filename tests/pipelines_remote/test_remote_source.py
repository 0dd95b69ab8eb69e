"""The remote source layer without the sandbox: cached clones (atomic, reused, fetched),
pull requests from the API with their commits fetched on demand, linked issues."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repogym.sources import SourceError
from repogym.sources.remote import RemoteGitSource, clone_dir, open_remote
from repogym.sources.resolve import parse_repo_arg
from tests.pipelines_remote.remote_fixtures import (
    ISSUE_TITLE,
    Hosted,
    HostedGitHub,
    HostedGitLab,
    git_env,
)
from tests.sources_remote.stub_github import rate_limited


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True, check=True
    ).stdout.strip()


def test_clone_cached_then_fetched(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch, clean_env: Path, tmp_path: Path
) -> None:
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        first = open_remote(parse_repo_arg("acme/widgets"))
        port = gh.url.rsplit(":", 1)[1]
        assert first.clone == clean_env / f"127.0.0.1_{port}" / "acme" / "widgets"
        assert first.cache == "cloned" and first.access == "public"
        assert _git("rev-parse", "HEAD", cwd=first.clone) == hosted.shas["pr9"]
        assert not [p for p in first.clone.parent.iterdir() if p.name.endswith(".tmp")]

        # A new commit on the host: the next run reuses the clone and fetches it.
        work = tmp_path / "push"
        _git("clone", "--quiet", hosted.url, str(work), cwd=tmp_path)
        (work / "NEWS").write_text("news\n")
        _git("add", "NEWS", cwd=work)
        _git("commit", "-q", "-m", "News", cwd=work)
        new = _git("rev-parse", "HEAD", cwd=work)
        _git("push", "-q", "origin", "HEAD:main", cwd=work)
        try:
            again = open_remote(parse_repo_arg("acme/widgets"))
            assert again.cache == "fetched" and again.clone == first.clone
            assert _git("rev-parse", "HEAD", cwd=again.clone) == new
        finally:
            _git(
                "push", "-q", "--force", "origin", f"{hosted.shas['pr9']}:refs/heads/main", cwd=work
            )


def test_pull_requests_from_api_with_commits_fetched(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        source = RemoteGitSource(open_remote(parse_repo_arg("https://github.com/acme/widgets")))
        assert source.repo_id() == "acme/widgets"
        got = {pr.number: (pr, why) for pr, why in source.remote_pull_requests()}
        assert sorted(got) == [5, 7, 8, 9]  # #6 was closed unmerged
        assert got[7][1] == "draft"
        s = hosted.shas
        pr8, why = got[8]
        assert why is None and pr8.merge_sha == s["pr8"] and pr8.base_sha == s["pr9"]
        assert "+refs/pull/8/head:refs/pull/8/head" in source.remote.fetched_refs
        pr5 = got[5][0]
        # base = the merge commit's first parent (what main was when the PR landed)
        assert (pr5.merge_sha, pr5.base_sha) == (s["pr5"], s["init"])
        assert {f.path for f in pr5.files} == {"src/shapes/area.py", "tests/test_area.py"}
        assert pr5.url == "https://github.com/acme/widgets/pull/5"
        assert [i.title for i in source.linked_issues(pr5)] == [ISSUE_TITLE]
        assert [p.number for p in source.iter_pull_requests()] == [9, 8, 7, 5]


def test_gitlab_merge_requests_and_refs(hosted: Hosted, monkeypatch: pytest.MonkeyPatch) -> None:
    with HostedGitLab(hosted, token="glpat-test-token-1234") as gl:
        monkeypatch.setenv("REPOGYM_GITLAB_URL", gl.url)
        with pytest.raises(SourceError, match="not found or private: set GITLAB_TOKEN"):
            open_remote(parse_repo_arg("gitlab:group/widgets"))
        monkeypatch.setenv("GITLAB_TOKEN", "glpat-test-token-1234")
        remote = open_remote(parse_repo_arg("gitlab:group/widgets"))
        assert remote.access == "private" and remote.repo_id == "group/widgets"
        source = RemoteGitSource(remote)
        got = {pr.number: pr for pr, why in source.remote_pull_requests() if why is None}
        assert got[9].merge_sha == hosted.shas["pr9"] and got[9].kind == "squash"
        assert got[8].merge_sha == hosted.shas["pr8"]
        assert "+refs/merge-requests/8/head:refs/merge-requests/8/head" in remote.fetched_refs
        assert remote.commit_url("abc") == "https://gitlab.example/group/widgets/-/commit/abc"


def test_rate_limit_message_and_nothing_cloned(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> None:
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        gh.faults.append(("/repos/acme/widgets", rate_limited(3600)))
        with pytest.raises(SourceError) as info:
            open_remote(parse_repo_arg("acme/widgets"))
        msg = str(info.value)
        assert "rate limit exceeded" in msg and "resets at" in msg and "\n" not in msg
        assert not clean_env.exists()


def test_clone_dir_layout(tmp_path: Path) -> None:
    assert clone_dir("github", "https://api.github.com", "acme/widgets", tmp_path) == (
        tmp_path / "github.com" / "acme" / "widgets"
    )
    assert clone_dir("gitlab", "https://gitlab.com", "g/sub/../n", tmp_path) == (
        tmp_path / "gitlab.com" / "g" / "sub" / "n"
    )
