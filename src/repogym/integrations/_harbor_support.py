"""Helpers of the Harbor plugin that need no Harbor: finding the task, moving folders in and out
of a session, one backend per process, killing one command's processes.

Harbor itself is imported only by :mod:`repogym.integrations.harbor`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import threading
from pathlib import Path

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, Session, get_backend

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


def _escapes(link: Path, root: Path) -> bool:
    target = os.readlink(link)
    if os.path.isabs(target):
        return True
    joined = os.path.normpath(os.path.join(os.path.dirname(link), target))
    return not (joined == str(root) or joined.startswith(str(root) + os.sep))


def merge_into(src: Path, dest: Path) -> list[str]:
    """Copy the host folder ``src`` (downloaded from a sandbox) into ``dest``, replacing files
    of the same name. Symlinks that are absolute or point above ``src`` are left out: Harbor
    reads the reward files it finds here, and must never follow a link the sandbox planted to
    a host file. Returns the paths left out."""
    dropped: list[str] = []
    root = src.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    for rel in tree_paths(src):
        here, there = root / rel, dest / rel
        if here.is_symlink():
            if _escapes(here, root):
                dropped.append(rel)
                continue
            if there.is_symlink() or there.is_file():
                there.unlink()
            elif there.is_dir():
                shutil.rmtree(there)
            os.symlink(os.readlink(here), there)
        elif here.is_dir():
            if there.is_symlink() or there.is_file():
                there.unlink()
            there.mkdir(exist_ok=True)
        elif here.is_file():
            if there.is_symlink():
                there.unlink()
            elif there.is_dir():
                shutil.rmtree(there)
            shutil.copyfile(here, there)
    return dropped


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
