"""``LocalGitSource``: mine a git repository on disk with the git CLI.

Design notes (the git settings are pinned so output never depends on the user's config):

* History is read by ONE streaming ``git log -z --raw --numstat`` process parsed incrementally;
  commit headers use a custom ``--format`` (``%x1e`` marks a commit; the header ends at the NUL
  ``-z`` puts after it, and commit messages cannot contain NUL). ``--diff-merges=first-parent``
  gives merges the change against their first parent, ``-M`` detects renames (status R),
  ``--no-mailmap --no-notes --no-show-signature --no-textconv --no-ext-diff --no-relative
  --root`` keep the stream predictable. Messages and names are decoded UTF-8 with replacement,
  paths with ``surrogateescape`` (so they round-trip to :meth:`LocalGitSource.read_file`).
* Revisions, blobs and files are read through one long-lived ``git cat-file --batch`` process.
* :meth:`LocalGitSource.diff` runs ``git diff`` with ``--no-renames`` (a rename is a deletion plus
  an addition: stable across git versions and similarity thresholds, and it splits cleanly into
  source/test halves), ``--full-index --binary``, 3 lines of context, Myers with the indent
  heuristic, ``a/`` ``b/`` prefixes, C-quoted paths (``core.quotePath=true``), short submodule
  lines, no colour, no external diff, no textconv, no order file.
* Snapshots are written from ``ls-tree`` + ``cat-file`` (raw blobs: no ``.gitattributes``
  export-ignore/export-subst, no eol conversion or smudge filters), modes 0644/0755, symlinks as
  symlinks, submodules as empty directories.
* Requires git ≥ 2.31 (``--diff-merges``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from repogym._secrets import redact_url
from repogym.sources import Commit, PullRequest, SourceError
from repogym.sources.catfile import CatFile
from repogym.sources.gitlog import (
    LOG_FILES,
    LOG_FLAGS,
    decode_path,
    owner_name_from_url,
    parse_log,
    pull_request_from_commit,
    tokens,
)
from repogym.sources.patches import decode_patch

if TYPE_CHECKING:
    from repogym.sources._http import Issue

__all__ = [
    "LocalGitSource",
    "owner_name_from_url",
    "pull_request_from_commit",
    "redact_url",
]

_MIN_GIT = (2, 31)
_CHUNK = 1 << 20
_DIFF_CONFIG = (
    "-c",
    "core.quotePath=true",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.suppressBlankEmpty=false",
)
_DIFF_FLAGS = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--full-index",
    "--unified=3",
    "--inter-hunk-context=0",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "--no-relative",
    "--submodule=short",
    "--ignore-submodules=none",
    "-O/dev/null",
)
# Variables that would point git at another repository or change its output.
_DROP_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_PREFIX",
    "GIT_NAMESPACE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CEILING_DIRECTORIES",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
)
_HEX_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_GIT_VERSIONS: dict[str, tuple[int, int]] = {}


def _one_line(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("fatal: ").removeprefix("error: ")
    return "unknown error"


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update(
        LC_ALL="C",
        LANGUAGE="C",
        GIT_PAGER="cat",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
    )
    return env


def _git_version(exe: str, env: dict[str, str]) -> tuple[int, int]:
    if exe not in _GIT_VERSIONS:
        try:
            out = subprocess.run(
                [exe, "--version"], capture_output=True, env=env, check=True
            ).stdout.decode()
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SourceError(f"cannot run git ({exe}): {exc}") from None
        m = re.search(r"(\d+)\.(\d+)", out)
        _GIT_VERSIONS[exe] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return _GIT_VERSIONS[exe]


# --------------------------------------------------------------------------- the source


class LocalGitSource:
    """A git repository on disk (work tree root, ``.git`` directory or bare repository).

    ``path`` must be the repository itself: a subdirectory of a work tree is not accepted.
    Use as a context manager (or call :meth:`close`) to stop the helper git process early.
    """

    def __init__(self, path: str | os.PathLike[str], *, git: str = "git") -> None:
        self.path = Path(path).absolute()
        exe = shutil.which(git)
        if exe is None:
            raise SourceError(f"git executable not found: {git!r}")
        self._env = _git_env()
        if _git_version(exe, self._env) < _MIN_GIT:
            raise SourceError(f"git >= {_MIN_GIT[0]}.{_MIN_GIT[1]} is required ({exe})")
        if not self.path.is_dir():
            raise SourceError(f"not a git repository: {self.path} (no such directory)")
        # The ceiling stops git from climbing: ``path`` must be the repository itself.
        probe_env = dict(self._env, GIT_CEILING_DIRECTORIES=str(self.path.resolve().parent))
        proc = subprocess.run(
            [exe, "rev-parse", "--absolute-git-dir"],
            cwd=self.path,
            env=probe_env,
            capture_output=True,
        )
        if proc.returncode != 0:
            why = _one_line(proc.stderr)
            extra = "" if "not a git repository" in why else f" ({why})"  # e.g. ownership
            raise SourceError(f"not a git repository: {self.path}{extra}")
        self.git_dir = proc.stdout.decode("utf-8", "surrogateescape").strip()
        self._argv = [exe, f"--git-dir={self.git_dir}"]
        self._cat = CatFile(self._argv, self._env, self.git_dir)
        self._resolved: dict[str, str] = {}
        if not self._run(["for-each-ref", "--count=1", "--format=x"]).strip() and (
            self._cat.get(b"HEAD^{commit}") is None
        ):
            raise SourceError(f"repository is empty (no commits): {self.path}")

    # -- plumbing

    def __enter__(self) -> LocalGitSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the helper ``git cat-file`` process (it restarts on demand)."""
        self._cat.close()

    def __repr__(self) -> str:
        return f"LocalGitSource({str(self.path)!r})"

    def _run(self, args: list[str], *, ok: tuple[int, ...] = (0,)) -> bytes:
        try:
            proc = subprocess.run(
                [*self._argv, *args],
                capture_output=True,
                env=self._env,
                cwd=self.git_dir,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise SourceError(f"cannot run git: {exc}") from None
        if proc.returncode not in ok:
            raise SourceError(f"git {args[0]} failed: {_one_line(proc.stderr)}")
        return proc.stdout

    def resolve(self, ref: str) -> str:
        """The commit sha ``ref`` names (tags are peeled); SourceError if unknown."""
        if ref in self._resolved:
            return self._resolved[ref]
        if not isinstance(ref, str) or not ref or "\n" in ref or "\0" in ref:
            raise SourceError(f"invalid revision: {ref!r}")
        got = self._cat.get(f"{ref}^{{commit}}".encode("utf-8", "surrogateescape"))
        if got is None or got[1] != b"commit":
            raise SourceError(f"unknown revision: {ref!r}")
        sha = got[0].decode("ascii")
        if _HEX_RE.fullmatch(ref):  # immutable: safe to remember
            self._resolved[ref] = sha
        return sha

    def _rev_spec(self, rev: str) -> str:
        m = re.fullmatch(r"(.*?)(\.\.\.?)(.*)", rev) if ".." in rev else None
        if m is None:
            return self.resolve(rev)
        left = self.resolve(m.group(1) or "HEAD")
        right = self.resolve(m.group(3) or "HEAD")
        return f"{left}{m.group(2)}{right}"

    # -- history

    def iter_commits(
        self,
        rev: str = "HEAD",
        *,
        limit: int | None = None,
        first_parent: bool = True,
        since: str | datetime | None = None,
    ) -> Iterator[Commit]:
        """Commits reachable from ``rev`` (a revision or ``a..b`` range), newest first.

        ``first_parent`` follows only first parents (the mainline). ``since`` is a date
        (datetime, ISO string or anything ``git log --since`` accepts) on the committer date.
        Every commit's ``files`` are its change against its first parent.
        """
        spec = self._rev_spec(rev)  # before iteration: a bad ref fails at the call
        if limit is not None and limit <= 0:
            return iter(())
        args = [*self._argv, "log", *LOG_FLAGS, *LOG_FILES]
        if first_parent:
            args.append("--first-parent")
        if limit is not None:
            args.append(f"--max-count={int(limit)}")
        if since is not None:
            args.append(f"--since={since.isoformat() if isinstance(since, datetime) else since}")
        args += ["--end-of-options", spec, "--"]
        return self._stream_log(args)

    def _stream_log(self, args: list[str]) -> Iterator[Commit]:
        with tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(
                    args,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    env=self._env,
                    cwd=self.git_dir,
                )
            except OSError as exc:
                raise SourceError(f"cannot run git: {exc}") from None
            assert proc.stdout is not None
            finished = False
            try:
                yield from parse_log(tokens(proc.stdout))
                finished = True
            finally:
                if not finished and proc.poll() is None:
                    proc.kill()
                proc.stdout.close()
                code = proc.wait()
            if code != 0:
                err.seek(0)
                raise SourceError(f"git log failed: {_one_line(err.read())}")

    def iter_pull_requests(
        self, rev: str = "HEAD", *, limit: int | None = None, first_parent: bool = True
    ) -> Iterator[PullRequest]:
        """Merged PRs/MRs on the first-parent line of ``rev``, newest first.

        See :func:`pull_request_from_commit` for the recognised messages. Reverts and
        repeated numbers are kept (pipelines filter); ``limit`` counts PRs.

        Two passes keep this fast: one streaming ``git log`` of commit headers only finds
        the PRs, and their changed files are read in batches (``git log --no-walk --stdin``)
        instead of diffing every commit of the history.
        """
        spec = self._rev_spec(rev)
        if limit is not None and limit <= 0:
            return iter(())
        args = [*self._argv, "log", *LOG_FLAGS]
        if first_parent:
            args.append("--first-parent")
        args += ["--end-of-options", spec, "--"]
        return self._prs(self._stream_log(args), limit)

    def _prs(self, headers: Iterator[Commit], limit: int | None) -> Iterator[PullRequest]:
        found, size = 0, 16  # small first batch: the first PRs arrive quickly
        batch: list[PullRequest] = []
        try:
            for commit in headers:
                pr = pull_request_from_commit(commit)
                if pr is None:
                    continue
                batch.append(pr)
                found += 1
                done = limit is not None and found >= limit
                if len(batch) >= size or done:
                    yield from self._with_files(batch)
                    batch, size = [], min(size * 4, 1024)
                if done:
                    return
            yield from self._with_files(batch)
        finally:
            close = getattr(headers, "close", None)
            if close is not None:
                close()

    def _with_files(self, prs: list[PullRequest]) -> list[PullRequest]:
        if not prs:
            return prs
        args = [*self._argv, "log", "--no-walk=unsorted", "--stdin", *LOG_FLAGS, *LOG_FILES]
        try:
            proc = subprocess.run(
                args,
                input=b"".join(p.merge_sha.encode() + b"\n" for p in prs),
                capture_output=True,
                env=self._env,
                cwd=self.git_dir,
            )
        except OSError as exc:
            raise SourceError(f"cannot run git: {exc}") from None
        if proc.returncode != 0:
            raise SourceError(f"git log failed: {_one_line(proc.stderr)}")
        files = {c.sha: c.files for c in parse_log(iter(proc.stdout.split(b"\0")))}
        for pr in prs:
            pr.files = files.get(pr.merge_sha, [])
        return prs

    # -- content

    def diff(
        self,
        base: str,
        head: str,
        *,
        paths: Iterable[str] | None = None,
        binary: bool = True,
    ) -> str:
        """Unified diff base → head for ``git apply`` on a checkout of base (see module doc).

        ``paths`` limits the diff to these files or directories (literal, no globs).
        ``binary=False`` leaves binary contents out (``Binary files … differ`` stubs, which
        only apply where git has the blobs). Text is UTF-8 with ``surrogateescape``: write it
        with :func:`repogym.sources.patches.encode_patch`.
        """
        b, h = self.resolve(base), self.resolve(head)
        args = [*_DIFF_CONFIG, "diff", *_DIFF_FLAGS]
        if binary:
            args.append("--binary")
        args += [b, h, "--"]
        if paths is not None:
            args += [f":(literal){p}" for p in paths]
            if args[-1] == "--":
                return ""
        return decode_patch(self._run(args))

    def read_file(self, ref: str, path: str) -> bytes:
        """Bytes of the file at ``path`` in ``ref`` (a symlink gives its target).

        Raises FileNotFoundError when absent, IsADirectoryError for a directory.
        """
        sha = self.resolve(ref)
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts) or "\0" in path:
            raise FileNotFoundError(f"{path} (at {ref})")
        name = f"{sha}:{path}".encode("utf-8", "surrogateescape")
        got = self._read_odd_path(sha, path) if b"\n" in name else self._cat.get(name)
        if got is None or got[1] == b"commit":
            raise FileNotFoundError(f"{path} (at {ref})")
        if got[1] != b"blob":
            raise IsADirectoryError(f"{path} (at {ref})")
        return got[2]

    def _read_odd_path(self, sha: str, path: str) -> tuple[bytes, bytes, bytes] | None:
        out = self._run(["ls-tree", "-z", "--full-tree", sha, "--", f":(literal){path}"])
        for entry in out.split(b"\0"):
            meta, _, name = entry.partition(b"\t")
            if name == path.encode("utf-8", "surrogateescape"):
                _mode, kind, obj = meta.split()
                got = self._cat.get(obj)
                return None if got is None else (obj, kind, got[2])
        return None

    def _ls_tree(self, sha: str) -> list[tuple[bytes, bytes, bytes, bytes]]:
        out = self._run(["ls-tree", "-r", "-z", "--full-tree", sha])
        entries = []
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, _, name = entry.partition(b"\t")
            mode, kind, obj = meta.split()
            entries.append((mode, kind, obj, name))
        return entries

    def list_files(self, ref: str) -> list[str]:
        """Every file (regular or symlink) at ``ref``; submodules are not files."""
        sha = self.resolve(ref)
        return [decode_path(name) for _m, kind, _o, name in self._ls_tree(sha) if kind == b"blob"]

    def export_snapshot(self, ref: str, dest: Path, *, exclude: Iterable[str] = ()) -> None:
        """Write the tree at ``ref`` into ``dest`` with no history.

        ``exclude`` holds repository paths: a file, or a directory (everything under it).
        Regular files get mode 0644 or 0755, symlinks stay symlinks, submodules become empty
        directories. Atomic: written to a temporary sibling directory, then renamed. ``dest``
        may be missing or an empty directory; anything else is a SourceError.
        """
        sha = self.resolve(ref)
        dest = Path(dest).absolute()
        if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
            raise SourceError(f"destination exists and is not empty: {dest}")
        skip = {e.strip("/").encode("utf-8", "surrogateescape") for e in exclude}
        skip.discard(b"")
        entries = [e for e in self._ls_tree(sha) if not _excluded(e[3], skip)]
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        try:
            self._write_tree(entries, os.fsencode(tmp))
            os.chmod(tmp, 0o755)
            try:
                os.replace(tmp, dest)
            except OSError as exc:
                raise SourceError(f"cannot create {dest}: {exc.strerror}") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _write_tree(self, entries: list[tuple[bytes, bytes, bytes, bytes]], root: bytes) -> None:
        # Validate every path first: git refuses such trees on checkout, so must we.
        links = {name for mode, kind, _o, name in entries if mode == b"120000"}
        blobs: list[tuple[bytes, bytes, bytes]] = []
        for mode, kind, obj, name in entries:
            comps = name.split(b"/")
            if any(c in (b"", b".", b"..") or c.lower() == b".git" for c in comps):
                raise SourceError(f"unsafe path in tree: {decode_path(name)!r}")
            if any(b"/".join(comps[:i]) in links for i in range(1, len(comps))):
                raise SourceError(f"path below a symlink in tree: {decode_path(name)!r}")
            if kind == b"blob":
                blobs.append((mode, obj, name))
        for _mode, kind, _obj, name in entries:
            if kind == b"commit":
                os.makedirs(os.path.join(root, name), exist_ok=True)
        if not blobs:
            return
        with tempfile.TemporaryFile() as req:
            req.write(b"".join(obj + b"\n" for _m, obj, _n in blobs))
            req.seek(0)
            proc = subprocess.Popen(
                [*self._argv, "cat-file", "--batch", "--buffer"],
                stdin=req,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self._env,
                cwd=self.git_dir,
            )
            assert proc.stdout is not None
            try:
                for mode, _obj, name in blobs:
                    header = proc.stdout.readline().split()
                    if len(header) != 3 or header[1] != b"blob":
                        raise SourceError(f"cannot read blob for {decode_path(name)!r}")
                    data = proc.stdout.read(int(header[2]))
                    proc.stdout.read(1)
                    _write_entry(os.path.join(root, name), mode, data)
            finally:
                proc.stdout.close()
                if proc.poll() is None:
                    proc.kill()
                proc.wait()

    # -- identity

    def commit_url(self, sha: str) -> str | None:
        """None: a local repository has no web pages (hosted sources give one)."""
        return None

    def merged_pull_requests(self, rev: str = "HEAD") -> Iterator[tuple[PullRequest, str | None]]:
        """The pull requests recognised in the history reachable from ``rev`` (all usable)."""
        return ((pr, None) for pr in self.iter_pull_requests(rev))

    def linked_issues(self, pr: PullRequest) -> list[Issue]:
        """``[]``: a local clone has no issue tracker."""
        return []

    def remote_url(self) -> str | None:
        """URL of the ``origin`` remote with credentials removed, or None."""
        out = self._run(["config", "--get", "remote.origin.url"], ok=(0, 1)).strip()
        return redact_url(out.decode("utf-8", "replace")) if out else None

    def repo_id(self) -> str:
        """``owner/name`` from the origin URL, else the repository folder's name."""
        url = self.remote_url()
        guessed = owner_name_from_url(url) if url else None
        if guessed:
            return guessed
        folder = self.path.parent if self.path.name == ".git" else self.path
        return folder.name.removesuffix(".git") or folder.name


def _excluded(name: bytes, skip: set[bytes]) -> bool:
    if not skip:
        return False
    if name in skip:
        return True
    parts = name.split(b"/")
    return any(b"/".join(parts[:i]) in skip for i in range(1, len(parts)))


def _write_entry(path: bytes, mode: bytes, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if mode == b"120000":
        os.symlink(data, path)
        return
    perm = 0o755 if mode == b"100755" else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, perm)
    try:
        os.fchmod(fd, perm)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
