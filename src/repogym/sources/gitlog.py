"""Reading git's history: the ``git log`` format :class:`~repogym.sources.local.LocalGitSource`
streams, its parser, and the merged pull requests recognised in commit messages (see the
design notes atop :mod:`repogym.sources.local`)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import IO
from urllib.parse import urlsplit

from repogym.sources import Commit, FileChange, PullRequest

CHUNK = 1 << 20
LOG_FORMAT = "--format=%x1e%H %P%n%an%n%ae%n%aI%n%s%n%b"
LOG_FLAGS = (  # headers; with LOG_FILES: + changed files and line counts
    "-z",
    "--no-color",
    "--no-show-signature",
    "--no-mailmap",
    "--no-notes",
    "--encoding=UTF-8",
    "--root",
    LOG_FORMAT,
)
LOG_FILES = (
    "--raw",
    "--numstat",
    "--no-abbrev",
    "-M",
    "--diff-merges=first-parent",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
)
_GH_MERGE_RE = re.compile(r"^Merge pull request #(\d+) from \S+")
_GL_MERGE_RE = re.compile(r"^Merge branch '.+' into '.+'")
_GL_REF_RE = re.compile(r"^See merge request \S*!(\d+)\s*$", re.MULTILINE)
_SQUASH_RE = re.compile(r"^(.*?)\s*\(#(\d+)\)$")


def pull_request_from_commit(commit: Commit) -> PullRequest | None:
    """Recognise a merged PR/MR from a commit's message, or return None.

    * GitHub merge: ``Merge pull request #N from owner/branch``; title = first body line.
    * GitLab merge: ``Merge branch 'x' into 'y'`` with ``See merge request group/proj!N``.
    * Squash (GitHub's default): subject ``Title (#N)``; title = subject without the suffix.

    Kind is ``merge`` for commits with two or more parents (base = first parent, head =
    second), else ``squash`` (base = parent, head = the commit). Root commits never qualify.
    """
    if not commit.parents:
        return None
    number: int | None = None
    title, body = commit.subject, commit.body
    if m := _GH_MERGE_RE.match(commit.subject):
        number = int(m.group(1))
        title, body = _title_from_body(commit.body, commit.subject)
    elif gl := _GL_REF_RE.search(commit.body):
        number = int(gl.group(1))
        body = _GL_REF_RE.sub("", commit.body).strip()
        if _GL_MERGE_RE.match(commit.subject):
            title, body = _title_from_body(body, commit.subject)
    elif m := _SQUASH_RE.match(commit.subject):
        number = int(m.group(2))
        title = m.group(1)
    if number is None:
        return None
    merge = commit.is_merge
    return PullRequest(
        number=number,
        title=title,
        body=body,
        kind="merge" if merge else "squash",
        merge_sha=commit.sha,
        base_sha=commit.parents[0],
        head_sha=commit.parents[1] if merge else commit.sha,
        files=commit.files,
        author=commit.author,
        date=commit.date,
    )


def _title_from_body(body: str, fallback: str) -> tuple[str, str]:
    lines = body.strip().split("\n")
    if not lines[0].strip():
        return fallback, ""
    return lines[0].strip(), "\n".join(lines[1:]).strip()


# --------------------------------------------------------------------------- log parsing


def tokens(stream: IO[bytes]) -> Iterator[bytes]:
    """NUL-separated tokens of a byte stream, read in large chunks."""
    pending: list[bytes] = []
    fd = stream.fileno()
    while chunk := os.read(fd, CHUNK):
        if b"\0" not in chunk:
            pending.append(chunk)
            continue
        parts = chunk.split(b"\0")
        if pending:
            pending.append(parts[0])
            parts[0] = b"".join(pending)
            pending = []
        last = parts.pop()
        if last:
            pending.append(last)
        yield from parts
    if pending:
        yield b"".join(pending)


def decode_path(raw: bytes) -> str:
    """A path git printed, as text that round-trips to bytes (``surrogateescape``)."""
    return raw.decode("utf-8", "surrogateescape")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def parse_log(stream: Iterator[bytes]) -> Iterator[Commit]:
    """Commits from ``git log -z`` output (NUL-separated tokens) in the ``LOG_FLAGS`` format."""
    commit: Commit | None = None
    raw: list[tuple[str, str | None, str]] = []  # (status, old path, path)
    stats: list[tuple[int, int, bool, str]] = []  # (additions, deletions, binary, path)
    for tok in stream:
        if tok[:1] == b"\n":
            tok = tok[1:]
        lead = tok[:1]
        if lead == b"\x1e":
            if commit is not None:
                commit.files = _merge_changes(raw, stats)
                yield commit
                raw, stats = [], []
            commit = _parse_header(tok[1:])
        elif lead == b":":
            status = tok.rsplit(b" ", 1)[-1][:1].decode()
            src = decode_path(next(stream))
            if status in ("R", "C"):
                raw.append((status, src, decode_path(next(stream))))
            else:
                raw.append((status, None, src))
        elif tok:
            add, dele, name = tok.split(b"\t", 2)
            if not name:
                next(stream)  # old path (also in the raw entry)
                name = next(stream)
            binary = add == b"-"
            stats.append(
                (0 if binary else int(add), 0 if binary else int(dele), binary, decode_path(name))
            )
    if commit is not None:
        commit.files = _merge_changes(raw, stats)
        yield commit


def _parse_header(tok: bytes) -> Commit:
    fields = tok.split(b"\n", 5)
    while len(fields) < 6:
        fields.append(b"")
    shas = fields[0].decode("ascii").split()
    return Commit(
        sha=shas[0],
        parents=shas[1:],
        author=_text(fields[1]),
        author_email=_text(fields[2]),
        date=fields[3].decode("ascii", "replace"),
        subject=_text(fields[4]),
        body=_text(fields[5]).strip("\n"),
    )


def _merge_changes(
    raw: list[tuple[str, str | None, str]], stats: list[tuple[int, int, bool, str]]
) -> list[FileChange]:
    aligned = len(raw) == len(stats) and all(r[2] == s[3] for r, s in zip(raw, stats, strict=True))
    by_path = {} if aligned else {s[3]: s for s in stats}
    out = []
    for i, (status, old, path) in enumerate(raw):
        st = stats[i] if aligned else by_path.get(path, (0, 0, False, path))
        out.append(FileChange(path, status, old, st[2], st[0], st[1]))
    return out


# --------------------------------------------------------------------------- URLs


def owner_name_from_url(url: str) -> str | None:
    """``owner/name`` from a hosted remote URL (https, ssh, git, scp-like); None for local paths.

    The last two path components are used, so GitLab subgroups give ``subgroup/project``.
    """
    url = url.strip()
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        parts = urlsplit(url)
        if parts.scheme.lower() == "file" or not parts.hostname:
            return None
        path = parts.path
    else:
        m = re.match(r"^(?:[^@/]+@)?[^:/]+:(?!/)(.+)$", url)
        if not m:
            return None
        path = m.group(1)
    segs = [s for s in path.split("/") if s]
    if segs:
        segs[-1] = segs[-1].removesuffix(".git")
    segs = [s for s in segs if s]
    if len(segs) < 2:
        return None
    return f"{segs[-2]}/{segs[-1]}"
