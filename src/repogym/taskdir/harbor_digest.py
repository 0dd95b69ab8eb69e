"""Harbor's task digest: the identity Harbor 0.26 gives a task in a trial's lock.

Harbor names a task run by ``sha256:<hex>`` (``TrialLock.task.digest``; ``task_digest`` in its
job database and viewer). It is not :func:`repogym.taskdir.hashing.content_hash`: Harbor hashes
``task.toml`` as raw bytes, so recording a verification (or the digest itself) into the file
changes it. That is why repogym never writes it into ``task.toml``; a trial records it beside
``task_checksum`` (the content hash), computed from the files the trial ran.

What enters, in Harbor's terms:

- at the task root only ``task.toml``, ``instruction.md``, ``README.md`` and ``trajectory.json``;
- every regular file under ``environment/``, ``tests/``, ``solution/`` and ``steps/`` (a symlink
  to a file enters with its target's bytes; a linked folder is not entered);
- never a ``.harborignore`` file, nor what matches Harbor's default ignores (``__pycache__/``,
  ``*.pyc``, ``.DS_Store``, ``*.swp``, ``*.swo``, ``*~``, matched on every path component).

Each file contributes ``"<posix path>\\0<sha256 hex of its bytes>\\n"`` to one sha256, in sorted
path order. A task with ignore rules of its own (a ``.gitignore`` at its root, or a non-empty
``.harborignore`` under its tests or solutions) is selected by gitignore rules repogym does not
evaluate: :func:`harbor_digest` returns ``None`` for it rather than a wrong value.
"""

from __future__ import annotations

import hashlib
import os
from fnmatch import fnmatchcase
from pathlib import Path

__all__ = ["DIGEST_PREFIX", "harbor_digest", "harbor_digest_files", "unsupported_reason"]

DIGEST_PREFIX = "sha256:"
ROOT_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
TREES = ("environment", "tests", "solution", "steps")
IGNORE_FILE = ".harborignore"
# Harbor's default ignores; a trailing "/" matches folders only.
DEFAULT_IGNORES = ("__pycache__/", "*.pyc", ".DS_Store", "*.swp", "*.swo", "*~")


def _ignored(rel: str) -> bool:
    parts = rel.split("/")
    for i, part in enumerate(parts):
        is_dir = i < len(parts) - 1
        for pattern in DEFAULT_IGNORES:
            if pattern.endswith("/"):
                if is_dir and fnmatchcase(part, pattern[:-1]):
                    return True
            elif fnmatchcase(part, pattern):
                return True
    return False


def _in_rule_scope(rel: str) -> bool:
    """Folders where Harbor reads ``.harborignore`` rules: tests/solution, also per step."""
    parts = rel.split("/")
    if parts[0] in ("tests", "solution"):
        return True
    return len(parts) >= 3 and parts[0] == "steps" and parts[2] in ("tests", "solution")


def unsupported_reason(task_dir: Path | str) -> str | None:
    """Why :func:`harbor_digest` cannot compute this task's digest (None when it can)."""
    base = Path(task_dir)
    if (base / ".gitignore").exists():
        return "the task has a .gitignore (Harbor selects its files by those rules)"
    for tree in ("tests", "solution", "steps"):  # environment/ never holds rules
        root = base / tree
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = Path(dirpath).relative_to(base).as_posix()
            if IGNORE_FILE in filenames and _in_rule_scope(rel_dir):
                path = Path(dirpath) / IGNORE_FILE
                if path.is_symlink() or not path.is_file():
                    return f"{rel_dir}/{IGNORE_FILE} is not a regular file"
                if any(
                    line.strip() and not line.lstrip().startswith("#")
                    for line in path.read_text(errors="replace").splitlines()
                ):
                    return f"{rel_dir}/{IGNORE_FILE} has ignore rules"
            dirnames.sort()
    return None


def _links_to_ignore_file(path: str, base: Path) -> bool:
    """A symlink to a ``.harborignore`` of the task is left out as that file is."""
    target = Path(path).resolve()
    return target.name == IGNORE_FILE and target.is_relative_to(base)


def harbor_digest_files(task_dir: Path | str) -> list[str]:
    """The task's files that enter Harbor's digest, as sorted POSIX paths."""
    base = Path(os.path.abspath(Path(task_dir).resolve()))
    found = [name for name in ROOT_FILES if (base / name).exists()]

    def visit(directory: str, rel_dir: str) -> None:
        with os.scandir(directory) as it:
            for entry in it:
                if entry.name == IGNORE_FILE:
                    continue
                if entry.is_symlink() and _links_to_ignore_file(entry.path, base):
                    continue
                rel = f"{rel_dir}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    visit(entry.path, rel)
                elif entry.is_file():  # follows a symlink: a linked file enters, a folder not
                    found.append(rel)

    for tree in TREES:
        if (base / tree).is_dir():
            visit(str(base / tree), tree)
    return sorted(rel for rel in found if not _ignored(rel))


def _file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def harbor_digest(task_dir: Path | str) -> str | None:
    """``sha256:<hex>`` as Harbor 0.26 computes a task's digest; None when the task has ignore
    rules of its own (:func:`unsupported_reason`), is not a folder or a file cannot be read."""
    outer = hashlib.sha256()
    try:
        base = Path(task_dir).resolve()
        if not base.is_dir() or unsupported_reason(base) is not None:
            return None
        for rel in harbor_digest_files(base):
            outer.update(f"{rel}\0{_file_sha256(base / rel)}\n".encode())
    except (OSError, UnicodeEncodeError):
        return None
    return DIGEST_PREFIX + outer.hexdigest()
