"""Fixtures for source tests: real git repositories built with the git CLI.

Every git call runs with ``GIT_CONFIG_GLOBAL=/dev/null``, no system config and a fixed author
and committer; commit dates advance one minute per commit, so shas are deterministic.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

BASE_EPOCH = 1_700_000_000


def pin_git_env(
    mp: pytest.MonkeyPatch, *, ceiling: Path | None = None, drop: Iterable[str] = ()
) -> None:
    """No user/system git config, a fixed identity and date (for the code under test too);
    ``drop`` names more variables to remove (e.g. credentials of the machine)."""
    mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    if ceiling is not None:
        mp.setenv("GIT_CEILING_DIRECTORIES", str(ceiling))
    for who in ("AUTHOR", "COMMITTER"):
        mp.setenv(f"GIT_{who}_NAME", "Ada Tester")
        mp.setenv(f"GIT_{who}_EMAIL", "ada@example.com")
        mp.setenv(f"GIT_{who}_DATE", f"{BASE_EPOCH} +0000")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", *drop):
        mp.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No user/system git config, fixed identity (for the code under test too)."""
    pin_git_env(monkeypatch, ceiling=tmp_path)
    yield


class GitRepo:
    """A tiny helper to build histories with the git CLI."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tick = 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def _env(self) -> dict[str, str]:
        date = f"{BASE_EPOCH + 60 * self.tick} +0000"
        return dict(os.environ, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)

    def git(self, *args: str, input: bytes | None = None) -> str:
        proc = subprocess.run(
            ["git", *args],
            cwd=self.path,
            env=self._env(),
            input=input,
            capture_output=True,
        )
        if proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace')}")
        return proc.stdout.decode("utf-8", "surrogateescape").strip()

    def write(
        self, rel: str | bytes, content: str | bytes = "", *, executable: bool = False
    ) -> None:
        p = os.path.join(os.fsencode(self.path), os.fsencode(rel))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
        os.chmod(p, 0o755 if executable else 0o644)

    def symlink(self, rel: str, target: str) -> None:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.symlink_to(target)

    def remove(self, rel: str) -> None:
        self.git("rm", "-q", "-r", "--", rel)

    def commit(self, message: str | bytes, *, allow_empty: bool = False) -> str:
        """Stage everything and commit; returns the new sha."""
        self.tick += 1
        self.git("add", "-A")
        msg = message.encode() if isinstance(message, str) else message
        extra = ["--allow-empty"] if allow_empty else []
        self.git("commit", "-q", "--no-verify", *extra, "-F", "-", input=msg)
        return self.head()

    def raw_commit(self, message: bytes) -> str:
        """Commit the staged tree with a message stored byte for byte (no UTF-8 fix-up, no
        encoding header), as other tools may write it."""
        self.tick += 1
        self.git("add", "-A")
        tree = self.git("write-tree")
        when = f"{BASE_EPOCH + 60 * self.tick} +0000"
        who = b"Ada Tester <ada@example.com> " + when.encode()
        obj = b"tree " + tree.encode() + b"\nparent " + self.head().encode() + b"\n"
        obj += b"author " + who + b"\ncommitter " + who + b"\n\n" + message
        sha = self.git("hash-object", "-t", "commit", "-w", "--stdin", input=obj)
        self.git("update-ref", "HEAD", sha)
        return sha

    def merge(self, branch: str, *messages: str) -> str:
        """``git merge --no-ff`` with the given message paragraphs; returns the merge sha."""
        self.tick += 1
        args = ["merge", "-q", "--no-ff", "--no-edit"]
        for m in messages:
            args += ["-m", m]
        self.git(*args, branch)
        return self.head()

    def checkout(self, *args: str) -> None:
        self.git("checkout", "-q", *args)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def make_repo(tmp_path: Path):
    """Factory: ``make_repo("name")`` → an initialised, empty ``GitRepo``."""

    def _make(name: str = "repo") -> GitRepo:
        return GitRepo(tmp_path / name)

    return _make
