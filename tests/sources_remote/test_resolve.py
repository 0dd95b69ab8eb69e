"""parse_repo_arg cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.sources.resolve import RepoArg, parse_repo_arg


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPOGYM_GITHUB_API", raising=False)
    monkeypatch.delenv("REPOGYM_GITLAB_URL", raising=False)


GH = "https://api.github.com"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("acme/widgets", RepoArg("github", "acme/widgets", GH)),
        ("https://github.com/acme/widgets", RepoArg("github", "acme/widgets", GH)),
        ("https://github.com/acme/widgets.git", RepoArg("github", "acme/widgets", GH)),
        ("https://github.com/acme/widgets/pull/3", RepoArg("github", "acme/widgets", GH)),
        (
            "https://gitlab.example.com/group/sub/name",
            RepoArg("gitlab", "group/sub/name", "https://gitlab.example.com"),
        ),
        (
            "https://gitlab.example.com/group/name.git",
            RepoArg("gitlab", "group/name", "https://gitlab.example.com"),
        ),
        (
            "https://gitlab.com/g/s/n/-/merge_requests/4",
            RepoArg("gitlab", "g/s/n", "https://gitlab.com"),
        ),
        ("gitlab:group/sub/name", RepoArg("gitlab", "group/sub/name", "https://gitlab.com")),
    ],
)
def test_remote(text: str, expected: RepoArg) -> None:
    assert parse_repo_arg(text) == expected


def test_env_base_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_GITLAB_URL", "https://git.corp/")
    monkeypatch.setenv("REPOGYM_GITHUB_API", "http://127.0.0.1:1")
    assert parse_repo_arg("gitlab:a/b").base_url == "https://git.corp"
    assert parse_repo_arg("a/b").base_url == "http://127.0.0.1:1"


def test_local_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme" / "widgets").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert parse_repo_arg("acme/widgets") == RepoArg(
        "local", str((tmp_path / "acme" / "widgets").resolve()), None
    )
    assert parse_repo_arg(str(tmp_path)).kind == "local"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "justname",
        "a/b/c",
        "https://bitbucket.org/a/b",
        "https://github.com/acme",
        "gitlab:onlyone",
        "ftp://x/y",
        "/no/such/dir/here",
    ],
)
def test_unsupported(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_repo_arg(text)
    assert "\n" not in str(info.value)
