"""GitHubSource against a local stub of the REST API (no network)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from repogym.sources import SourceError
from repogym.sources.github import GitHubSource, github_token
from tests.sources_remote.stub_github import GitHubStub, rate_limited, server_error

SECRET = "ghp_SeCrEt0123456789abcdef"


@pytest.fixture
def stub():
    with GitHubStub() as server:
        yield server


def make(stub: GitHubStub, repo: str = "acme/widgets", **kw: object) -> GitHubSource:
    kw.setdefault("token", SECRET)
    kw.setdefault("backoff_s", 0.01)
    return GitHubSource(repo, base_url=stub.url, **kw)  # type: ignore[arg-type]


def git(*args: str, cwd: Path | None = None) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@e", "-c", "init.defaultBranch=main"]
    return subprocess.run(
        ["git", *env_args, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_repo_info_and_auth_header(stub: GitHubStub) -> None:
    info = make(stub).repo_info()
    assert (info.default_branch, info.private, info.full_name) == ("trunk", False, "acme/widgets")
    _, _, headers = stub.requests[-1]
    assert headers["authorization"] == f"Bearer {SECRET}"


def test_merged_pull_requests_follow_link_pagination(stub: GitHubStub) -> None:
    prs = list(make(stub).iter_merged_pull_requests())
    assert len([r for r in stub.requests if r[1].split("?")[0].endswith("/pulls")]) == 3
    assert len(prs) == len([p for p in stub.pulls if p["merged_at"]])
    assert all(pr.number % 3 for pr in prs)
    first = prs[0]
    assert first.number == 250 and first.title == "PR 250" and first.body == "Fixes #1250"
    assert first.merge_sha.startswith("m") and first.base_sha.startswith("b")
    assert first.head_sha.startswith("h") and first.draft is False
    assert prs[-1].number == 1 and prs[-1].draft is True


def test_limit_stops_early(stub: GitHubStub) -> None:
    prs = list(make(stub).iter_merged_pull_requests(limit=5))
    assert [p.number for p in prs] == [250, 248, 247, 245, 244]
    assert len(stub.requests) == 1


def test_pull_request_files_paginated_and_mapped(stub: GitHubStub) -> None:
    files = make(stub).pull_request_files(7)
    assert len(files) == 230
    assert len([r for r in stub.requests if "/files" in r[1]]) == 3
    png, renamed, gone, plain = files[0], files[1], files[2], files[10]
    assert (png.status, png.binary, png.additions) == ("A", True, 0)
    assert (renamed.status, renamed.old_path, renamed.binary) == ("R", "old.py", False)
    assert (gone.status, gone.deletions) == ("D", 3)
    assert (plain.status, plain.additions, plain.deletions, plain.binary) == ("M", 10, 1, False)


def test_linked_issues(stub: GitHubStub) -> None:
    src = make(stub)
    pr = next(p for p in src.iter_merged_pull_requests() if p.number == 250)
    issues = src.linked_issues(pr)
    assert [(i.number, i.title, i.body, i.labels) for i in issues] == [
        (1250, "Issue 1250", "body 1250", ["bug"])
    ]
    body = "Closes #3, resolves #4 and fixes: #3; mentions #9; resolved #404"
    assert [i.number for i in src.linked_issues(body)] == [3, 4]


def test_rate_limit_waits_until_reset(stub: GitHubStub) -> None:
    stub.faults.append(("/repos/acme/widgets/pulls", rate_limited(0.5)))
    src = make(stub)
    start = time.monotonic()
    prs = list(src.iter_merged_pull_requests(limit=3))
    assert len(prs) == 3
    assert src.http.waited_s > 0 and time.monotonic() - start >= src.http.waited_s * 0.9
    (t_limited, _, _), (t_retry, _, _) = stub.requests[0], stub.requests[1]
    assert t_retry - t_limited >= 0.5
    reset = int(stub.requests[0][0] + 0.5) + 1
    assert t_retry >= reset - 0.01  # the retry came after the advertised reset


def test_rate_limit_429_retry_after(stub: GitHubStub) -> None:
    stub.faults.append(("/repos/acme/widgets", lambda: (429, {"Retry-After": "1"}, {})))
    src = make(stub)
    assert src.repo_info().default_branch == "trunk"
    assert src.http.waited_s >= 1


def test_far_rate_limit_raises_with_reset_time(stub: GitHubStub) -> None:
    stub.faults.append(("/repos/acme/widgets", rate_limited(3600)))
    src = make(stub, max_wait_s=5)
    with pytest.raises(SourceError) as info:
        src.repo_info()
    msg = str(info.value)
    assert "rate limit" in msg and "limit 60" in msg and "resets at 20" in msg
    assert "\n" not in msg and src.http.waited_s == 0


def test_private_repo_404(stub: GitHubStub) -> None:
    with pytest.raises(SourceError, match="not found or private: set GITHUB_TOKEN"):
        make(stub, repo="acme/secret").repo_info()


def test_5xx_recovers(stub: GitHubStub) -> None:
    stub.faults += [("/repos/", server_error(502)), ("/repos/", server_error(503))]
    src = make(stub)
    assert src.repo_info().default_branch == "trunk"
    assert len(stub.requests) == 3 and src.http.waited_s > 0


def test_5xx_gives_up(stub: GitHubStub) -> None:
    stub.faults += [("/repos/", server_error(500)) for _ in range(10)]
    with pytest.raises(SourceError, match="HTTP 500"):
        make(stub).repo_info()


def test_connection_error_retried_then_raised() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    src = GitHubSource(
        "acme/widgets", token=SECRET, base_url=f"http://127.0.0.1:{port}", backoff_s=0.01
    )
    with pytest.raises(SourceError, match="cannot reach"):
        src.repo_info()
    assert src.http.waited_s > 0


def test_bad_token_401(stub: GitHubStub) -> None:
    with pytest.raises(SourceError, match="bad or expired token"):
        make(stub, token="bad-token").repo_info()


def test_token_never_in_errors(stub: GitHubStub) -> None:
    messages = []
    for fault in (rate_limited(3600), server_error(500)):
        stub.faults += [("/", fault)] * 6
        with pytest.raises(SourceError) as info:
            make(stub, max_wait_s=1).repo_info()
        messages.append(str(info.value))
        stub.faults.clear()
    for repo in ("acme/secret",):
        with pytest.raises(SourceError) as info:
            make(stub, repo=repo).repo_info()
        messages.append(str(info.value))
    stub.clone_url = f"https://{SECRET}@127.0.0.1:9/{SECRET}.git"
    with pytest.raises(SourceError) as info:
        make(stub).clone(Path("/nonexistent-dir-for-test") / "x")
    messages.append(str(info.value))
    src = make(stub)
    messages.append(src.http.redact(f"GET {stub.url}/?t={SECRET}"))
    messages.append(repr(src))
    assert all(SECRET not in m for m in messages), messages


def test_token_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "from-github")
    monkeypatch.setenv("GH_TOKEN", "from-gh")
    assert github_token("explicit") == "explicit"
    assert github_token() == "from-github"
    monkeypatch.delenv("GITHUB_TOKEN")
    assert github_token() == "from-gh"
    monkeypatch.delenv("GH_TOKEN")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert github_token() is None


def test_clone_from_local_bare_repo(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "a.txt").write_text("one\n")
    git("add", "a.txt", cwd=work)
    git("commit", "-q", "-m", "one", cwd=work)
    first = git("rev-parse", "HEAD", cwd=work)
    (work / "a.txt").write_text("two\n")
    git("commit", "-q", "-am", "two", cwd=work)
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    with GitHubStub(clone_url=str(bare)) as stub:
        src = make(stub)
        dest = src.clone(tmp_path / "c1")
        assert (dest / "a.txt").read_text() == "two\n"
        dest2 = src.clone(tmp_path / "c2", ref=first)
        assert (dest2 / "a.txt").read_text() == "one\n"
        assert git("rev-parse", "HEAD", cwd=dest2) == first
        with pytest.raises(SourceError, match="checkout failed"):
            src.clone(tmp_path / "c3", ref="no-such-ref")


def test_bare_clone_fetch_and_pull_refs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "a.txt").write_text("one\n")
    git("add", "a.txt", cwd=work)
    git("commit", "-q", "-m", "one", cwd=work)
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    (work / "a.txt").write_text("two\n")
    git("commit", "-q", "-am", "two", cwd=work)
    off_branch = git("rev-parse", "HEAD", cwd=work)
    git("push", "-q", str(bare), "HEAD:refs/pull/12/head", cwd=work)
    with GitHubStub(clone_url=bare.as_uri()) as stub:
        src = make(stub)
        dest = src.clone(tmp_path / "c.git", bare=True)
        assert not (dest / "a.txt").exists() and (dest / "HEAD").is_file()
        missing = subprocess.run(["git", "--git-dir", str(dest), "cat-file", "-e", off_branch])
        assert missing.returncode != 0
        specs = src.pull_request_refspecs(12)
        assert specs == [
            "+refs/pull/12/head:refs/pull/12/head",
            "+refs/pull/12/merge:refs/pull/12/merge",
        ]
        src.fetch(dest, specs[:1])
        assert git("--git-dir", str(dest), "rev-parse", "refs/pull/12/head") == off_branch
        with pytest.raises(SourceError, match="git fetch failed"):
            src.fetch(dest, specs[1:])  # no merge ref on this host
        with pytest.raises(SourceError, match="invalid refspec"):
            src.fetch(dest, ["--upload-pack=evil"])
        with pytest.raises(SourceError, match="bare clone"):
            src.clone(tmp_path / "d.git", ref="HEAD", bare=True)


def test_git_errors_never_carry_the_token(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with GitHubStub(clone_url=f"https://127.0.0.1:{port}/acme/widgets.git") as stub:
        src = make(stub)
        for call in (
            lambda: src.clone(tmp_path / "x.git", bare=True),
            lambda: src.fetch(tmp_path, ["+refs/heads/*:refs/heads/*"]),
        ):
            with pytest.raises(SourceError) as info:
                call()
            assert SECRET not in str(info.value) and SECRET[:10] not in str(info.value)
            assert "\n" not in str(info.value)
