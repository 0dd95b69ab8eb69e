"""GitLabSource against a local stub of ``/api/v4`` (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.sources import SourceError
from repogym.sources.gitlab import GitLabSource
from tests.sources_remote.stub_github import server_error
from tests.sources_remote.stub_gitlab import PROJECT, GitLabStub, gitlab_rate_limited
from tests.sources_remote.test_github import git

SECRET = "glpat-SeCrEt0123456789"


@pytest.fixture
def stub():
    with GitLabStub() as server:
        yield server


def make(stub: GitLabStub, project: str = "group/sub/name", **kw: object) -> GitLabSource:
    kw.setdefault("token", SECRET)
    kw.setdefault("backoff_s", 0.01)
    return GitLabSource(project, base_url=stub.url, **kw)  # type: ignore[arg-type]


def test_repo_info_encoded_path_and_header(stub: GitLabStub) -> None:
    info = make(stub).repo_info()
    assert (info.default_branch, info.private, info.full_name) == ("main", True, "group/sub/name")
    _, path, headers = stub.requests[-1]
    assert path == PROJECT and headers["private-token"] == SECRET


def test_token_from_env(stub: GitLabStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITLAB_TOKEN", "env-token")
    GitLabSource("group/sub/name", base_url=stub.url).repo_info()
    assert stub.requests[-1][2]["private-token"] == "env-token"


def test_merge_requests_x_next_page(stub: GitLabStub) -> None:
    mrs = list(make(stub).iter_merged_pull_requests())
    assert len(mrs) == 230
    assert len([r for r in stub.requests if "/merge_requests?" in r[1]]) == 3
    assert "state=merged" in stub.requests[0][1]
    m230, m229 = mrs[0], mrs[1]
    assert (m230.number, m230.kind, m230.merge_sha[0]) == (230, "squash", "s")
    assert (m229.number, m229.kind, m229.merge_sha[0]) == (229, "merge", "m")
    assert m230.base_sha.startswith("b") and m230.head_sha.startswith("h")
    assert len(list(make(stub).iter_merged_pull_requests(limit=4))) == 4


def test_changes(stub: GitLabStub) -> None:
    files = make(stub).pull_request_files(3)
    got = [(f.path, f.status, f.old_path, f.binary, f.additions, f.deletions) for f in files]
    assert got == [
        ("a.py", "M", None, False, 2, 1),
        ("n.py", "R", "o.py", True, 0, 0),
        ("d.py", "D", None, False, 0, 1),
        ("b.bin", "A", None, True, 0, 0),
    ]


def test_linked_issues(stub: GitLabStub) -> None:
    src = make(stub)
    mr = next(m for m in src.iter_merged_pull_requests() if m.number == 224)
    assert [(i.number, i.title, i.body) for i in src.linked_issues(mr)] == [
        (724, "Issue 724", "d 724")
    ]


def test_429_waits_then_recovers(stub: GitLabStub) -> None:
    stub.faults.append((PROJECT, gitlab_rate_limited(0.5)))
    src = make(stub)
    assert src.repo_info().default_branch == "main"
    assert src.http.waited_s > 0
    assert stub.requests[1][0] - stub.requests[0][0] >= 0.5


def test_429_far_reset_raises(stub: GitLabStub) -> None:
    stub.faults.append((PROJECT, gitlab_rate_limited(7200)))
    with pytest.raises(SourceError, match=r"GitLab API rate limit exceeded .*resets at \d{4}-"):
        make(stub, max_wait_s=10).repo_info()


def test_404_401_5xx(stub: GitLabStub) -> None:
    with pytest.raises(SourceError, match="not found or private: set GITLAB_TOKEN"):
        make(stub, project="group/other").repo_info()
    with pytest.raises(SourceError, match="bad or expired token"):
        make(stub, token="bad-token").repo_info()
    stub.faults.append((PROJECT, server_error(503)))
    assert make(stub).repo_info().default_branch == "main"


def test_token_not_in_errors(stub: GitLabStub) -> None:
    msgs = []
    for project in ("group/other",):
        with pytest.raises(SourceError) as info:
            make(stub, project=project).repo_info()
        msgs.append(str(info.value))
    stub.faults.append((PROJECT, gitlab_rate_limited(7200)))
    with pytest.raises(SourceError) as info:
        make(stub, max_wait_s=1).repo_info()
    msgs.append(str(info.value))
    assert all(SECRET not in m for m in msgs)


def test_bad_project_arg() -> None:
    with pytest.raises(ValueError):
        GitLabSource("justname")


def test_clone(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "f").write_text("x\n")
    git("add", "f", cwd=work)
    git("commit", "-q", "-m", "x", cwd=work)
    sha = git("rev-parse", "HEAD", cwd=work)
    bare = tmp_path / "b.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    with GitLabStub(clone_url=str(bare)) as stub:
        dest = make(stub).clone(tmp_path / "c", ref=sha)
        assert (dest / "f").read_text() == "x\n"
