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
beside the destination and renamed into place, so a refused pull writes nothing.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from repogym.harbor import Task, atomic_write, discover, iter_task_dirs
from repogym.harbor.dataset import build_manifest, build_registry
from repogym.hub._safety import (
    _DIR_FLAGS,
    _FILE_FLAGS,
    PullStage,
    RegistryError,
    check_tree,
    copy_regular_file,
    copy_tree,
)
from repogym.hub.card import dataset_card

if TYPE_CHECKING:
    from repogym.hub.hf_registry import HfRegistry

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_REVISION = re.compile(r"^[0-9a-f]{16}$")
"""How this registry names revisions; nothing else under ``revisions/`` is one."""
META_FILES = ("registry.json", "manifest.json", "README.md")
_MAX_REF_BYTES = 256


def parse_dataset_ref(ref: str) -> tuple[str, str | None]:
    """``owner/name[@rev]`` → (``owner/name``, rev or None)."""
    name, _, rev = ref.partition("@")
    if not _NAME.match(name) or ".." in name:
        raise RegistryError(f"dataset name must look like owner/name, got {ref!r}")
    return name, rev or None


def _check_name(name: str) -> list[str]:
    if not _NAME.match(name) or ".." in name:
        raise RegistryError(f"dataset name must look like owner/name, got {name!r}")
    return name.split("/")


@dataclass
class PushResult:
    name: str
    revision: str
    tasks: int
    location: Path | str
    """Where the revision lives: a folder, or the dataset's URL on a hosted registry."""
    unchanged: bool
    tasks_commit: str | None = None
    """On the Hub: the commit holding the tasks, which ``registry.json`` pins."""


@dataclass
class PullResult:
    name: str
    revision: str
    tasks: list[str]
    dest: Path


def _revision_of(tasks: list[Task]) -> str:
    h = hashlib.sha256()
    for task in sorted(tasks, key=lambda t: t.id):
        h.update(f"{task.id}\0{task.compute_hash()}\n".encode())
    return h.hexdigest()[:16]


def collect_tasks(src: Path) -> list[Task]:
    """The tasks under ``src``, refusing unreadable tasks, an empty folder, duplicate ids, and
    tasks holding a special file or a symlink that leaves the task or loops (checked before
    any file is read: a FIFO would block the content hash)."""
    for task_dir in iter_task_dirs(src):
        check_tree(task_dir, task_dir.name)
    found = discover(src)
    if found.invalid:
        path, exc = found.invalid[0]
        raise RegistryError(
            f"{len(found.invalid)} task(s) cannot be read, e.g. {path.name}: {exc.file}: {exc}"
        )
    if not found.tasks:
        raise RegistryError(f"{src}: no tasks to push")
    ids = [t.id for t in found.tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise RegistryError(f"two tasks share the id {dup!r}: task ids must be unique")
    return found.tasks


def stage_tasks(tasks: list[Task], staging: Path) -> list[Task]:
    """Copy tasks to ``staging/tasks/<id>`` (no symlink followed) and check every copy keeps
    its content hash."""
    (staging / "tasks").mkdir(parents=True, exist_ok=True)
    for task in tasks:
        copy_tree(task.path, staging / "tasks" / task.id, task.id)
    copied = discover(staging / "tasks").tasks
    for original, copy in zip(
        sorted(tasks, key=lambda t: t.id), sorted(copied, key=lambda t: t.id), strict=True
    ):
        if original.compute_hash() != copy.compute_hash():
            raise RegistryError(f"{original.id}: copy differs from the source")
    return copied


def write_card_and_manifest(
    staging: Path,
    tasks: list[Task],
    src: Path,
    name: str,
    rev: str,
    *,
    private: bool,
    registry: str = "<this registry>",
) -> None:
    """``manifest.json`` and the dataset card ``README.md`` of a staged revision."""
    manifest = build_manifest(tasks, staging)
    atomic_write(staging / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    card = dataset_card(name, rev, manifest, src, private=private, tasks=tasks, registry=registry)
    atomic_write(staging / "README.md", card)


class FileRegistry:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _dataset(self, name: str) -> Path:
        return self.root.joinpath(*_check_name(name))

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
        for part in (*_check_name(name), *parts):
            walked.append(part)
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
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
            fd = os.open("main", _FILE_FLAGS, dir_fd=refs)
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
        _check_name(name)
        tasks = collect_tasks(src)
        rev = _revision_of(tasks)
        self._refuse_symlinked_layout(name, rev)
        target = self._dataset(name) / "revisions" / rev
        unchanged = target.is_dir()
        if not unchanged:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{rev}.", dir=target.parent))
            try:
                copied = stage_tasks(tasks, staging)
                registry = build_registry(
                    copied,
                    staging,
                    name=name,
                    version=rev,
                    description=f"{name} at revision {rev}",
                )
                atomic_write(staging / "registry.json", json.dumps(registry, indent=2) + "\n")
                write_card_and_manifest(staging, copied, src, name, rev, private=private)
                os.replace(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
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
                tasks_fd = os.open("tasks", _DIR_FLAGS, dir_fd=rev_fd)
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
            for task_id in tasks:
                copy = stage.out / "tasks" / task_id
                where = f"{label}: tasks/{task_id}"
                copy_tree(task_id, copy, where, dir_fd=tasks_fd)
                check_tree(copy, where)
                if not (copy / "task.toml").is_file() or (copy / "task.toml").is_symlink():
                    raise RegistryError(f"{where} has no task.toml")
            metas = []
            if task is None:
                metas = [
                    m for m in META_FILES if copy_regular_file(rev_fd, m, stage.out / m, label)
                ]
            stage.commit(tasks, metas)
        return PullResult(name, revision, tasks, dest)


def open_registry(url: str) -> FileRegistry | HfRegistry:
    """A registry from its URL: ``hf`` (``HF_ENDPOINT`` or the public Hub),
    ``hf+http(s)://HOST`` (a Hub at that address) or ``file:///PATH`` (a local folder)."""
    if url == "hf" or url.startswith("hf+"):
        from repogym.hub.hf_registry import HfRegistry, parse_hf_url

        return HfRegistry(parse_hf_url(url))
    parsed = urlparse(url)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise RegistryError(
            f"unsupported registry {url!r}: use hf, hf+https://HOST or file:///PATH"
        )
    root = Path(unquote(parsed.path))
    if not root.is_absolute():
        raise RegistryError(f"registry path must be absolute: {url!r}")
    return FileRegistry(root)
