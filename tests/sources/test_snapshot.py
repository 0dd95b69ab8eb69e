"""export_snapshot: the tree at a ref, no history, exclusions, modes, symlinks, atomicity."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from repogym.sources import LocalGitSource, SourceError
from tests.sources._helpers import tree_state
from tests.sources.conftest import GitRepo


@pytest.fixture
def repo(make_repo) -> GitRepo:
    r: GitRepo = make_repo("repo")
    r.write("src/app.py", "print('hi')\n")
    r.write("bin/run", "#!/bin/sh\nexec python src/app.py\n", executable=True)
    r.symlink("current", "src/app.py")
    r.symlink("src/dirlink", "../bin")
    r.write("tests/test_app.py", "def test(): pass\n")
    r.write("tests/data/x.json", "{}\n")
    r.write("src/test_inline.py", "def test(): pass\n")
    r.write(b"caf\xe9.txt", b"bytes name\n")
    r.write(".gitattributes", "tests/ export-ignore\n*.py text eol=crlf\nsrc/app.py export-subst\n")
    r.commit("one")
    r.write("src/app.py", "print('v2')\n")
    r.commit("two")
    return r


def test_snapshot_content(repo: GitRepo, tmp_path: Path) -> None:
    src = LocalGitSource(repo.path)
    dest = tmp_path / "out" / "snap"
    src.export_snapshot("HEAD~1", dest)
    assert not (dest / ".git").exists()
    state = tree_state(dest)
    assert state[b"src/app.py"] == ("file", b"print('hi')\n")  # raw blob: no eol/subst
    assert state[b"bin/run"][0] == "exec"
    assert stat.S_IMODE(os.stat(dest / "bin/run").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(dest / "src/app.py").st_mode) == 0o644
    assert state[b"current"] == ("link", b"src/app.py")
    assert state[b"src/dirlink"] == ("link", b"../bin")
    assert state[b"caf\xe9.txt"] == ("file", b"bytes name\n")
    assert b"tests/test_app.py" in state  # export-ignore is not honoured: snapshots are exact
    assert sorted(p.decode("utf-8", "surrogateescape") for p in state) == sorted(
        src.list_files("HEAD~1")
    )
    assert not [p for p in dest.parent.iterdir() if p.name != "snap"]  # no temp leftovers


def test_snapshot_exclusions(repo: GitRepo, tmp_path: Path) -> None:
    src = LocalGitSource(repo.path)
    dest = tmp_path / "snap"
    src.export_snapshot("HEAD", dest, exclude=["tests/", "src/test_inline.py", "caf\udce9.txt"])
    state = tree_state(dest)
    assert not (dest / "tests").exists()
    assert b"src/test_inline.py" not in state and b"caf\xe9.txt" not in state
    assert state[b"src/app.py"] == ("file", b"print('v2')\n")
    # a prefix that is not a whole path component excludes nothing extra
    dest2 = tmp_path / "snap2"
    src.export_snapshot("HEAD", dest2, exclude=["src/app", "test"])
    assert (dest2 / "src/app.py").exists() and (dest2 / "tests/test_app.py").exists()


def test_snapshot_destination_rules(repo: GitRepo, tmp_path: Path) -> None:
    src = LocalGitSource(repo.path)
    empty = tmp_path / "empty"
    empty.mkdir()
    src.export_snapshot("HEAD", empty)  # an empty directory is fine
    assert (empty / "src/app.py").exists()
    with pytest.raises(SourceError, match="not empty"):
        src.export_snapshot("HEAD", empty)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(SourceError, match="not empty"):
        src.export_snapshot("HEAD", afile)
    with pytest.raises(SourceError, match="unknown revision"):
        src.export_snapshot("nope", tmp_path / "never")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "empty", "repo"]


def test_snapshot_with_submodule_entry(make_repo, tmp_path: Path) -> None:
    r: GitRepo = make_repo("withsub")
    r.write("a.txt", "a\n")
    r.commit("a")
    sha = r.head()
    r.git("update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    r.git("commit", "-q", "-m", "add gitlink")
    src = LocalGitSource(r.path)
    assert src.list_files("HEAD") == ["a.txt"]
    src.export_snapshot("HEAD", tmp_path / "s")
    assert (tmp_path / "s/vendor/lib").is_dir() and not any((tmp_path / "s/vendor/lib").iterdir())
    with pytest.raises(FileNotFoundError):
        src.read_file("HEAD", "vendor/lib")


@pytest.mark.parametrize("hostile", ["dotgit", "dotdot", "below-symlink"])
def test_hostile_trees_are_refused(hostile: str, repo: GitRepo, tmp_path: Path) -> None:
    blob = repo.git("hash-object", "-w", "--stdin", input=b"/tmp\n")
    inner = repo.git("mktree", input=f"100644 blob {blob}\tpwned\n".encode())
    entries = {
        "dotgit": f"040000 tree {inner}\t.git\n",
        "dotdot": f"040000 tree {inner}\t..\n",
        "below-symlink": f"120000 blob {blob}\tx\n040000 tree {inner}\tx\n",
    }[hostile]
    tree = repo.git("mktree", input=f"100644 blob {blob}\tok.txt\n{entries}".encode())
    commit = repo.git("commit-tree", tree, "-m", "hostile")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SourceError, match="path"):
        LocalGitSource(repo.path).export_snapshot(commit, out / "snap")
    assert list(out.iterdir()) == []  # nothing written, no temp directory left
    assert not Path("/tmp/pwned").exists()
