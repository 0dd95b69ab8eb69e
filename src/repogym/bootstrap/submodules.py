"""Git submodules: which a snapshot declares, and filling them in from git.

``git archive`` (and the sources layer's snapshots) leave a submodule as an empty folder. When
the repository is at hand, :func:`populate` fills each one with the tree of the commit the
superproject records, taken from (in order) an initialised submodule work tree, the
superproject's ``.git/modules/<name>``, a local URL (absolute, ``file://``, or relative to the
superproject's remote or folder), or a shallow fetch of the URL. A submodule whose commit none
of them has is reported with the reason, never silently left empty.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FETCH_TIMEOUT_S = 300
_Done = subprocess.CompletedProcess[bytes]
_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}


@dataclass(frozen=True)
class Submodule:
    name: str
    path: str
    url: str


def _git(*args: str, timeout: float = 60, stdout: Any = subprocess.PIPE) -> _Done:
    """Run git (no prompts); a failure to start or a timeout is a failed result."""
    try:
        return subprocess.run(
            ["git", *args],
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
            env=_ENV,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return subprocess.CompletedProcess(["git", *args], 1, b"", str(exc).encode())


def _parse_config(listing: str) -> list[Submodule]:
    """``git config --list`` lines of a ``.gitmodules`` → submodules (path order)."""
    found: dict[str, dict[str, str]] = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        m = re.match(r"^submodule\.(.+)\.(path|url)$", key)
        if m:
            found.setdefault(m[1], {})[m[2]] = value.strip()
    subs = [
        Submodule(name, v["path"].strip("/"), v.get("url", ""))
        for name, v in found.items()
        if v.get("path")
    ]
    return sorted(subs, key=lambda s: s.path)


def declared(repo: Path) -> list[Submodule]:
    """The submodules ``repo/.gitmodules`` declares (empty without one)."""
    path = repo / ".gitmodules"
    if not path.is_file():
        return []
    res = _git("config", "--file", str(path), "--list")
    return _parse_config(res.stdout.decode(errors="replace")) if res.returncode == 0 else []


def is_present(repo: Path, sub: Submodule) -> bool:
    """Whether the submodule's folder has files in ``repo``."""
    folder = repo / sub.path
    return folder.is_dir() and any(folder.iterdir())


def gitlinks(git_dir: Path, sha: str) -> dict[str, str]:
    """Submodule path → recorded commit, for the tree of ``sha``."""
    res = _git("-C", str(git_dir), "ls-tree", "-r", "-z", "--full-tree", sha)
    out: dict[str, str] = {}
    for entry in res.stdout.decode(errors="surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[0] == "160000":
            out[path] = parts[2]
    return out


def _has_commit(git_dir: Path, commit: str) -> bool:
    return _git("-C", str(git_dir), "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


def _relative_base(repo: Path) -> str:
    """What a relative submodule URL is relative to: the superproject's origin or folder."""
    res = _git("-C", str(repo), "config", "--get", "remote.origin.url")
    origin = res.stdout.decode().strip()
    return origin if res.returncode == 0 and origin else str(repo.resolve())


def _join_url(base: str, rel: str) -> str:
    if "://" in base:
        scheme, _, rest = base.partition("://")
        host, _, path = rest.partition("/")
        return f"{scheme}://{host}/" + posixpath.normpath(posixpath.join(path, rel)).lstrip("/")
    return posixpath.normpath(posixpath.join(base, rel))


def _candidates(repo: Path, sub: Submodule) -> list[str]:
    """Places that may hold the submodule's objects: local git dirs first, then its URL."""
    out = []
    if (repo / sub.path / ".git").exists():
        out.append(str(repo / sub.path))
    res = _git("-C", str(repo), "rev-parse", "--absolute-git-dir")
    if res.returncode == 0:
        modules = Path(res.stdout.decode().strip()) / "modules" / sub.name
        if modules.is_dir():
            out.append(str(modules))
    url = sub.url
    if url.startswith(("./", "../")):
        url = _join_url(_relative_base(repo), url)
    if url:
        out.append(url.removeprefix("file://"))
    return out


def _export(git_dir: str, commit: str, dest: Path) -> str:
    """``git archive`` of ``commit`` into ``dest``; an error message or empty."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as tar:
        res = _git("-C", git_dir, "archive", "--format=tar", commit, stdout=tar, timeout=600)
        if res.returncode != 0:
            return _last_line(res.stderr, f"git archive exit {res.returncode}")
        tar.seek(0)
        untar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=tar, capture_output=True)
    return "" if untar.returncode == 0 else _last_line(untar.stderr, "tar failed")


def _last_line(data: bytes, fallback: str) -> str:
    lines = data.decode(errors="replace").strip().splitlines()
    return (lines[-1] if lines else fallback)[:200]


def _fetch(url: str, commit: str, workdir: Path) -> tuple[str | None, str]:
    """A bare repository holding ``commit`` fetched from ``url`` (None + why on failure)."""
    bare = workdir / "fetch.git"
    _git("init", "-q", "--bare", str(bare))
    res = _git("-C", str(bare), "fetch", "-q", "--depth", "1", url, commit, timeout=FETCH_TIMEOUT_S)
    if res.returncode == 0 and _has_commit(bare, commit):
        return str(bare), ""
    return None, _last_line(res.stderr, f"git fetch exit {res.returncode}")


def populate(repo: Path, sha: str, dest: Path, *, depth: int = 0) -> dict[str, str]:
    """Fill the (empty) submodule folders of ``dest``, a snapshot of ``sha`` in ``repo``.

    Returns path → why, for each submodule that could not be filled (empty: all filled).
    Nested submodules are filled from the submodule's own git data, three levels deep.
    """
    links = gitlinks(repo, sha)
    if not links:
        return {}
    listing = _git("-C", str(repo), "config", "--blob", f"{sha}:.gitmodules", "--list")
    subs = {s.path: s for s in _parse_config(listing.stdout.decode(errors="replace"))}
    problems: dict[str, str] = {}
    for path, commit in sorted(links.items()):
        sub = subs.get(path, Submodule(path, path, ""))
        target = dest / path
        if target.is_dir() and any(target.iterdir()):
            continue
        with tempfile.TemporaryDirectory(prefix="repogym-submodule-") as tmp:
            why = "no url in .gitmodules"
            source = None
            for cand in _candidates(repo, sub):
                if Path(cand).is_dir():
                    if _has_commit(Path(cand), commit):
                        source = cand
                        break
                    why = f"{cand} does not have it"
                elif re.match(r"^(\w+://|[\w.-]+@[\w.-]+:)", cand):
                    source, why = _fetch(cand, commit, Path(tmp))
                    if source:
                        break
                else:
                    why = f"{cand} does not exist"
            if source is None:
                problems[path] = f"commit {commit[:12]} not available: {why}"
                continue
            error = _export(source, commit, target)
            if error:
                problems[path] = error
            elif depth < 3:
                nested = populate(Path(source), commit, target, depth=depth + 1)
                problems.update({f"{path}/{k}": v for k, v in nested.items()})
    return problems
