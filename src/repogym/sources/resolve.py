"""``parse_repo_arg``: turn a command-line repository argument into a source locator."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

__all__ = ["RepoArg", "parse_repo_arg"]

_OWNER_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class RepoArg:
    """Where a repository lives: ``kind``, ``locator`` (path or owner/name) and API base URL."""

    kind: Literal["local", "github", "gitlab"]
    locator: str
    base_url: str | None = None


def _github_api() -> str:
    return os.environ.get("REPOGYM_GITHUB_API") or "https://api.github.com"


def _gitlab_path(path: str, text: str) -> str:
    parts = [p for p in path.strip("/").removesuffix(".git").split("/") if p]
    if "-" in parts:  # web UI URLs: group/name/-/merge_requests/1
        parts = parts[: parts.index("-")]
    if len(parts) < 2 or not all(_SEGMENT.fullmatch(p) for p in parts):
        raise ValueError(f"not a GitLab project path: {text!r}")
    return "/".join(parts)


def parse_repo_arg(text: str) -> RepoArg:
    """``owner/name``, GitHub or GitLab URLs, ``gitlab:group/name`` or a local path → RepoArg."""
    raw = text.strip()
    if not raw:
        raise ValueError("empty repository argument")
    if raw.startswith("gitlab:"):
        base = os.environ.get("REPOGYM_GITLAB_URL") or "https://gitlab.com"
        return RepoArg("gitlab", _gitlab_path(raw[len("gitlab:") :], raw), base.rstrip("/"))
    if raw.startswith(("https://", "http://")):
        parts = urlsplit(raw)
        host = (parts.hostname or "").lower()
        if host in ("github.com", "www.github.com"):
            segs = [p for p in parts.path.split("/") if p]
            if len(segs) < 2:
                raise ValueError(f"GitHub URL has no owner/name: {raw!r}")
            name = f"{segs[0]}/{segs[1].removesuffix('.git')}"
            if not _OWNER_NAME.fullmatch(name):
                raise ValueError(f"GitHub URL has no owner/name: {raw!r}")
            return RepoArg("github", name, _github_api())
        if "gitlab" in host:
            base = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"
            return RepoArg("gitlab", _gitlab_path(parts.path, raw), base)
        raise ValueError(f"unsupported repository host {host!r} (use GitHub, GitLab or a path)")
    path = Path(raw).expanduser()
    if path.exists():
        return RepoArg("local", str(path.resolve()), None)
    if _OWNER_NAME.fullmatch(raw) and not raw.startswith((".", "/")):
        return RepoArg("github", raw.removesuffix(".git"), _github_api())
    raise ValueError(f"not a repository: {raw!r} (owner/name, URL, gitlab:path or existing path)")
