"""Task containers a killed server left behind: marked when started, removed by the next server.

A server on the ``docker`` backend puts two labels on every container it starts:
:data:`SERVE_LABEL` (the identity of what it serves: ``REPOGYM_SERVER_ID``, else a digest of its
task set) and :data:`OWNER_LABEL` (who started it: the server's own container on that engine, or
its process). When a server starts it removes the containers of its identity whose owner is
known to be gone: a container owner the engine no longer runs, or a process of this machine and
PID namespace that no longer exists (with the session's volumes, such as ``/tests``, and their
filling helpers). Containers of a live server, of another identity, without
the labels, or whose owner cannot be checked from here are left alone.

Plain Python, no ``openenv`` import; the docker SDK is reached through the backend's client.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repogym.sandbox.docker import MOUNT_LABEL

SERVE_LABEL = "io.repogym.serve"
OWNER_LABEL = "io.repogym.serve.owner"
SERVER_ID_ENV = "REPOGYM_SERVER_ID"
log = logging.getLogger("repogym.openenv")

_CONTAINER_ID = re.compile(r"containers/([0-9a-f]{64})/")
_ENGINE_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")


def serve_identity(task_files: Iterable[tuple[str, bytes]]) -> str:
    """``REPOGYM_SERVER_ID``, else a digest of ``(task id, task.toml bytes)`` pairs: the same
    task set (in any folder, in any copy of the package) gives the same identity."""
    given = os.environ.get(SERVER_ID_ENV, "").strip()
    if given:
        return given
    digest = hashlib.sha256()
    for task_id, toml in sorted(task_files):
        digest.update(task_id.encode() + b"\0" + hashlib.sha256(toml).digest())
    return "tasks-" + digest.hexdigest()[:16]


def own_container_id(mountinfo: str | None = None) -> str | None:
    """The id of the container this process runs in, as its engine names it (the engine
    bind-mounts ``/etc/hostname`` & co. from its per-container folder), or None on a host."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text(errors="replace")
        except OSError:
            return None
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] in _ENGINE_FILES:
            found = _CONTAINER_ID.search(fields[3])
            if found:
                return found.group(1)
    return None


def _process_key(pid: int) -> str | None:
    """``<boot id>/<pid namespace inode>/<pid>/<start time>`` of a process (in this PID
    namespace), None when it is gone."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pidns = "".join(c for c in os.readlink("/proc/self/ns/pid") if c.isdigit())
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (start time) counted after the command name, which may hold spaces.
    start = stat.rsplit(")", 1)[1].split()[19]
    return f"{boot}/{pidns}/{pid}/{start}"


def server_owner() -> str:
    """This server as an owner label value: ``container:<id>`` or ``process:<key>``."""
    container = own_container_id()
    if container is not None:
        return f"container:{container}"
    return f"process:{_process_key(os.getpid())}"


def owner_gone(owner: str, client: Any) -> bool:
    """True only when the owner is known to have stopped; False when it runs or when that
    cannot be told from here (another machine, another PID namespace, an unknown form)."""
    kind, _, rest = owner.partition(":")
    if kind == "container" and re.fullmatch(r"[0-9a-f]{64}", rest):
        try:
            container = client.containers.get(rest)
        except Exception as exc:  # noqa: BLE001 - docker.errors.NotFound, API errors
            return type(exc).__name__ == "NotFound"
        return container.status in ("exited", "dead")
    if kind == "process":
        parts = rest.split("/")
        mine = _process_key(os.getpid())
        if len(parts) != 4 or mine is None or not parts[2].isdigit():
            return False
        if mine.split("/")[:2] != parts[:2]:
            return False  # another boot or PID namespace: cannot be checked from here
        return _process_key(int(parts[2])) != rest
    return False


def mark(backend: Any, identity: str, owner: str) -> None:
    """Have ``backend`` label the containers it starts (the ``docker`` backend only)."""
    labels = getattr(backend, "labels", None)
    if isinstance(labels, dict):
        labels.update({SERVE_LABEL: identity, OWNER_LABEL: owner})


def _session_volumes(container: Any) -> list[str]:
    """The volumes the docker backend made for this session (its read-only mounts, such as
    ``/tests``: labelled with the mount point, one set per session)."""
    out = []
    for mount in (getattr(container, "attrs", None) or {}).get("Mounts") or []:
        name = mount.get("Name") or ""
        if mount.get("Type") == "volume" and name.startswith("repogym-mount-"):
            out.append(name)
    return out


def _remove_volumes(client: Any, names: list[str]) -> None:
    """Remove a session's volumes, and the stopped helper containers that fill them (created
    by the session, labelled with the mount point, never running but to fill or empty it)."""
    for name in names:
        try:
            for helper in client.containers.list(all=True, filters={"volume": name}):
                if MOUNT_LABEL in (helper.labels or {}):
                    helper.remove(force=True)
            client.volumes.get(name).remove(force=True)
        except Exception as exc:  # noqa: BLE001 - gone meanwhile, or still in use
            log.warning("could not remove volume %s: %s", name, type(exc).__name__)


def reap(backend: Any, identity: str, owner: str) -> list[str]:
    """Remove the containers of ``identity`` whose owner is gone, with their session volumes;
    their short ids."""
    client = getattr(backend, "client", None)
    if getattr(backend, "name", None) != "docker" or client is None:
        return []
    try:
        found = client.containers.list(all=True, filters={"label": f"{SERVE_LABEL}={identity}"})
    except Exception as exc:  # noqa: BLE001 - an engine that went away: nothing to do now
        log.warning("could not list task containers to reap: %s", type(exc).__name__)
        return []
    removed = []
    for container in found:
        labels = container.labels or {}
        if labels.get(SERVE_LABEL) != identity:
            continue
        theirs = labels.get(OWNER_LABEL, "")
        if theirs == owner or not owner_gone(theirs, client):
            continue
        volumes = _session_volumes(container)
        try:
            container.remove(force=True)
        except Exception as exc:  # noqa: BLE001 - removed meanwhile
            log.warning("could not remove task container %s: %s", container.short_id, exc)
            continue
        _remove_volumes(client, volumes)
        removed.append(container.short_id)
    if removed:
        log.warning(
            "removed %d task container(s) a stopped server left behind: %s",
            len(removed),
            ", ".join(removed),
        )
    return removed
