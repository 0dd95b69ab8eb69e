"""diff + split_patch on real repositories: both halves must ``git apply --check`` on the base,
and applying both must reproduce the head tree exactly."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.sources import LocalGitSource
from repogym.sources.patches import decode_patch, files_in_patch, parse_patch, split_patch
from tests.sources._helpers import git_apply, tree_state
from tests.sources.conftest import GitRepo

BIN = bytes(range(256)) * 8


def case_modify(r: GitRepo) -> None:
    r.write("src/app.py", "def f():\n    return 2\n")
    r.write("tests/test_app.py", "def test_f():\n    assert f() == 2\n")


def case_add_delete(r: GitRepo) -> None:
    r.write("src/new.py", "NEW = 1\n")
    r.write("tests/test_new.py", "def test_new():\n    pass\n")
    r.remove("tests/test_old.py")
    r.remove("docs/guide.md")


def case_rename(r: GitRepo) -> None:
    r.git("mv", "src/app.py", "src/core.py")
    r.git("mv", "tests/test_app.py", "tests/test_core.py")
    r.git("mv", "src/helper.py", "tests/helper.py")
    r.git("mv", "tests/test_old.py", "src/old.py")
    r.write("src/core.py", "def f():\n    return 1\n# moved\n")


def case_binary(r: GitRepo) -> None:
    r.write("logo.png", BIN[::-1] + BIN)
    r.write("tests/data/blob.bin", b"\x00\x01\x02" * 100)
    r.remove("assets/icon.ico")


def case_names(r: GitRepo) -> None:
    r.write("src/with space.py", "x = 1\n")
    r.write("café.py", "y = 2\n")
    r.write("tests/naïve test.py", "def test_x():\n    pass\n")
    r.write(b"src/caf\xe9.txt", b"latin-1 name\n")
    r.write("src/tab\there.txt", "tab\n")
    r.write('tests/"quoted".txt', "q\n")


def case_no_newline(r: GitRepo) -> None:
    r.write("src/nonl.txt", "a\nb\nc")  # was "a\nb" (no newline): still none
    r.write("src/addnl.txt", "x\n")  # was "x": newline added
    r.write("tests/dropnl.txt", "y")  # was "y\n": newline removed


def case_modes_symlinks(r: GitRepo) -> None:
    r.write("scripts/run.sh", "#!/bin/sh\necho run\n", executable=True)
    r.symlink("src/link.py", "app.py")
    os.unlink(r.path / "docs/latest")
    r.symlink("docs/latest", "guide2.md")
    os.unlink(r.path / "src/helper.py")
    r.symlink("src/helper.py", "app.py")  # type change: file → symlink


def case_latin1_content(r: GitRepo) -> None:
    r.write("src/legacy.txt", b"caf\xe9 cr\xe8me\r\nna\xefve\n")
    r.write("tests/test_legacy.txt", b"\xff\xfe odd bytes\n")


def case_huge(r: GitRepo) -> None:
    line = "0123456789abcdef" * 4 + "\n"
    r.write("src/big.txt", line * (5 * 1024 * 1024 // len(line)))
    r.write("tests/test_app.py", "def test_f():\n    assert True\n")


CASES: dict[str, Callable[[GitRepo], None]] = {
    f.__name__.removeprefix("case_"): f
    for f in (
        case_modify,
        case_add_delete,
        case_rename,
        case_binary,
        case_names,
        case_no_newline,
        case_modes_symlinks,
        case_latin1_content,
        case_huge,
    )
}


@pytest.fixture
def base_repo(make_repo) -> GitRepo:
    r: GitRepo = make_repo("patches")
    r.write("src/app.py", "def f():\n    return 1\n")
    r.write("src/helper.py", "def helper():\n    return 'help'\n")
    r.write("tests/test_app.py", "def test_f():\n    assert f() == 1\n")
    r.write("tests/test_old.py", "def test_old():\n    pass\n")
    r.write("docs/guide.md", "# Guide\n")
    r.symlink("docs/latest", "guide.md")
    r.write("logo.png", BIN)
    r.write("assets/icon.ico", BIN[:100])
    r.write("src/nonl.txt", "a\nb")
    r.write("src/addnl.txt", "x")
    r.write("tests/dropnl.txt", "y\n")
    r.write("src/legacy.txt", b"caf\xe9\r\n")
    r.write("tests/test_legacy.txt", b"\xff\n")
    r.commit("base")
    return r


def _check_split(src: LocalGitSource, base: str, head: str, patch: str, tmp: Path) -> None:
    source, tests = split_patch(patch)
    assert sorted(parse_patch(source + tests), key=lambda p: p.path) == sorted(
        parse_patch(patch), key=lambda p: p.path
    )
    for i, half in enumerate((source, tests)):
        if half:
            work = tmp / f"half{i}"
            src.export_snapshot(base, work)
            res = git_apply(work, half, check=True)
            assert res.returncode == 0, res.stderr.decode(errors="replace")
    # both halves, one after the other, give exactly the head tree
    work, want = tmp / "both", tmp / "want"
    src.export_snapshot(base, work)
    src.export_snapshot(head, want)
    for half in (source, tests):
        if half:
            res = git_apply(work, half)
            assert res.returncode == 0, res.stderr.decode(errors="replace")
    assert tree_state(work) == tree_state(want)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("renames", [False, True], ids=["source-diff", "git-diff-M"])
def test_split_applies(case: str, renames: bool, base_repo: GitRepo, tmp_path: Path) -> None:
    base = base_repo.head()
    CASES[case](base_repo)
    head = base_repo.commit(case)
    src = LocalGitSource(base_repo.path)
    if renames:  # what other tools hand us: rename/copy detection on
        patch = decode_patch(
            subprocess.run(
                ["git", "diff", "-M", "-C", "--binary", "--full-index", base, head],
                cwd=base_repo.path,
                capture_output=True,
                check=True,
            ).stdout
        )
    else:
        patch = src.diff(base, head)
        assert "rename from" not in patch
    _check_split(src, base, head, patch, tmp_path)
    (commit,) = src.iter_commits(head, limit=1)
    touched = set(files_in_patch(patch))
    assert {f.path for f in commit.files} <= touched


def test_rename_sections_are_classified(base_repo: GitRepo) -> None:
    base = base_repo.head()
    case_rename(base_repo)
    head = base_repo.commit("rename")
    patch = base_repo.git("diff", "-M", "--full-index", base, head) + "\n"
    src, tests = split_patch(patch)
    assert {(p.old_path, p.new_path) for p in parse_patch(tests)} == {
        ("tests/test_app.py", "tests/test_core.py"),
        ("src/helper.py", "tests/helper.py"),
    }
    assert {(p.old_path, p.new_path) for p in parse_patch(src)} == {
        ("src/app.py", "src/core.py"),
        ("tests/test_old.py", "src/old.py"),
    }


def test_quoted_names_in_diff(base_repo: GitRepo) -> None:
    base = base_repo.head()
    case_names(base_repo)
    head = base_repo.commit("names")
    src = LocalGitSource(base_repo.path)
    patch = src.diff(base, head)
    assert 'diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"' in patch
    assert sorted(files_in_patch(patch)) == sorted(
        [
            "src/with space.py",
            "café.py",
            "tests/naïve test.py",
            "src/caf\udce9.txt",
            "src/tab\there.txt",
            'tests/"quoted".txt',
        ]
    )
    _, tests = split_patch(patch)
    assert sorted(p.path for p in parse_patch(tests)) == [
        'tests/"quoted".txt',
        "tests/naïve test.py",
    ]


def test_huge_diff_splits(base_repo: GitRepo) -> None:
    base = base_repo.head()
    case_huge(base_repo)
    head = base_repo.commit("huge")
    src = LocalGitSource(base_repo.path)
    patch = src.diff(base, head)
    source, tests = split_patch(patch)
    assert len(patch) > 5_000_000
    assert len(source) > 5_000_000 and "tests/test_app.py" in tests


def test_diff_options(base_repo: GitRepo) -> None:
    base = base_repo.head()
    case_binary(base_repo)
    case_modify(base_repo)
    head = base_repo.commit("mixed")
    src = LocalGitSource(base_repo.path)
    only = src.diff(base, head, paths=["src", "logo.png"])
    assert files_in_patch(only) == ["logo.png", "src/app.py"]
    assert "GIT binary patch" in only
    stub = src.diff(base, head, binary=False)
    assert (
        "GIT binary patch" not in stub and "Binary files a/logo.png and b/logo.png differ" in stub
    )
    assert src.diff(base, head, paths=[]) == ""
    assert src.diff(head, head) == ""
    # user config that would change the output is overridden
    for key, value in [
        ("diff.noprefix", "true"),
        ("diff.renames", "copies"),
        ("diff.external", "false"),
        ("color.ui", "always"),
        ("diff.context", "9"),
        ("core.quotePath", "false"),
        ("diff.submodule", "log"),
    ]:
        base_repo.git("config", key, value)
    assert src.diff(base, head) == LocalGitSource(base_repo.path).diff(base, head)
    assert src.diff(base, head).startswith("diff --git a/")


def test_pull_request_diffs_apply(make_repo, tmp_path: Path) -> None:
    r: GitRepo = make_repo("prs")
    r.write("src/a.py", "A = 1\n")
    r.write("tests/test_a.py", "def test_a():\n    pass\n")
    r.commit("init")
    r.checkout("-b", "feat")
    r.write("src/a.py", "A = 2\n")
    r.write("tests/test_a.py", "def test_a():\n    assert A == 2\n")
    r.commit("change a")
    r.checkout("main")
    r.write("src/b.py", "B = 1\n")
    r.commit("unrelated on main")
    r.merge("feat", "Merge pull request #3 from o/feat", "Change A")
    src = LocalGitSource(r.path)
    (pr,) = src.iter_pull_requests()
    patch = src.diff(pr.base_sha, pr.merge_sha)
    assert files_in_patch(patch) == ["src/a.py", "tests/test_a.py"]
    _check_split(src, pr.base_sha, pr.merge_sha, patch, tmp_path)
