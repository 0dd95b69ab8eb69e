"""Helpers shared by the source tests: apply patches on snapshots, compare trees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from repogym.sources.patches import encode_patch


def git_apply(workdir: Path, patch: str, *, check: bool = False) -> subprocess.CompletedProcess:
    """``git apply [--check]`` of ``patch`` in ``workdir`` (a plain directory, no repo)."""
    args = ["git", "apply", "--whitespace=nowarn"] + (["--check"] if check else [])
    return subprocess.run(
        args, cwd=workdir, input=encode_patch(patch), capture_output=True, check=False
    )


def tree_state(root: Path) -> dict[bytes, tuple[str, bytes]]:
    """Every entry under ``root``: kind (file/exec/link) and content (link target)."""
    out: dict[bytes, tuple[str, bytes]] = {}
    broot = os.fsencode(root)
    for dirpath, dirs, files in os.walk(broot):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, broot)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            else:
                kind = "exec" if os.stat(p).st_mode & 0o100 else "file"
                with open(p, "rb") as f:
                    out[rel] = (kind, f.read())
    return out
