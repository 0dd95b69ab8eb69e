"""What bootstrap knows about the commit a snapshot comes from: its date, its submodules."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class CommitInfo:
    """Facts about the source commit that its files alone do not tell."""

    date: str | None = None
    """Committer date, UTC RFC 3339 (``2024-05-01T12:00:00Z``); None when unknown."""
    submodule_problems: dict[str, str] = field(default_factory=dict)
    """Submodule path → why it could not be checked out (see :mod:`.submodules`)."""
    version: str | None = None
    """The newest release tag reachable from the commit (``git describe``), e.g. ``1.0.2``."""

    def __post_init__(self) -> None:
        if self.date:  # any ISO 8601 form in, one canonical form out (ValueError otherwise)
            object.__setattr__(self, "date", normalize_date(self.date))


def read_commit(repo: Path, sha: str, snapshot: Path | None = None) -> CommitInfo:
    """What bootstrap needs to know about commit ``sha`` of the git repository ``repo`` (a
    work tree, ``.git`` folder or bare repository): its date and release tag; with
    ``snapshot`` (an export of ``sha`` without history) its submodule folders are filled in
    too and the ones that could not be are reported (see :mod:`.submodules`)."""
    from repogym.bootstrap.submodules import populate

    problems = populate(repo, sha, snapshot) if snapshot is not None else {}
    return CommitInfo(git_commit_date(repo, sha), problems, git_version(repo, sha))


def normalize_date(text: str) -> str:
    """An ISO 8601 / RFC 3339 timestamp (or a Unix time) as UTC ``YYYY-MM-DDTHH:MM:SSZ``.

    Raises ValueError for anything else. A date without a time means its end (23:59:59 UTC).
    """
    text = text.strip()
    if re.fullmatch(r"\d{9,11}", text):
        return datetime.fromtimestamp(int(text), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        text += "T23:59:59+00:00"
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_commit_date(repo_dir: Path, ref: str) -> str | None:
    """The committer date of ``ref`` in the git repository ``repo_dir`` (UTC, RFC 3339).

    The committer date, not the author date: it is when the commit entered the history (a
    rebase or cherry-pick moves it), so what the CI of that history could have resolved.
    None outside git or for an unknown ref.
    """
    try:
        res = subprocess.run(
            ["git", "-C", str(repo_dir), "log", "-1", "--format=%cI", f"{ref}^{{commit}}", "--"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0 or not res.stdout.strip():
        return None
    try:
        return normalize_date(res.stdout.strip().splitlines()[-1])
    except ValueError:
        return None


_VERSION_TAG = re.compile(
    r"^(?:[A-Za-z][\w.-]*?[-_])?v?(\d+(?:\.\d+){1,3}(?:(?:a|b|rc|\.post)\d+)?)$"
)


def git_version(repo_dir: Path, ref: str) -> str | None:
    """The release the commit builds on: its nearest version tag (``v1.2.3``, ``pkg-1.2``),
    for projects whose version comes from git tags (setuptools-scm, hatch-vcs…)."""
    try:
        res = subprocess.run(
            ["git", "-C", str(repo_dir), "describe", "--tags", "--abbrev=0", f"{ref}^{{commit}}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION_TAG.match(res.stdout.strip()) if res.returncode == 0 else None
    return m[1] if m else None


_CHANGELOG = re.compile(r"^(changelog|changes|history|news|release[-_]?notes)(\.\w+)?$", re.I)
_CHANGELOG_VERSION = re.compile(r"(?<![\w.])v?(\d{1,4}\.\d{1,3}(?:\.\d{1,4})?)(?![\w.])")


def changelog_version(repo: Path) -> tuple[str, str] | None:
    """``(version, file)``: the first release named near the top of a changelog — the
    project's version when git cannot tell (a snapshot without ``.git``)."""
    candidates = [p for p in sorted(repo.iterdir()) if p.is_file() and _CHANGELOG.match(p.name)]
    candidates += [repo / d / "changelog.rst" for d in ("docs", "doc")]
    for path in candidates:
        try:
            head = path.read_text(errors="replace").splitlines()[:200]
        except OSError:
            continue
        for line in head:
            if re.search(r"\d{4}-\d{2}-\d{2}", line) and not re.search(r"\d+\.\d+", line):
                continue
            m = _CHANGELOG_VERSION.search(re.sub(r"\d{4}-\d{2}-\d{2}", "", line))
            if m:
                return m[1], path.relative_to(repo).as_posix()
    return None
