"""The sandbox protocol: build an environment from a task's ``environment/``, open sessions in it.

Every backend (``local``, ``docker``, …) implements :class:`Sandbox`; callers never import a backend
module directly but go through :func:`repogym.sandbox.get_backend`.
"""

from __future__ import annotations

import abc
import errno
import os
import posixpath
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from repogym.errors import RepogymError

NetworkMode = Literal["public", "no-network", "allowlist"]
ChangeKind = Literal["file", "symlink", "dir", "deleted", "special"]
EntryKind = Literal["file", "dir", "symlink", "special"]


class SandboxError(RepogymError, RuntimeError):
    """A sandbox could not do what was asked; the message is one line a user can act on."""


class BuildError(SandboxError):
    """The environment could not be built (bad Dockerfile line, failing RUN step, …)."""


@dataclass(frozen=True)
class EnvironmentSpec:
    """What a backend needs to build and start a task's environment (from ``[environment]``)."""

    context_dir: Path | None
    """The task's ``environment/`` folder (Dockerfile + build context), or None when absent."""
    dockerfile: str = "Dockerfile"
    docker_image: str | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    network_mode: NetworkMode = "public"
    allowed_hosts: tuple[str, ...] = ()
    build_timeout_sec: float = 1800.0
    target: str | None = None
    """The build stage to build (``docker build --target``): a stage name or index; None for
    the last stage."""
    image_first: bool = False
    """Start from ``docker_image`` (pulled by its digest) and build nothing; only when it
    cannot be had, build the Dockerfile, saying why (a task published with its image)."""


@dataclass
class ExecResult:
    exit_code: int | None
    """Process exit code; None when it was killed (timeout) before exiting."""
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False


@dataclass
class BuiltEnvironment:
    """A built environment that sessions start from; cheap to start many sessions from one."""

    backend: str
    key: str
    """Cache key of the final build step (or image id)."""
    workdir: str
    env: dict[str, str]
    user: str | None = None
    base_mapping: dict[str, str] = field(default_factory=dict)
    """How ``FROM`` was honoured, e.g. {"from": "python:3.12-slim", "host": "/…/python3.12"}."""
    details: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """One path under a root that differs from the environment the session started from."""

    path: str
    """Relative to the root, ``/``-separated; ``.`` is the root itself (only for ``deleted``:
    everything the environment had there is gone)."""
    kind: ChangeKind
    """``file``/``symlink``/``dir``: new or changed (content staged on the host); ``deleted``:
    removed (a folder: with everything below it); ``special``: a device, fifo or socket (never
    staged)."""
    mode: int = 0o644
    size: int = 0
    target: str | None = None
    """Where a symlink points (as written; never followed)."""


@dataclass(frozen=True)
class DirEntry:
    """One entry of a folder listing."""

    name: str
    kind: EntryKind
    size: int = 0


@dataclass
class ChangeSet:
    """What a session changed under ``root``, read from outside the sandbox's control."""

    root: str
    changes: list[Change]
    staged: Path
    """Host folder holding the new content of every file/symlink/dir change at its path."""


class Session(abc.ABC):
    """One running sandbox: a fresh copy-on-write root over a built environment."""

    @abc.abstractmethod
    def exec(
        self,
        command: str | list[str],
        *,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        network: bool | None = None,
    ) -> ExecResult:
        """Run a command; the timeout kills its whole tree.

        A string goes through ``bash -c`` (not a login shell, so the image's ``ENV PATH`` holds).
        """

    @abc.abstractmethod
    def read(self, path: str, *, user: str | None = None, beneath: str | None = None) -> bytes:
        """Contents of the regular file ``path`` (a symlink is followed inside the sandbox).

        ``user``: read with that user's rights (the kernel decides, no check beforehand).
        ``beneath``: the lookup must stay below that folder (``..`` or a symlink leading out
        of it fails with ``OSError(EXDEV)``).
        """

    @abc.abstractmethod
    def write(
        self,
        path: str,
        data: bytes | str,
        mode: int = 0o644,
        *,
        user: str | None = None,
        beneath: str | None = None,
    ) -> None:
        """Write a file, parents created. Without ``user`` (as root) the file is replaced
        atomically (a symlink there is replaced, not followed) with ``mode``; with ``user``
        it is written as that user's shell ``>`` would (in place, permissions checked by the
        kernel, ``mode`` only for a new file). ``beneath`` as for :meth:`read`."""

    def listdir(
        self, path: str, *, user: str | None = None, beneath: str | None = None
    ) -> list[DirEntry]:
        """The entries of the folder ``path``, sorted by name (links not followed)."""
        script = 'cd -- "$1" && find . -mindepth 1 -maxdepth 1 -printf "%y\\t%s\\t%f\\n"'
        res = self.exec(["sh", "-c", script, "sh", path], user=user or "root", timeout_s=60)
        if res.exit_code != 0:
            raise OSError(errno.ENOENT, res.stderr.strip()[:200] or "cannot list", path)
        kinds: dict[str, EntryKind] = {"f": "file", "d": "dir", "l": "symlink"}
        out = []
        for line in res.stdout.splitlines():
            kind, size, name = (line.split("\t", 2) + ["", ""])[:3]
            k: EntryKind = kinds.get(kind, "special")
            out.append(DirEntry(name, k, int(size or 0) if k == "file" else 0))
        return sorted(out, key=lambda e: e.name)

    @abc.abstractmethod
    def upload(self, src: Path, dest: str) -> None:
        """Copy a host file or folder into the sandbox at ``dest`` (replaced if present)."""

    @abc.abstractmethod
    def download(self, src: str, dest: Path) -> None:
        """Copy a sandbox file or folder out to the host."""

    @abc.abstractmethod
    def remove(self, path: str) -> None:
        """Remove a file or folder inside the sandbox (no error when absent)."""

    def mount(self, src: Path, dest: str, *, read_only: bool = True) -> None:
        """Make a host folder visible at ``dest``. Backends that can bind-mount override this
        (nothing copied, no sandbox storage used); the default uploads a copy."""
        self.upload(src, dest)

    def unmount(self, dest: str) -> None:
        """Undo :meth:`mount`."""
        self.remove(dest)

    def export_changes(self, root: str, dest: Path) -> ChangeSet:
        """What the session changed under ``root`` compared with the environment it started
        from, found without running anything inside the sandbox (the copy-on-write layer, the
        engine's container diff); new content is copied into the host folder ``dest``.

        Call it only after :meth:`kill_all`: nothing may change the files while they are read.
        """
        raise SandboxError(f"the {type(self).__name__} backend cannot export a session's changes")

    def merge(self, src: Path, dest: str, paths: Iterable[str]) -> None:
        """Copy the listed ``/``-separated paths of the host folder ``src`` (files, symlinks,
        folders; parents first) into ``dest``, leaving everything else in ``dest`` as it is.

        Symlinks are recreated, never followed. The default goes through :meth:`write` and
        :meth:`exec`; backends override it with one bulk copy.
        """
        for rel in paths:
            host = src / rel
            target = posixpath.join(dest, rel)
            if host.is_symlink():
                link = os.readlink(host)
                self.exec(["ln", "-sfn", "--", link, target], user="root", timeout_s=60)
            elif host.is_dir():
                self.exec(["mkdir", "-p", "--", target], user="root", timeout_s=60)
            elif host.is_file():
                self.write(target, host.read_bytes(), mode=host.stat().st_mode & 0o777)

    def remove_all(self, paths: Iterable[str]) -> None:
        """Remove several paths (no error for absent ones)."""
        batch = list(paths)
        for i in range(0, len(batch), 500):
            words = " ".join(shlex.quote(p) for p in batch[i : i + 500])
            self.exec(f"rm -rf -- {words}", user="root", timeout_s=300)

    @abc.abstractmethod
    def kill_all(self) -> None:
        """Kill every process the session's execs started (background jobs, daemons too).

        The root and its files stay. Called between phases so nothing the agent left running
        can touch the verifier's files.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Stop every process of the session and discard its root. Idempotent."""

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox(abc.ABC):
    """A backend: builds environments and starts sessions over them."""

    name: str = "abstract"

    @abc.abstractmethod
    def build(self, spec: EnvironmentSpec, *, log: Path | None = None) -> BuiltEnvironment: ...

    @abc.abstractmethod
    def start(self, built: BuiltEnvironment, spec: EnvironmentSpec) -> Session: ...

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this backend can run here, and if not, why (one line)."""
        return True, ""
