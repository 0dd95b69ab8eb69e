"""Helpers of the Harbor plugin that need no Harbor: finding the task, moving folders in and out
of a session, one backend per process, killing one command's processes; for Harbor's own Docker
environment, the main service's compose override and the Compose v2 check.

Harbor itself is imported only by :mod:`repogym.integrations.harbor` and
:mod:`repogym.integrations.harbor_docker`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import posixpath
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, Session, get_backend
from repogym.sandbox.confine import Root, remove_entry, walk_fd

TASK_TOML = "task.toml"
EXEC_MARKER = "REPOGYM_EXEC_ID"
"""Environment variable set on every command the plugin runs (a random id per command), so the
processes of a command Harbor cancelled can be found and killed."""
MAX_TASK_DEPTH = 4
"""How far above Harbor's environment folder ``task.toml`` is looked for (``<task>/environment``
is one level; a step's verifier image ``<task>/steps/<name>/tests`` three)."""

_KILL_MARKED = """\
for p in /proc/[0-9]*; do
  if tr '\\0' '\\n' < "$p/environ" 2>/dev/null | grep -qx "$1"; then
    kill -9 "${p#/proc/}" 2>/dev/null
  fi
done
exit 0
"""


def find_task_dir(environment_dir: Path) -> Path | None:
    """The task folder Harbor's ``environment_dir`` belongs to: the nearest folder above it
    holding ``task.toml`` (None when there is none within :data:`MAX_TASK_DEPTH` levels)."""
    folder = Path(environment_dir).resolve()
    for parent in list(folder.parents)[:MAX_TASK_DEPTH]:
        if (parent / TASK_TOML).is_file():
            return parent
    return None


def under(path: str, folder: str) -> bool:
    """Whether the sandbox path ``path`` is ``folder`` or below it."""
    norm = "/" + posixpath.normpath(path).lstrip("/") if path.startswith("/") else path
    return norm == folder or norm.startswith(folder.rstrip("/") + "/")


def tree_paths(src: Path) -> list[str]:
    """Every folder, file and symlink below ``src``: relative, ``/``-separated, parents first."""
    out: list[str] = []
    for dirpath, dirs, files in os.walk(src):
        rel = Path(dirpath).relative_to(src).as_posix()
        prefix = "" if rel == "." else rel + "/"
        links = [d for d in dirs if (Path(dirpath) / d).is_symlink()]
        dirs[:] = sorted(d for d in dirs if d not in links)
        out += [prefix + d for d in dirs]
        out += sorted(prefix + f for f in [*files, *links])
    return sorted(out, key=lambda p: (p.count("/"), p))


def upload_dir(session: Session, src: Path, dest: str) -> None:
    """Copy the host folder's content into ``dest`` in the sandbox, keeping what ``dest``
    already holds (``docker cp src/. dest`` semantics, which Harbor's providers follow)."""
    res = session.exec(["mkdir", "-p", "--", dest], user="root", timeout_s=60, network=False)
    if res.exit_code != 0:
        raise RuntimeError(f"cannot create {dest} in the sandbox: {res.stderr.strip()[:200]}")
    paths = tree_paths(src)
    if paths:
        session.merge(src, dest, paths)


def _escapes(target: str, rel: str) -> bool:
    """Whether the link text ``target`` of the entry ``rel`` leaves its tree, on the text."""
    if os.path.isabs(target):
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined == ".." or joined.startswith("../")


def _link_text(root: Root, rel: str) -> str:
    """The target text of the link ``rel`` under ``root`` (never followed)."""
    fd, name = root.parent(rel)
    try:
        return os.readlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def _leaves(root: Root, rel: str) -> bool:
    """Whether following the link ``rel`` under ``root`` leaves it (a chain of links
    included: ``d -> .`` and ``e -> d/..`` look inside on the text and are not)."""
    try:
        os.close(root.open(rel, os.O_PATH))
    except OSError as exc:
        return exc.errno in (errno.EXDEV, errno.ELOOP)
    return False


def merge_into(src: Path, dest: Path) -> list[str]:
    """Copy the host folder ``src`` (downloaded from a sandbox) into ``dest``, replacing files
    of the same name. Harbor reads the reward files it finds here, and must never follow a
    link the sandbox planted to a host file: every write stays below ``dest`` (lookups
    confined, see :mod:`repogym.sandbox.confine`), and a symlink that is absolute or leads
    above its folder (on its text, or once followed, in ``src`` or in ``dest``) is left out
    or removed. Returns the paths left out."""
    dropped: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    with Root.at(src, beneath=True) as sroot, Root.at(dest, beneath=True) as droot:
        for rel in tree_paths(src):
            st = sroot.lstat(rel)
            if st is None:
                continue
            if stat.S_ISLNK(st.st_mode) and (
                _escapes(_link_text(sroot, rel), rel) or _leaves(sroot, rel)
            ):
                dropped.append(rel)
                continue
            pfd, name = droot.parent(rel, create=True)
            try:
                _merge_entry(sroot, rel, st, pfd, name)
            finally:
                os.close(pfd)
        # Links that stay inside on their own may leave once combined with what ``dest``
        # held before: every link there is checked once more.
        top = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            for dirfd, rel, st in walk_fd(top):
                if stat.S_ISLNK(st.st_mode) and _leaves(droot, rel):
                    os.unlink(rel.rpartition("/")[2], dir_fd=dirfd)
                    if rel not in dropped:
                        dropped.append(rel)
        finally:
            os.close(top)
    return dropped


def _merge_entry(sroot: Root, rel: str, st: os.stat_result, pfd: int, name: str) -> None:
    try:
        have: os.stat_result | None = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except FileNotFoundError:
        have = None
    if stat.S_ISLNK(st.st_mode):
        if have is not None:
            remove_entry(pfd, name)
        os.symlink(_link_text(sroot, rel), name, dir_fd=pfd)
    elif stat.S_ISDIR(st.st_mode):
        if have is not None and not stat.S_ISDIR(have.st_mode):
            remove_entry(pfd, name)
            have = None
        if have is None:
            os.mkdir(name, 0o755, dir_fd=pfd)
    elif stat.S_ISREG(st.st_mode):
        if have is not None:
            remove_entry(pfd, name)
        src_fd = sroot.open(rel, os.O_RDONLY | os.O_NONBLOCK, follow=False)
        try:
            out = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=pfd,
            )
            try:
                while chunk := os.read(src_fd, 1 << 20):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view) :]
            finally:
                os.close(out)
        finally:
            os.close(src_fd)


def kill_marked(session: Session, marker: str) -> None:
    """Kill every process of the session whose environment holds ``marker`` (best effort: a
    process that cleared its environment is left for the next ``kill_all``)."""
    with contextlib.suppress(Exception):  # the session may be closing: nothing else to do
        session.exec(
            ["sh", "-c", _KILL_MARKED, "kill-marked", f"{EXEC_MARKER}={marker}"],
            user="root",
            timeout_s=30,
            network=False,
        )


class BackendPool:
    """One backend instance per name in this process (a local sandbox probes the host and
    prunes its cache when created), and one build at a time per environment definition."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._backends: dict[str, Sandbox] = {}
        self._builds: dict[str, threading.Lock] = {}

    def backend(self, name: str) -> Sandbox:
        with self._lock:
            if name not in self._backends:
                self._backends[name] = get_backend(name)
            return self._backends[name]

    def build(self, backend: Sandbox, spec: EnvironmentSpec, log: Path | None) -> BuiltEnvironment:
        """Build ``spec`` (concurrent trials of one task wait for the first build; the
        backend's own cache makes the second one cheap)."""
        key = f"{backend.name}:{spec.context_dir}:{spec.dockerfile}:{spec.docker_image}"
        with self._lock:
            lock = self._builds.setdefault(key, threading.Lock())
        with lock:
            return backend.build(spec, log=log)


POOL = BackendPool()


# ------------------------------------------------------------------ Harbor's Docker environment

MAIN_SERVICE = "main"
COMPOSE_HINT = (
    "Harbor's Docker environment needs Docker Compose v2 (`docker compose`), which this "
    "docker client does not find: install your distribution's docker-compose-plugin, or build "
    "it with scripts/compose.sh of a repogym checkout (needs Go)"
)


@functools.cache
def compose_problem(docker: str = "docker") -> str | None:
    """None when ``docker compose version`` answers, else a one-line reason (asked once)."""
    try:
        done = subprocess.run(
            [docker, "compose", "version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{COMPOSE_HINT} ({type(exc).__name__})"
    return None if done.returncode == 0 else COMPOSE_HINT


def main_service_overlay(
    *, no_network: bool, setting: str | None, prebuilt: bool
) -> dict[str, Any]:
    """The compose override of Harbor's main service: an init as its first process; for a
    task with network, the network the container starts with (the setting; nothing when it is
    unset: the engine's default; a no-network task gets Harbor's own no-network file instead);
    the network its build uses (the setting; a prebuilt image has no build)."""
    main: dict[str, Any] = {"init": True}
    if setting is not None and not no_network:
        main["network_mode"] = setting
    if setting is not None and not prebuilt:
        main["build"] = {"network": setting}
    return {"services": {MAIN_SERVICE: main}}
