"""A dataset registry in a local folder (``file:///PATH``).

Layout::

    PATH/<owner>/<name>/revisions/<rev>/   one immutable copy per push: tasks, registry.json
                                           (pinned to <rev>), manifest.json, README.md (card)
    PATH/<owner>/<name>/refs/main          the newest revision id (written last, atomically)

``rev`` is the first 16 hex digits of sha256 over the sorted (task id, content_hash) pairs, so
pushing the same tasks twice gives the same revision.

A registry folder may be hand-made by anyone, so ``pull`` trusts none of it: ``refs/main`` must
hold a revision id (16 hex digits) that ``revisions/`` has; every folder from the dataset down to a
task is opened without following symlinks (a symlinked dataset, ``revisions``, revision, ``tasks``
or task folder is refused); files are copied through those descriptors, symlinks stay symlinks and
must resolve inside their task without a loop (:mod:`repogym.hub._safety`); the result is staged
beside the destination and renamed into place, so a refused pull writes nothing. What arrived
must match the revision's manifest, whose (id, content_hash) pairs must hash to the revision's
id (:mod:`repogym.hub.received`): a task edited, removed or added after the push is refused.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
from pathlib import Path

from repogym.atomic import missing_parents, remove_empty, staging_dir
from repogym.hub._safety import (
    DIR_FLAGS,
    FILE_FLAGS,
    PullStage,
    RegistryError,
    check_tree,
    copy_regular_file,
    copy_tree,
)
from repogym.hub.base import (
    META_FILES,
    PullResult,
    PushResult,
    check_name,
    collect_tasks,
    revision_of,
    revision_of_pairs,
    stage_tasks,
    write_card_and_manifest,
)
from repogym.hub.received import MANIFEST, check_received, manifest_hashes
from repogym.taskdir import atomic_write
from repogym.taskdir.dataset import REGISTRY_FILE, build_registry, rebase_registry

_REVISION = re.compile(r"^[0-9a-f]{16}$")
"""How this registry names revisions; nothing else under ``revisions/`` is one."""
_MAX_REF_BYTES = 256


class FileRegistry:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _dataset(self, name: str) -> Path:
        return self.root.joinpath(*check_name(name))

    def _open(self, name: str, *parts: str) -> int:
        """A descriptor of ``root/owner/name/parts…``: ``root`` as the user named it, every
        folder below opened without following symlinks. Missing → FileNotFoundError."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise RegistryError(f"{self.root}: cannot read the registry ({exc.strerror})") from None
        walked = []
        for part in (*check_name(name), *parts):
            walked.append(part)
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:
                where = "/".join(walked)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise RegistryError(
                        f"{self.root}: {where!r} is a symlink or not a folder; "
                        "a registry holds real folders only"
                    ) from None
                raise RegistryError(
                    f"{self.root}: cannot read {where!r} ({exc.strerror})"
                ) from None
            finally:
                os.close(fd)
            fd = nxt
        return fd

    def revisions(self, name: str) -> list[str]:
        try:
            fd = self._open(name, "revisions")
        except FileNotFoundError:
            return []
        try:
            return sorted(n for n in os.listdir(fd) if _REVISION.match(n))
        finally:
            os.close(fd)

    def _read_main(self, name: str) -> str:
        missing = RegistryError(f"no dataset {name} in {self.root}")
        try:
            refs = self._open(name, "refs")
        except FileNotFoundError:
            raise missing from None
        try:
            fd = os.open("main", FILE_FLAGS, dir_fd=refs)
        except FileNotFoundError:
            raise missing from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RegistryError(f"{name}: refs/main is a symlink; refused") from None
            raise RegistryError(f"{name}: cannot read refs/main ({exc.strerror})") from None
        finally:
            os.close(refs)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RegistryError(f"{name}: refs/main is not a regular file; refused")
            data = os.read(fd, _MAX_REF_BYTES + 1)
        finally:
            os.close(fd)
        text = data.decode("ascii", "replace").strip()
        if len(data) > _MAX_REF_BYTES or not _REVISION.match(text):
            raise RegistryError(
                f"{name}: refs/main holds {text[:40]!r}, not a revision id (16 hex digits); refused"
            )
        return text

    def resolve(self, name: str, rev: str | None) -> str:
        known = self.revisions(name)
        if rev is None or rev == "main":
            revision = self._read_main(name)
            if revision not in known:
                raise RegistryError(
                    f"{name}: refs/main names {revision}, which is not in revisions/"
                )
            return revision
        matches = [r for r in known if r.startswith(rev)]
        if len(matches) != 1:
            raise RegistryError(
                f"{name}: no single revision matches {rev!r} (known: {', '.join(known) or 'none'})"
            )
        return matches[0]

    def _refuse_symlinked_layout(self, name: str, rev: str) -> None:
        """Push writes only into real folders of the registry, never through a symlink."""
        dataset = self._dataset(name)
        for path in (
            dataset.parent,
            dataset,
            dataset / "revisions",
            dataset / "revisions" / rev,
            dataset / "refs",
            dataset / "refs" / "main",
        ):
            if path.is_symlink():
                raise RegistryError(f"{path} is a symlink; a registry holds real folders only")

    def push(self, src: Path, name: str, *, private: bool = False) -> PushResult:
        check_name(name)
        tasks = collect_tasks(src)
        rev = revision_of(tasks)
        self._refuse_symlinked_layout(name, rev)
        target = self._dataset(name) / "revisions" / rev
        unchanged = target.is_dir()
        if not unchanged:
            made = missing_parents(target.parent)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                staging = staging_dir(target.parent, "push", rev)
            except OSError as exc:
                remove_empty(made)
                raise RegistryError(f"cannot write {target.parent} ({exc.strerror})") from None
            try:
                copied = stage_tasks(tasks, staging)
                registry = build_registry(
                    copied,
                    staging,
                    name=name,
                    version=rev,
                    description=f"{name} at revision {rev}",
                    final_root=target,
                )
                atomic_write(staging / "registry.json", json.dumps(registry, indent=2) + "\n")
                write_card_and_manifest(staging, copied, src, name, rev, private=private)
                os.replace(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                remove_empty(made)
                raise
        atomic_write(self._dataset(name) / "refs" / "main", rev + "\n")
        return PushResult(name, rev, len(tasks), target, unchanged)

    def pull(
        self, name: str, dest: Path, *, rev: str | None = None, task: str | None = None
    ) -> PullResult:
        """Copy a revision (or one task of it) into ``dest``, trusting nothing in the registry:
        see the module's docstring. Nothing is written unless everything checks out."""
        revision = self.resolve(name, rev)
        label = f"{name}@{revision}"
        try:
            rev_fd = self._open(name, "revisions", revision)
        except FileNotFoundError:
            raise RegistryError(f"{label}: the revision vanished; pull again") from None
        try:
            try:
                tasks_fd = os.open("tasks", DIR_FLAGS, dir_fd=rev_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise RegistryError(
                        f"{label}: tasks is a symlink or not a folder; refused"
                    ) from None
                raise RegistryError(f"{label}: cannot read tasks/ ({exc.strerror})") from None
            try:
                return self._pull_tasks(label, name, revision, rev_fd, tasks_fd, dest, task)
            finally:
                os.close(tasks_fd)
        finally:
            os.close(rev_fd)

    def _pull_tasks(
        self,
        label: str,
        name: str,
        revision: str,
        rev_fd: int,
        tasks_fd: int,
        dest: Path,
        task: str | None,
    ) -> PullResult:
        tasks = []
        try:
            entries = [
                (entry, os.stat(entry, dir_fd=tasks_fd, follow_symlinks=False).st_mode)
                for entry in sorted(os.listdir(tasks_fd))
            ]
        except OSError as exc:
            raise RegistryError(f"{label}: cannot read tasks/ ({exc.strerror})") from None
        for entry, mode in entries:
            if stat.S_ISLNK(mode):
                raise RegistryError(f"{label}: task folder {entry!r} is a symlink; refused")
            if stat.S_ISDIR(mode) and not entry.startswith("."):
                tasks.append(entry)
        if task is not None:
            if task not in tasks:
                raise RegistryError(f"{label} has no task {task!r}")
            tasks = [task]
        clash = [t for t in tasks if os.path.lexists(dest / "tasks" / t)]
        if clash:
            raise RegistryError(f"{dest}: tasks already present, e.g. {clash[0]}")
        with PullStage(dest) as stage:
            listed = self._listed(label, revision, rev_fd, stage.work / MANIFEST)
            for task_id in tasks:
                copy = stage.out / "tasks" / task_id
                where = f"{label}: tasks/{task_id}"
                copy_tree(task_id, copy, where, dir_fd=tasks_fd)
                check_tree(copy, where)
                if not (copy / "task.toml").is_file() or (copy / "task.toml").is_symlink():
                    raise RegistryError(f"{where} has no task.toml")
            check_received(stage.out, tasks, listed, label, whole=task is None)
            metas = []
            if task is None:
                metas = [
                    m for m in META_FILES if copy_regular_file(rev_fd, m, stage.out / m, label)
                ]
                rebase_registry(
                    stage.out / REGISTRY_FILE, self._dataset(name) / "revisions" / revision, dest
                )
            stage.commit(tasks, metas)
        return PullResult(name, revision, tasks, dest)

    @staticmethod
    def _listed(label: str, revision: str, rev_fd: int, scratch: Path) -> dict[str, str]:
        """The revision's manifest as ``{task id: content_hash}``, refused unless its pairs
        hash to the revision's own id (revision ids here are content addresses)."""
        data = scratch.read_bytes() if copy_regular_file(rev_fd, MANIFEST, scratch, label) else None
        listed = manifest_hashes(data, label)
        if revision_of_pairs(listed) != revision:
            raise RegistryError(
                f"{label}: {MANIFEST} does not hash to the revision's id (changed after the "
                "push); refused"
            )
        return listed
