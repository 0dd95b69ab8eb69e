"""File helpers shared by the detectors: bounded walks, tolerant reads, repository snapshots."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repogym.errors import RepogymError

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        "env",
        ".env",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "build",
        "dist",
        "site-packages",
        "target",
        ".eggs",
    }
)
"""Folders never looked into: VCS data, virtualenvs, caches, build output."""

MAX_WALK_FILES = 20_000


def walk_files(root: Path, *, max_files: int = MAX_WALK_FILES) -> Iterator[Path]:
    """Files under ``root`` (relative paths, sorted per folder), skipping :data:`SKIP_DIRS`."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")
        )
        rel = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            yield rel / name
            count += 1
            if count >= max_files:
                return


def read_text(path: Path, limit: int = 1_000_000) -> str | None:
    """The file's text (``None`` when missing, unreadable or binary)."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit)
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def read_toml(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(table, None)``, ``(None, None)`` when absent, or ``(None, error)`` when unreadable."""
    text = read_text(path)
    if text is None:
        return None, None
    try:
        return tomllib.loads(text), None
    except tomllib.TOMLDecodeError as exc:
        return None, f"{path.name}: invalid TOML ({exc})"


def is_git_repo(path: Path) -> bool:
    return (path / ".git").exists()


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)


_ALWAYS_GENERATED = frozenset(SKIP_DIRS - {"build", "dist", "target", "env", "venv"})
_BUILD_OUTPUT = frozenset({"build", "dist", "target"})
_BUILD_FILES = (
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "setup.py",
    "pyproject.toml",
    "package.json",
    "Cargo.toml",
    "CMakeLists.txt",
    "Makefile",
    "meson.build",
    "build.xml",
)
_VENV_MARKS = ("pyvenv.cfg", "bin/python", "Scripts/python.exe", "conda-meta")


def _generated_dir(parent: Path, name: str) -> bool:
    """Whether the folder ``parent/name`` is generated (left out of a snapshot without git):
    VCS data and caches anywhere; ``build``/``dist``/``target`` only beside a build file that
    makes them (``pom.xml``, ``setup.py``, …); ``env``/``venv`` only when they are virtualenvs.
    Folders with those names elsewhere are sources (Java's ``org/apache/commons/io/build``)."""
    if name in _ALWAYS_GENERATED or name.endswith(".egg-info"):
        return True
    if name in _BUILD_OUTPUT:
        return any((parent / f).is_file() for f in _BUILD_FILES)
    if name in ("env", "venv"):
        return any(os.path.lexists(parent / name / m) for m in _VENV_MARKS)
    return False


def _snapshot_files(root: Path) -> Iterator[Path]:
    """Files under ``root`` (relative paths) but those in generated folders."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _generated_dir(here, d))
        rel = here.relative_to(root)
        for name in sorted(filenames):
            yield rel / name


def snapshot_repo(repo_dir: Path, dest: Path) -> int:
    """Copy the repository's working tree to ``dest`` without VCS data; returns files copied.

    In a git work tree the files are the tracked and the untracked-but-not-ignored ones (what a
    commit of the tree would hold); elsewhere (e.g. a commit exported with ``git archive``)
    everything but the folders :func:`_generated_dir` recognises.
    """
    dest.mkdir(parents=True, exist_ok=True)
    names: list[str] | None = None
    if is_git_repo(repo_dir):
        res = _git(repo_dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        if res.returncode == 0:
            names = sorted(
                {n for n in res.stdout.decode(errors="surrogateescape").split("\0") if n}
            )
    if names is None:
        names = [str(p) for p in _snapshot_files(repo_dir)]
    copied = 0
    for name in names:
        src = repo_dir / name
        if not os.path.lexists(src) or ".git" in Path(name).parts:
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        elif src.is_dir():  # a submodule: copy its files, not its .git
            shutil.copytree(src, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        else:
            shutil.copy2(src, target)
        copied += 1
    return copied


class ExportError(RepogymError, RuntimeError):
    """``git archive`` of a ref failed (unknown ref, not a git repository)."""


def export_ref(repo_dir: Path, ref: str, dest: Path) -> str:
    """Extract ``git archive REF`` into ``dest``; returns the commit sha the ref names."""
    if not is_git_repo(repo_dir):
        raise ExportError(f"{repo_dir}: not a git repository (needed for --ref)")
    res = _git(repo_dir, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if res.returncode != 0:
        raise ExportError(f"{repo_dir}: unknown ref {ref!r}")
    sha = res.stdout.decode().strip()
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(
        ["git", "-C", str(repo_dir), "archive", "--format=tar", sha],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert archive.stdout is not None
    untar = subprocess.run(
        ["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True, check=False
    )
    archive.stdout.close()
    archive_err = archive.stderr.read().decode(errors="replace") if archive.stderr else ""
    if archive.wait() != 0 or untar.returncode != 0:
        detail = (archive_err or untar.stderr.decode(errors="replace")).strip().splitlines()
        raise ExportError(f"git archive {ref} failed: {detail[-1] if detail else 'unknown error'}")
    return sha


def head_commit(repo_dir: Path) -> tuple[str | None, bool]:
    """``(HEAD sha, work tree clean)``; ``(None, False)`` outside git."""
    if not is_git_repo(repo_dir):
        return None, False
    head = _git(repo_dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head.returncode != 0:
        return None, False
    status = _git(repo_dir, "status", "--porcelain", "--untracked-files=normal")
    return head.stdout.decode().strip(), status.returncode == 0 and not status.stdout.strip()


def repo_identity(repo_dir: Path) -> str:
    """A stable name for the repository: its ``origin`` URL when set, else its absolute path."""
    if is_git_repo(repo_dir):
        res = _git(repo_dir, "config", "--get", "remote.origin.url")
        url = res.stdout.decode().strip()
        if res.returncode == 0 and url:
            for prefix in ("git@github.com:", "https://github.com/", "http://github.com/"):
                if url.startswith(prefix):
                    url = "github.com/" + url[len(prefix) :]
            return url.removesuffix(".git").rstrip("/")
    return str(repo_dir.resolve())
