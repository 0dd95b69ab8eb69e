"""Pinning a built Python environment: the versions pip resolved become a constraints file.

A recipe names dependency *ranges* (``pytest>=7``); what they resolve to depends on the day of the
build. After the first build, ``pip freeze`` in the environment gives the resolved versions; the
task's Dockerfile then installs with ``-c /usr/lib/repogym/constraints.txt`` (the file sits in
``environment/``), so rebuilding the task later — here, under Docker, under Harbor — installs
the same versions. Locks are cached per recipe hash, so the candidates of one repository that
share a dependency set share one lock and one pinned build.
"""

from __future__ import annotations

import re
from pathlib import Path

CONSTRAINTS_NAME = "repogym-constraints.txt"
CONSTRAINTS_PATH = "/usr/lib/repogym/constraints.txt"
FREEZE = ["python", "-m", "pip", "freeze", "--disable-pip-version-check"]
_PIP_INSTALL = re.compile(r"^(RUN python -m pip install)(?= )", re.M)
_PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==[^\s;#]+$")


def constraints_from_freeze(text: str) -> str:
    """The ``name==version`` lines of ``pip freeze`` output (editable installs, local paths
    and comments left out), sorted; empty when nothing was pinned."""
    lines = sorted(
        {ln.strip() for ln in text.splitlines() if _PINNED.match(ln.strip())},
        key=str.lower,
    )
    return "".join(f"{ln}\n" for ln in lines)


def pinned_dockerfile(dockerfile: str) -> str:
    """The recipe's Dockerfile with its ``pip install`` steps constrained to the lock.

    The constraints file is copied in just before the first ``pip install`` (so layers above it
    stay shared with unpinned builds), and every ``RUN python -m pip install`` gets ``-c``.
    """
    if not _PIP_INSTALL.search(dockerfile):
        return dockerfile
    lines = dockerfile.splitlines()
    out: list[str] = []
    copied = False
    for line in lines:
        if not copied and _PIP_INSTALL.match(line):
            out.append("# the versions the first build resolved (repogym: pinned for rebuilds)")
            out.append(f"COPY {CONSTRAINTS_NAME} {CONSTRAINTS_PATH}")
            copied = True
        out.append(_PIP_INSTALL.sub(rf"\1 -c {CONSTRAINTS_PATH}", line))
    return "\n".join(out) + "\n"


class LockStore:
    """Constraints files by recipe hash under ``<cache>/locks``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, recipe_hash: str) -> str | None:
        try:
            return (self.root / f"{recipe_hash}.txt").read_text()
        except OSError:
            return None

    def put(self, recipe_hash: str, constraints: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{recipe_hash}.tmp"
        tmp.write_text(constraints)
        tmp.replace(self.root / f"{recipe_hash}.txt")
