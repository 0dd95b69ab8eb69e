"""Clean-room verification: only the agent's change to the working tree reaches the verifier.

After the agent phase (every agent process killed), the change is read from outside the agent's
control — the session's copy-on-write layer seen from the host (local) or the engine's container
diff (docker) — with :meth:`Session.export_changes`. Then :func:`carry_over` keeps the paths a
fix may touch and drops the rest, each with a reason:

* protected paths (``[metadata.repo2env.verification].protected``: test files, runner
  configuration, start-up hooks, installed metadata, caches, dependencies, VCS data);
* symlinks that point out of the working tree (absolute, or climbing above it);
* devices, fifos and sockets;
* a new top-level module named like a standard-library module (it would shadow it);
* a change that would replace a folder holding protected files (e.g. ``src/pkg`` → a symlink).

The kept change is applied onto a **fresh** session of the same built environment; the verifier
runs there without network. Whatever else the agent did — system files, the interpreter,
site-packages, ``.pth`` files, shell profiles, copies under ``/opt``, processes — never existed
in that root.
"""

from __future__ import annotations

import posixpath
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from repogym.sandbox import Change, ChangeSet, SandboxError, Session
from repogym.taskdir.verification import Matcher

MAX_LISTED = 500
"""Paths listed per kind in a trial's result (the counts are always complete)."""
_SHADOW_ROOTS = ("", "src/")
T = TypeVar("T")


@dataclass
class CarryReport:
    """What was applied from the agent's change and what was dropped (and why)."""

    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    dropped: list[dict[str, str]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": "clean_room",
            "applied_count": len(self.applied),
            "deleted_count": len(self.deleted),
            "dropped_count": len(self.dropped),
            "applied": self.applied[:MAX_LISTED],
            "deleted": self.deleted[:MAX_LISTED],
            "dropped": self.dropped[:MAX_LISTED],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def _escapes(rel: str, target: str) -> bool:
    """Whether a symlink at ``rel`` pointing to ``target`` leaves the working tree."""
    if target.startswith("/") or not target:
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined == ".." or joined.startswith("../")


FULL_LISTING_OVER = 500
"""With more changed paths than this, list the whole base tree once instead of each path."""


def _find(session: Session, args: list[str]) -> tuple[set[str], set[str]]:
    """(files and symlinks, folders) that ``find ARGS -printf '%y %P'`` reports, in a fresh,
    trusted session; paths that do not exist are simply not reported."""
    res = session.exec(["find", *args], user="root", timeout_s=600, network=False)
    if res.exit_code not in (0, 1):  # 1: some of the paths asked about do not exist
        raise SandboxError(f"cannot list the clean room: {res.stderr.strip()[:200]}")
    files: set[str] = set()
    dirs: set[str] = set()
    for item in res.stdout.split("\0"):
        if len(item) > 2:
            (dirs if item[0] == "d" else files).add(item[2:])
    return files, dirs


def _listing(session: Session, root: str, changes: list[Change]) -> tuple[set[str], set[str]]:
    """What the base holds that the plan needs to know: the kind of every changed path, and
    everything below a folder that is deleted or replaced (the whole tree for a big change)."""
    paths = sorted({c.path for c in changes})
    if "." in paths or len(paths) > FULL_LISTING_OVER:
        return _find(session, [root, "-mindepth", "1", "-printf", "%y %P\\0"])
    if not paths:
        return set(), set()
    # %P is relative to the starting point: print the path we asked for instead.
    args = [posixpath.join(root, p) for p in paths]
    files, dirs = set(), set()
    found_files, found_dirs = _find(session, [*args, "-maxdepth", "0", "-printf", "%y %p\\0"])
    prefix = root.rstrip("/") + "/"
    files = {f[len(prefix) :] for f in found_files}
    dirs = {d[len(prefix) :] for d in found_dirs}
    deep = sorted(c.path for c in changes if c.path in dirs and c.kind != "dir")
    if deep:
        more_files, more_dirs = _find(
            session,
            [posixpath.join(root, p) for p in deep] + ["-mindepth", "1", "-printf", "%y %p\\0"],
        )
        files |= {f[len(prefix) :] for f in more_files}
        dirs |= {d[len(prefix) :] for d in more_dirs}
    return files, dirs


class _Plan:
    def __init__(self, matcher: Matcher, base_files: set[str], base_dirs: set[str]) -> None:
        self.matcher = matcher
        self.base_files = base_files
        self.base_dirs = base_dirs
        self.report = CarryReport()
        self.merge: list[str] = []
        self.remove: list[str] = []

    def drop(self, path: str, reason: str) -> None:
        self.report.dropped.append({"path": path, "reason": reason})

    def protected_below(self, folder: str) -> list[str]:
        prefix = "" if folder == "." else folder + "/"
        below = [p for p in self.base_files if p.startswith(prefix)]
        below += [d for d in self.base_dirs if d.startswith(prefix)]
        return [p for p in below if self.matcher.match(p)]

    def delete(self, path: str) -> None:
        """Delete ``path`` from the base, sparing protected files below it."""
        if path != "." and (pattern := self.matcher.match(path)):
            self.drop(path, f"deletes protected path ({pattern})")
            return
        is_dir = path == "." or path in self.base_dirs
        if not is_dir:
            if path in self.base_files:
                self.remove.append(path)
                self.report.deleted.append(path)
            return
        spared = self.protected_below(path)
        if not spared:
            if path == ".":
                self.remove += sorted(p for p in self.base_files | self.base_dirs if "/" not in p)
            else:
                self.remove.append(path)
            self.report.deleted.append(path)
            return
        # Remove the unprotected files one by one; protected ones (and their folders) stay.
        prefix = "" if path == "." else path + "/"
        for f in sorted(self.base_files):
            if f.startswith(prefix) and not self.matcher.match(f):
                self.remove.append(f)
                self.report.deleted.append(f)
        self.drop(path, f"deletion spares {len(spared)} protected path(s) below it")

    def keep(self, change: Change) -> None:
        rel = change.path
        pattern = self.matcher.match(rel)
        if pattern:
            self.drop(rel, f"protected ({pattern})")
            return
        if change.kind == "special":
            self.drop(rel, "device, fifo or socket")
            return
        if change.kind == "symlink" and _escapes(rel, change.target or ""):
            self.drop(rel, f"symlink leaves the working tree ({change.target})")
            return
        for root in _SHADOW_ROOTS:
            if rel.startswith(root) and "/" not in rel[len(root) :]:
                stem = rel[len(root) :].removesuffix(".py")
                new = rel not in self.base_files and rel not in self.base_dirs
                if new and stem in sys.stdlib_module_names:
                    self.drop(rel, f"new module shadows the standard library's {stem!r}")
                    return
        if change.kind != "dir" and rel in self.base_dirs:
            spared = self.protected_below(rel)
            if spared:
                self.drop(rel, f"would replace a folder holding protected path {spared[0]}")
                return
            self.remove.append(rel)
        if change.kind == "dir" and rel in self.base_files:
            self.remove.append(rel)
        self.merge.append(rel)
        if change.kind != "dir":
            self.report.applied.append(rel)


def plan_carry_over(
    changes: list[Change], matcher: Matcher, base_files: set[str], base_dirs: set[str]
) -> tuple[CarryReport, list[str], list[str]]:
    """Decide what of ``changes`` to apply onto a root holding ``base_files``/``base_dirs``.

    Returns (report, paths to remove first, paths to merge from the staged copy). A path is only
    merged when all its parent folders are kept too.
    """
    plan = _Plan(matcher, base_files, base_dirs)
    for change in changes:
        if change.kind == "deleted":
            plan.delete(change.path)
    dropped_dirs: set[str] = set()
    for change in changes:
        if change.kind == "deleted":
            continue
        parent = posixpath.dirname(change.path)
        if any(parent == d or parent.startswith(d + "/") for d in dropped_dirs):
            continue  # below a dropped folder: reported with the folder
        before = len(plan.report.dropped)
        plan.keep(change)
        if change.kind == "dir" and len(plan.report.dropped) > before:
            dropped_dirs.add(change.path)
    return plan.report, plan.remove, plan.merge


def carry_over(
    agent: Session, fresh: Session, root: str, matcher: Matcher, staging: Path
) -> CarryReport:
    """Apply the agent session's change under ``root`` (minus what ``matcher`` protects) onto
    the fresh session. Kill the agent's processes before calling this."""
    t0 = time.monotonic()
    changeset: ChangeSet = agent.export_changes(root, staging)
    t1 = time.monotonic()
    base_files, base_dirs = _listing(fresh, root, changeset.changes)
    report, remove, merge = plan_carry_over(changeset.changes, matcher, base_files, base_dirs)
    fresh.remove_all(posixpath.join(root, p) for p in remove)
    fresh.merge(changeset.staged, root, merge)
    report.seconds = {"export": t1 - t0, "apply": time.monotonic() - t1}
    return report


def handoff_session(
    backend: Any,
    built: Any,
    spec: Any,
    fill: Callable[[Session, Path], T],
) -> tuple[Session, T]:
    """A fresh session of ``built`` that ``fill(fresh, staging)`` stocks from the agent's
    session (through a private host folder, removed afterwards). The caller closes the session;
    it is closed here when ``fill`` fails. Clean-room and separate verifiers both start so."""
    staging = Path(tempfile.mkdtemp(prefix="repogym-change-"))
    fresh = backend.start(built, spec)
    try:
        report = fill(fresh, staging)
    except BaseException:
        fresh.close()
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return fresh, report


def clean_room_session(
    backend: Any,
    built: Any,
    spec: Any,
    agent: Session,
    root: str,
    matcher: Matcher,
) -> tuple[Session, CarryReport]:
    """A fresh session of ``built`` holding the agent's kept change (the caller closes it)."""
    return handoff_session(
        backend,
        built,
        spec,
        lambda fresh, staging: carry_over(agent, fresh, root, matcher, staging / "tree"),
    )
