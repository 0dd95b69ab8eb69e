"""LocalGitSource on real repositories: history, pull requests, files, identity, errors."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from repogym._secrets import redact_url
from repogym.sources import Commit, LocalGitSource, PullRequest, Source, SourceError
from repogym.sources.local import owner_name_from_url, pull_request_from_commit
from tests.sources.conftest import GitRepo

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@dataclass
class History:
    repo: GitRepo
    shas: dict[str, str]


@pytest.fixture
def history(make_repo) -> History:
    """main: root → squash PR → (feature merged as GitHub PR) → plain merge → GitLab MR →
    refactor (rename, delete, binary) → latin-1 commit (message and file name)."""
    r: GitRepo = make_repo("history")
    s: dict[str, str] = {}
    r.write("README.md", "# Demo\n")
    r.write("src/app.py", "def parse(x):\n    return x\n")
    r.write("tests/test_app.py", "def test_parse():\n    assert True\n")
    r.write("logo.png", PNG)
    s["root"] = r.commit("Initial commit")
    r.write("src/app.py", "def parse(x):\n    return int(x)\n")
    r.write("tests/test_app.py", "def test_parse():\n    assert parse('1') == 1\n")
    s["squash"] = r.commit("Fix parsing of numbers (#12)\n\nParse as int.\n")
    r.checkout("-b", "feature")
    r.write("src/feature.py", "FLAG = True\n")
    r.write("tests/test_feature.py", "def test_flag():\n    pass\n")
    s["feature1"] = r.commit("Add feature module")
    r.write("src/feature.py", "FLAG = False\n")
    s["feature2"] = r.commit("Turn the flag off")
    r.checkout("main")
    r.write("README.md", "# Demo\n\nNow documented.\n")
    s["docs"] = r.commit("Document things")
    s["pr_merge"] = r.merge(
        "feature",
        "Merge pull request #34 from octo/feature",
        "Add a feature flag\n\nIt is off by default.",
    )
    r.checkout("-b", "topic")
    r.write("notes.txt", "note\n")
    s["topic"] = r.commit("A note")
    r.checkout("main")
    s["plain_merge"] = r.merge("topic", "Merge branch 'topic'")
    r.checkout("-b", "mr")
    r.write("src/speed.py", "FAST = 1\n")
    s["mr1"] = r.commit("Speed it up")
    r.checkout("main")
    s["gl_merge"] = r.merge(
        "mr",
        "Merge branch 'mr' into 'main'",
        "Improve speed",
        "Closes #3",
        "See merge request group/proj!7",
    )
    r.git("mv", "src/app.py", "src/core.py")
    r.remove("README.md")
    r.write("logo.png", PNG + b"\x00more")
    s["refactor"] = r.commit("Refactor: rename app, drop readme")
    r.write(b"caf\xe9.txt", b"latin-1 \xe9t\xe9\n")
    s["latin1"] = r.raw_commit(b"Caf\xe9 support\n\nD\xe9tails in latin-1.\n")
    return History(r, s)


# --------------------------------------------------------------------------- commits


def test_protocol_and_context_manager(history: History) -> None:
    with LocalGitSource(history.repo.path) as src:
        assert isinstance(src, Source)
        assert next(src.iter_commits()).sha == history.shas["latin1"]


def test_first_parent_history_newest_first(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    shas = [c.sha for c in src.iter_commits()]
    s = history.shas
    expected = ["latin1", "refactor", "gl_merge", "plain_merge", "pr_merge", "docs", "squash"]
    assert shas == [s[k] for k in expected] + [s["root"]]
    assert s["feature1"] not in shas


def test_full_history_includes_branches(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    shas = {c.sha for c in src.iter_commits(first_parent=False)}
    assert shas == set(history.shas.values())


def test_commit_fields(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    by_sha = {c.sha: c for c in src.iter_commits(first_parent=False)}
    root = by_sha[history.shas["root"]]
    assert root.parents == []
    assert root.subject == "Initial commit" and root.body == ""
    assert root.author == "Ada Tester" and root.author_email == "ada@example.com"
    assert root.date.startswith("2023-11-14T22:")
    assert {f.path: f.status for f in root.files} == {
        "README.md": "A",
        "logo.png": "A",
        "src/app.py": "A",
        "tests/test_app.py": "A",
    }
    logo = next(f for f in root.files if f.path == "logo.png")
    assert logo.binary and logo.additions == logo.deletions == 0

    squash = by_sha[history.shas["squash"]]
    assert squash.parents == [history.shas["root"]]
    assert squash.body == "Parse as int."
    app = next(f for f in squash.files if f.path == "src/app.py")
    assert (app.status, app.additions, app.deletions, app.binary) == ("M", 1, 1, False)

    merge = by_sha[history.shas["pr_merge"]]
    assert merge.is_merge and merge.parents == [history.shas["docs"], history.shas["feature2"]]
    # a merge's files are its change against the first parent
    assert sorted(f.path for f in merge.files) == ["src/feature.py", "tests/test_feature.py"]


def test_renames_deletes_binary(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    c = next(src.iter_commits(history.shas["refactor"]))
    files = {f.path: f for f in c.files}
    assert files["src/core.py"].status == "R"
    assert files["src/core.py"].old_path == "src/app.py"
    assert files["README.md"].status == "D" and files["README.md"].deletions == 3
    assert files["logo.png"].status == "M" and files["logo.png"].binary


def test_non_utf8_message_and_file_name(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    c = next(src.iter_commits())
    assert c.subject == "Caf\ufffd support"
    assert c.body == "D\ufffdtails in latin-1."
    (change,) = c.files
    assert change.path == "caf\udce9.txt"  # surrogateescape: round-trips to the real bytes
    assert src.read_file("HEAD", change.path) == b"latin-1 \xe9t\xe9\n"
    assert change.path in src.list_files("HEAD")


def test_declared_message_encoding_is_honoured(make_repo) -> None:
    r: GitRepo = make_repo()
    r.write("a.txt", "a\n")
    r.git("add", "-A")
    r.git("-c", "i18n.commitEncoding=ISO-8859-1", "commit", "-q", "-F", "-", input=b"Caf\xe9\n")
    (c,) = LocalGitSource(r.path).iter_commits()
    assert c.subject == "Café"


def test_limit_since_and_ranges(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    assert len(list(src.iter_commits(limit=3))) == 3
    assert list(src.iter_commits(limit=0)) == []
    s = history.shas
    got = [c.sha for c in src.iter_commits(f"{s['plain_merge']}..{s['refactor']}")]
    assert got == [s["refactor"], s["gl_merge"]]
    # committer dates advance one minute per commit
    late = list(src.iter_commits(since="2023-11-14T22:24:00+00:00", first_parent=False))
    assert s["latin1"] in {c.sha for c in late} and s["root"] not in {c.sha for c in late}


def test_early_close_stops_git(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    it = src.iter_commits(first_parent=False)
    assert isinstance(next(it), Commit)
    it.close()  # kills the git log process; no error, no hang
    assert len(list(src.iter_commits(first_parent=False))) == len(history.shas)


# --------------------------------------------------------------------------- pull requests


def test_pull_requests(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    prs = list(src.iter_pull_requests())
    s = history.shas
    assert [p.number for p in prs] == [7, 34, 12]
    gl, gh, sq = prs

    assert gl == PullRequest(
        number=7,
        title="Improve speed",
        body="Closes #3",
        kind="merge",
        merge_sha=s["gl_merge"],
        base_sha=s["plain_merge"],
        head_sha=s["mr1"],
        files=gl.files,
        author="Ada Tester",
        date=gl.date,
    )
    assert [f.path for f in gl.files] == ["src/speed.py"]

    assert (gh.title, gh.body, gh.kind) == ("Add a feature flag", "It is off by default.", "merge")
    assert (gh.base_sha, gh.head_sha, gh.merge_sha) == (s["docs"], s["feature2"], s["pr_merge"])

    assert (sq.title, sq.body, sq.kind) == ("Fix parsing of numbers", "Parse as int.", "squash")
    assert (sq.base_sha, sq.head_sha, sq.merge_sha) == (s["root"], s["squash"], s["squash"])
    assert sorted(f.path for f in sq.files) == ["src/app.py", "tests/test_app.py"]

    assert [p.number for p in src.iter_pull_requests(limit=2)] == [7, 34]
    assert list(src.iter_pull_requests(limit=0)) == []


def test_many_pull_requests_in_batches(make_repo) -> None:
    r: GitRepo = make_repo("many")
    r.write("a.txt", "0\n")
    r.commit("init")
    for i in range(1, 41):
        r.write(f"f{i % 7}.txt", f"{i}\n" * i)
        r.commit(f"Change {i} (#{i})" if i % 5 else f"Unrelated {i}")
    src = LocalGitSource(r.path)
    prs = list(src.iter_pull_requests())
    assert [p.number for p in prs] == [i for i in range(40, 0, -1) if i % 5]
    files = {c.sha: c.files for c in src.iter_commits()}
    assert all(p.files == files[p.merge_sha] and p.files for p in prs)
    assert [p.number for p in src.iter_pull_requests(limit=17)] == [p.number for p in prs[:17]]


def _commit(subject: str, body: str = "", parents: int = 1) -> Commit:
    return Commit("c" * 40, [f"{i}" * 40 for i in range(parents)], "a", "e", "d", subject, body)


@pytest.mark.parametrize(
    ("subject", "body", "parents", "expected"),
    [
        ("Merge pull request #5 from a/b", "Title\n\nText", 2, (5, "Title", "Text", "merge")),
        (
            "Merge pull request #5 from a/b",
            "",
            2,
            (5, "Merge pull request #5 from a/b", "", "merge"),
        ),
        ("Title (#9)", "", 2, (9, "Title", "", "merge")),  # "PR title" merge messages
        ("Cherry (#1) (#22)", "b", 1, (22, "Cherry (#1)", "b", "squash")),
        ('Revert "Fix (#3)" (#4)', "", 1, (4, 'Revert "Fix (#3)"', "", "squash")),
        ("Fast-forward", "See merge request g/p!3", 1, (3, "Fast-forward", "", "squash")),
        ("Merge branch 'x' into 'main'", "See merge request g/s/p!11", 2, (11, None, "", "merge")),
        ("Merge branch 'topic'", "", 2, None),
        ("Fix #12 in parser", "", 1, None),
        ("Title (#abc)", "", 1, None),
    ],
)
def test_pull_request_recognition(subject, body, parents, expected) -> None:
    pr = pull_request_from_commit(_commit(subject, body, parents))
    if expected is None:
        assert pr is None
        return
    number, title, pr_body, kind = expected
    assert pr is not None
    assert (pr.number, pr.body, pr.kind) == (number, pr_body, kind)
    assert pr.title == (subject if title is None else title)


def test_root_commit_is_never_a_pr() -> None:
    assert pull_request_from_commit(_commit("Initial (#1)", parents=0)) is None


# --------------------------------------------------------------------------- files


def test_read_and_list_files(history: History) -> None:
    src = LocalGitSource(history.repo.path)
    s = history.shas
    assert src.read_file(s["root"], "logo.png") == PNG
    assert src.read_file(s["root"], "README.md") == b"# Demo\n"
    assert src.read_file("HEAD", "src/core.py") == b"def parse(x):\n    return int(x)\n"
    with pytest.raises(FileNotFoundError):
        src.read_file("HEAD", "README.md")
    with pytest.raises(FileNotFoundError):
        src.read_file("HEAD", "../etc/passwd")
    with pytest.raises(IsADirectoryError):
        src.read_file("HEAD", "src")
    assert src.list_files(s["root"]) == ["README.md", "logo.png", "src/app.py", "tests/test_app.py"]


def test_odd_file_names(make_repo) -> None:
    r: GitRepo = make_repo()
    names = ["a b/c d.txt", "tab\there.txt", "new\nline.txt", 'quo"te.txt', "naïve.py"]
    for i, n in enumerate(names):
        r.write(n, f"{i}\n")
    r.symlink("link", "naïve.py")
    r.commit("odd names")
    src = LocalGitSource(r.path)
    assert sorted(src.list_files("HEAD")) == sorted([*names, "link"])
    for i, n in enumerate(names):
        assert src.read_file("HEAD", n) == f"{i}\n".encode()
    assert src.read_file("HEAD", "link") == "naïve.py".encode()
    (c,) = src.iter_commits()
    assert sorted(f.path for f in c.files) == sorted([*names, "link"])


# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/octo/demo.git", "octo/demo"),
        ("https://github.com/octo/demo", "octo/demo"),
        ("https://token@github.com/octo/demo/", "octo/demo"),
        ("git@github.com:octo/demo.git", "octo/demo"),
        ("github.com:octo/demo", "octo/demo"),
        ("ssh://git@gitlab.example.com:2222/group/sub/proj.git", "sub/proj"),
        ("git://example.org/pub/tool.git", "pub/tool"),
        ("/srv/git/demo.git", None),
        ("../demo", None),
        ("file:///srv/git/demo.git", None),
        ("https://example.org/demo.git", None),
    ],
)
def test_owner_name_from_url(url: str, expected: str | None) -> None:
    assert owner_name_from_url(url) == expected


def test_redact_url() -> None:
    assert redact_url("https://x-access-token:s3cr3t@github.com/o/r.git") == (
        "https://github.com/o/r.git"
    )
    assert redact_url("ssh://git:pw@host/o/r.git") == "ssh://git@host/o/r.git"
    assert redact_url("git@github.com:o/r.git") == "git@github.com:o/r.git"


def test_remote_url_and_repo_id(history: History, tmp_path: Path) -> None:
    src = LocalGitSource(history.repo.path)
    assert src.remote_url() is None
    assert src.repo_id() == "history"
    history.repo.git("remote", "add", "origin", "https://tok:en@github.com/acme/widget.git")
    assert src.remote_url() == "https://github.com/acme/widget.git"
    assert src.repo_id() == "acme/widget"
    # a bare clone named *.git, whose origin is a local path
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(history.repo.path), str(bare)], check=True)
    bsrc = LocalGitSource(bare)
    assert bsrc.repo_id() == "mirror"
    assert next(bsrc.iter_commits()).sha == history.shas["latin1"]
    # the .git directory itself is accepted too
    assert LocalGitSource(history.repo.path / ".git").repo_id() == "acme/widget"


# --------------------------------------------------------------------------- errors


def test_not_a_repository(tmp_path: Path, history: History) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for path in (plain, tmp_path / "missing", history.repo.path / "src"):
        with pytest.raises(SourceError, match="not a git repository") as err:
            LocalGitSource(path)
        assert "\n" not in str(err.value)


def test_empty_repository(make_repo) -> None:
    r = make_repo("empty")
    with pytest.raises(SourceError, match="empty"):
        LocalGitSource(r.path)


def test_git_missing(history: History, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="git executable not found"):
        LocalGitSource(history.repo.path, git="no-such-git-binary")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    with pytest.raises(SourceError, match="git executable not found"):
        LocalGitSource(history.repo.path)


def test_bad_ref(history: History, tmp_path: Path) -> None:
    src = LocalGitSource(history.repo.path)
    calls = [
        lambda: src.iter_commits("nope"),
        lambda: src.iter_commits("nope..HEAD"),
        lambda: src.iter_pull_requests("--all"),
        lambda: src.diff("HEAD", "nope"),
        lambda: src.read_file("nope", "x"),
        lambda: src.read_file("HEAD:src", "x"),
        lambda: src.list_files("v9.9"),
        lambda: src.export_snapshot("nope", tmp_path / "snap"),
        lambda: src.resolve("HEAD\nHEAD"),
    ]
    for call in calls:
        with pytest.raises(SourceError) as err:
            call()
        assert "\n" not in str(err.value)
    assert not (tmp_path / "snap").exists()


def test_refs_resolve(history: History) -> None:
    history.repo.git("tag", "-a", "v1", "-m", "release", history.shas["docs"])
    src = LocalGitSource(history.repo.path)
    assert src.resolve("v1") == history.shas["docs"]  # annotated tag peeled
    assert src.resolve("main~1") == history.shas["refactor"]
    assert src.resolve(history.shas["root"][:10]) == history.shas["root"]
