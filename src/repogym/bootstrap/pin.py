"""Pinning a Python environment: constraints files that every install step obeys.

Two sources of exact versions, one mechanism:

* **The repository's own pins** (``uv.lock``, ``poetry.lock``, ``pdm.lock``, ``Pipfile.lock``
  or fully pinned requirement files, read by :mod:`repogym.bootstrap.locks`) are known before
  any build. The recipe writes them to :data:`LOCK_CONSTRAINTS_PATH` in a ``RUN`` step (so the
  Dockerfile alone rebuilds them) and passes ``-c`` on that file to every install step.
* **The versions the first build resolved**: a recipe names dependency *ranges* (``pytest>=7``);
  after the first build, ``pip freeze`` in the environment gives the resolved versions; the
  task's Dockerfile then installs with ``-c /usr/lib/repogym/constraints.txt`` (the file sits in
  ``environment/``), so rebuilding the task later — here, under Docker, under Harbor — installs
  the same versions. Locks are cached per recipe hash, so the candidates of one repository that
  share a dependency set share one lock and one pinned build.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

CONSTRAINTS_NAME = "repogym-constraints.txt"
CONSTRAINTS_PATH = "/usr/lib/repogym/constraints.txt"
LOCK_CONSTRAINTS_PATH = "/usr/lib/repogym/lock-constraints.txt"
"""Where a recipe writes the repository's own pins (see :func:`lock_constraints_step`)."""
FREEZE = ["python", "-m", "pip", "freeze", "--disable-pip-version-check"]
_INSTALL = re.compile(r"^(RUN (?:python -m pip install|uv pip install))(?= )", re.M)
_INSTALLER = re.compile(r"^RUN python -m pip install uv==[^\s]+\s*$")
_PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==[^\s;#]+$")


def format_constraints(lines: list[str]) -> str:
    """Constraint lines, de-duplicated and sorted by name, one per line (empty: nothing)."""
    unique = sorted({ln.strip() for ln in lines if ln.strip()}, key=str.lower)
    return "".join(f"{ln}\n" for ln in unique)


def constraints_from_freeze(text: str) -> str:
    """The ``name==version`` lines of ``pip freeze`` output (editable installs, local paths
    and comments left out), sorted; empty when nothing was pinned."""
    return format_constraints([ln for ln in text.splitlines() if _PINNED.match(ln.strip())])


def lock_constraints_step(lines: list[str]) -> list[str]:
    """Shell words of a ``RUN`` step writing ``lines`` to :data:`LOCK_CONSTRAINTS_PATH`.

    A ``printf`` rather than a file in the build context: the Dockerfile stays self-contained
    (a task's ``environment/`` holds only the Dockerfile, the snapshot and the freeze lock).
    """
    folder = LOCK_CONSTRAINTS_PATH.rsplit("/", 1)[0]
    pins = format_constraints(lines).splitlines()
    return [
        "mkdir",
        "-p",
        folder,
        "&&",
        "printf",
        shlex.quote("%s\\n"),
        *(shlex.quote(p) for p in pins),
        ">",
        LOCK_CONSTRAINTS_PATH,
    ]


def pinned_dockerfile(dockerfile: str) -> str:
    """The recipe's Dockerfile with its install steps constrained to the freeze lock.

    The constraints file is copied in just before the first install (so layers above it stay
    shared with unpinned builds), and every ``RUN python -m pip install`` / ``RUN uv pip
    install`` gets ``-c`` — except the installer's own step (``pip install uv==X``), which
    pins itself.
    """
    if not _INSTALL.search(dockerfile):
        return dockerfile
    lines = dockerfile.splitlines()
    out: list[str] = []
    copied = False
    for line in lines:
        if _INSTALLER.match(line):
            # the installer pins itself; the project's own uv (a dev dependency, say) may be
            # another version, and constraining this step to it makes the rebuild impossible
            out.append(line)
            continue
        if not copied and _INSTALL.match(line):
            out.append("# the versions the first build resolved (repogym: pinned for rebuilds)")
            out.append(f"COPY {CONSTRAINTS_NAME} {CONSTRAINTS_PATH}")
            copied = True
        out.append(_INSTALL.sub(rf"\1 -c {CONSTRAINTS_PATH}", line))
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
