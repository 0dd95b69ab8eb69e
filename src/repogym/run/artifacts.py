"""Artifacts: the paths a separate verifier receives from the agent's sandbox (Harbor's
``artifacts = [...]``, plus ``/logs/artifacts``), each restored at its own absolute path.

Nothing else of the agent's sandbox reaches the verifier: its processes, its other files, its
system changes. The copy goes through the host with :meth:`Session.download` /
:meth:`Session.upload`, after every agent process is killed.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.sandbox import SandboxError, Session, glob_regex
from repogym.taskdir.config import Artifact, ArtifactSpec

LOG_ARTIFACTS = "/logs/artifacts"


@dataclass
class ArtifactReport:
    """What reached the verifier and what the agent's sandbox did not have."""

    copied: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"mode": "separate", "artifacts": self.copied, "missing": self.missing}


def artifact_paths(artifacts: Iterable[Artifact]) -> list[tuple[str, list[str]]]:
    """(absolute source path, exclude patterns) per entry, ``/logs/artifacts`` first, once each."""
    out: list[tuple[str, list[str]]] = [(LOG_ARTIFACTS, [])]
    for item in artifacts:
        src, exclude = (item.source, item.exclude) if isinstance(item, ArtifactSpec) else (item, [])
        src = posixpath.normpath(src)
        if not src.startswith("/"):
            raise SandboxError(f"artifact {src!r} must be an absolute path")
        if all(src != seen for seen, _ in out):
            out.append((src, list(exclude)))
    return out


def drop_excluded(folder: Path, patterns: list[str]) -> None:
    """Remove what ``patterns`` (globs relative to ``folder``, ``**`` for any depth) match.

    The folder is a copy of the agent's sandbox, so it may hold links anywhere: the walk never
    follows one (a pattern never reaches through a link), and a matched link is removed
    itself, never what it points to.
    """
    regexes = [glob_regex(p.strip("/")) for p in patterns if p.strip("/")]
    for dirpath, dirnames, filenames in os.walk(folder, topdown=True, followlinks=False):
        base = Path(dirpath)
        rel_dir = base.relative_to(folder).as_posix()
        for name in sorted([*dirnames, *filenames]):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if not any(r.match(rel) for r in regexes):
                continue
            path = base / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
                dirnames.remove(name)
            else:
                path.unlink(missing_ok=True)


def carry_artifacts(
    agent: Session, fresh: Session, artifacts: Iterable[Artifact], staging: Path
) -> ArtifactReport:
    """Copy each artifact from ``agent`` to the same path in ``fresh``; kill the agent's
    processes before calling this. A path the agent's sandbox lacks is reported missing
    (``/logs/artifacts`` only when it is absent and not declared)."""
    report = ArtifactReport()
    for i, (src, exclude) in enumerate(artifact_paths(artifacts)):
        host = staging / str(i)
        try:
            agent.download(src, host)
        except (FileNotFoundError, NotADirectoryError, SandboxError, OSError):
            if src != LOG_ARTIFACTS:
                report.missing.append(src)
            continue
        if exclude and host.is_dir() and not host.is_symlink():
            drop_excluded(host, exclude)
        parent = posixpath.dirname(src)
        fresh.exec(["mkdir", "-p", "--", parent], user="root", timeout_s=60, network=False)
        fresh.upload(host, src)
        report.copied.append(src)
    return report
