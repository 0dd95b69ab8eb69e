"""Artifacts: the paths a separate verifier receives from the agent's sandbox (Harbor's
``artifacts = [...]``, plus ``/logs/artifacts``), each restored at its own absolute path.

Nothing else of the agent's sandbox reaches the verifier: its processes, its other files, its
system changes. The copy goes through the host with :meth:`Session.download` /
:meth:`Session.upload`, after every agent process is killed.
"""

from __future__ import annotations

import posixpath
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.harbor.config import Artifact, ArtifactSpec
from repogym.sandbox import SandboxError, Session

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
        for pattern in exclude:
            for hit in list(host.glob(pattern)) if host.is_dir() else []:
                if hit.is_dir() and not hit.is_symlink():
                    shutil.rmtree(hit)
                else:
                    hit.unlink(missing_ok=True)
        parent = posixpath.dirname(src)
        fresh.exec(["mkdir", "-p", "--", parent], user="root", timeout_s=60, network=False)
        fresh.upload(host, src)
        report.copied.append(src)
    return report
