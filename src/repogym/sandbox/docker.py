"""The ``docker`` backend: the same protocol on a real Docker engine (``repogym[docker]``).

Images are built from the task's ``environment/`` (the requested stage; the log written even on
failure, intermediate containers removed) or, when only ``docker_image`` is set, used as the
engine has it, pulled only when absent (never, with ``REPOGYM_DOCKER_PULL=never``). Each session
is a fresh container with an init (tini) under ``sleep infinity``, removed on close; the built
environment records the image and the ``FROM`` images' digests. ``/tests`` is a volume of the
session's own, mounted read-only from the start and filled from outside (by the engine, through a
container that never runs the task's code). ``storage_mb`` is the engine's size quota where its
storage driver has one, and a per-file limit everywhere.
Per-phase network is switched by connecting or disconnecting the container from the default
bridge network. Every exec runs under ``timeout -k`` inside the container, so a timed-out command
and its process group are killed there.

The build, the ``FROM`` images and the network and pull settings are in ``_docker_build.py``;
archives from the engine (downloads, exported changes) in ``_docker_archive.py``.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import io
import logging
import os
import posixpath
import secrets
import shlex
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repogym.sandbox import _cabundle
from repogym.sandbox._docker_archive import export_changes as export_engine_changes
from repogym.sandbox._docker_archive import root_owned, unpack_engine_archive
from repogym.sandbox._docker_build import (
    NETWORK_ENV,
    PULL_ENV,
    build_image,
    context_digest,
    from_images,
    network_setting,
    present,
    pull_setting,
    supply_hint,
)
from repogym.sandbox.base import (
    BuildError,
    BuiltEnvironment,
    ChangeSet,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxError,
    Session,
)

_log = logging.getLogger(__name__)
DEFAULT_PIDS_LIMIT = 4096
MOUNT_POINTS = ("/tests",)
"""Folders that :meth:`DockerSession.mount` fills read-only: each is a volume of its own,
mounted read-only when the container starts (empty until filled)."""
MOUNT_LABEL = "org.repogym.mount"


def _client() -> Any:
    try:
        import docker  # noqa: PLC0415 - optional dependency, imported only here
    except ImportError:
        raise SandboxError(
            "the docker backend needs the docker SDK: pip install 'repogym[docker]'"
        ) from None
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine reachable"
        raise SandboxError(
            f"no Docker engine reachable ({type(exc).__name__}); use --sandbox local"
        ) from None
    return client


class DockerSandbox(Sandbox):
    name = "docker"

    def __init__(self) -> None:
        self.client = _client()
        self._quota: str | None = None
        """The engine's storage driver once known; ``""`` after it refused a size quota."""
        self.labels: dict[str, str] = {}
        """Put on every container :meth:`start` starts (the OpenEnv server marks its task
        containers, to remove those a killed server left behind)."""

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            _client()
        except SandboxError as exc:
            return False, str(exc)
        return True, ""

    def build(self, spec: EnvironmentSpec, *, log: Path | None = None) -> BuiltEnvironment:
        context = spec.context_dir
        has_dockerfile = context is not None and (context / spec.dockerfile).is_file()
        fallback = ""
        image = None
        if spec.image_first and spec.docker_image:
            # A published task: its image, pulled by digest, else the Dockerfile (said so).
            tag = spec.docker_image
            try:
                image = self._image(tag)
            except BuildError as exc:
                if not has_dockerfile:
                    raise
                fallback = f"task image {tag} not used ({exc})"
                _log.warning("%s: building environment/%s instead", fallback, spec.dockerfile)
        if image is not None:
            pass
        elif has_dockerfile:
            assert context is not None
            tag = f"repogym-env:{context_digest(context, spec)[:16]}"
            image = build_image(self.client, context, spec, tag, log)
        elif spec.docker_image:
            tag = spec.docker_image
            image = self._image(tag)
        else:
            raise BuildError("the task has neither environment/Dockerfile nor docker_image")
        config = image.attrs.get("Config", {})
        env = dict(e.split("=", 1) for e in config.get("Env") or [] if "=" in e)
        return BuiltEnvironment(
            backend=self.name,
            key=image.id,
            workdir=config.get("WorkingDir") or "/",
            env=env,
            user=config.get("User") or None,
            base_mapping={
                "image": tag,
                "image_id": image.id,
                **self._bases(context, spec),
                **({"image_fallback": fallback} if fallback else {}),
            },
        )

    def _image(self, tag: str) -> Any:
        """The image ``tag`` from the engine, pulled when it is not there yet."""
        image = self._present(tag)  # present (by name or digest): used as it is
        if image is None and pull_setting() == "never":
            raise BuildError(f"{tag} is not on the engine and {PULL_ENV}=never: {supply_hint(tag)}")
        if image is None:
            try:
                image = self.client.images.pull(tag)
            except Exception as exc:  # noqa: BLE001
                first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                raise BuildError(f"cannot pull {tag} ({first}); {supply_hint(tag)}") from None
        return image

    def _present(self, name: str) -> Any:
        """The image ``name`` if the engine has it (by name or digest), else None."""
        return present(self.client, name)

    def _bases(self, context: Path | None, spec: EnvironmentSpec) -> dict[str, str]:
        """``from:<image>`` → the digest (or id) the engine has for each ``FROM`` image of the
        Dockerfile: what the trial records it ran on."""
        if context is None or not (context / spec.dockerfile).is_file():
            return {}
        out = {}
        for name in from_images((context / spec.dockerfile).read_text(errors="replace")):
            found = self._present(name)
            if found is not None:
                digests = found.attrs.get("RepoDigests") or []
                out[f"from:{name}"] = str(digests[0] if digests else found.id)
        return out

    def _storage(self, built: BuiltEnvironment, storage_mb: int) -> dict[str, Any]:
        """Container options that hold its writes to ``storage_mb``: the engine's size quota
        (``--storage-opt size``) where its storage driver has one, and, as on the local backend,
        no single file larger than the limit plus 16 MB (``RLIMIT_FSIZE``)."""
        fsize = (storage_mb + 16) << 20
        out: dict[str, Any] = {"ulimits": [{"Name": "fsize", "Soft": fsize, "Hard": fsize}]}
        if self._quota is None:
            driver = str((self.client.info() or {}).get("Driver", ""))
            self._quota = driver
        if self._quota == "":
            return out  # the engine refused quotas before
        size = storage_mb
        if self._quota == "btrfs":  # its quota counts the image's data as well
            image = self.client.images.get(built.key)
            size += int(image.attrs.get("Size") or 0) >> 20
        out["storage_opt"] = {"size": f"{size}M"}
        return out

    def start(self, built: BuiltEnvironment, spec: EnvironmentSpec) -> Session:
        if spec.network_mode == "allowlist":
            raise SandboxError("allowlist network mode is not supported by the docker backend yet")
        volumes: dict[str, dict[str, str]] = {}
        mounts: dict[str, str] = {}
        for point in MOUNT_POINTS:  # empty and read-only until mount() fills them
            volume = self.client.volumes.create(
                name=f"repogym-mount-{secrets.token_hex(8)}", labels={MOUNT_LABEL: point}
            )
            # Read-only; what the image itself has there (a separate verifier's image copies
            # its tests in) is copied into the volume when the container is created.
            volumes[volume.name] = {"bind": point, "mode": "ro"}
            mounts[point] = volume.name
        try:
            container = self._run(built, spec, volumes)
        except BaseException:
            for name in mounts.values():
                with contextlib.suppress(Exception):
                    self.client.volumes.get(name).remove(force=True)
            raise
        return DockerSession(self.client, container, built, spec, mounts)

    def _run(self, built: BuiltEnvironment, spec: EnvironmentSpec, volumes: dict[str, Any]) -> Any:
        """Start the session's container (its volumes already made)."""
        kwargs: dict[str, Any] = {
            "command": ["sleep", "infinity"],
            "detach": True,
            "working_dir": spec.workdir or built.workdir,
            "environment": dict(spec.env),
            "network_mode": "none"
            if spec.network_mode == "no-network"
            else (network_setting() or "bridge"),
            "pids_limit": DEFAULT_PIDS_LIMIT,
            "user": "root",
            # An init (the engine's tini) as the first process: killed processes are reaped,
            # not left as zombies under ``sleep infinity``.
            "init": True,
            "volumes": dict(volumes),
            "labels": dict(self.labels),
        }
        bundle = os.environ.get(_cabundle.ENV_VAR, "").strip()
        if bundle:  # --ca-bundle: mounted read-only, the usual variables point at it
            path = "/etc/ssl/repogym-ca-bundle.pem"
            kwargs["volumes"][str(Path(bundle).resolve())] = {"bind": path, "mode": "ro"}
            kwargs["environment"] = {**dict.fromkeys(_cabundle.VARIABLES, path), **spec.env}
        if spec.memory_mb:
            kwargs["mem_limit"] = f"{spec.memory_mb}m"
        if spec.cpus:
            kwargs["nano_cpus"] = int(spec.cpus * 1e9)
        if spec.storage_mb:
            kwargs.update(self._storage(built, spec.storage_mb))
        try:
            return self.client.containers.run(built.key, **kwargs)
        except Exception as exc:  # noqa: BLE001 - docker.errors.APIError, NotFound
            first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            if "storage-opt" in str(exc) or "storage opt" in str(exc):
                # This engine's storage driver has no size quota (overlay2 needs xfs mounted
                # with pquota): the per-file limit still holds; say so once.
                self._quota = ""
                _log.warning(
                    "the Docker engine cannot limit a container's storage (%s); storage_mb "
                    "holds per file only",
                    str(exc).split('("')[-1].split(": ")[-1].rstrip('")')[:160],
                )
                kwargs.pop("storage_opt", None)
                return self.client.containers.run(built.key, **kwargs)
            if "network" in first and "not found" in first:
                raise SandboxError(
                    f"the Docker engine has no {kwargs['network_mode']!r} network for a task "
                    f"with network; set {NETWORK_ENV}=host (or none), or give the engine a bridge"
                ) from None
            raise SandboxError(f"cannot start a container of {built.key[:19]}: {first}") from None


class DockerSession(Session):
    def __init__(
        self,
        client: Any,
        container: Any,
        built: BuiltEnvironment,
        spec: EnvironmentSpec,
        mounts: dict[str, str] | None = None,
    ):
        self.client = client
        self.container = container
        self.built = built
        self.spec = spec
        self.mounts = dict(mounts or {})
        """Mount point → the volume mounted read-only there (see :data:`MOUNT_POINTS`)."""
        self._fillers: dict[str, Any] = {}
        self._filled: set[str] = set()
        self.networked = spec.network_mode == "public"
        self.closed = False
        self.keeper: str | None = None
        """The PID of ``sleep infinity`` under the init, noted before anything else runs."""
        with contextlib.suppress(Exception):
            res = container.exec_run(["cat", "/proc/1/task/1/children"], user="root")
            words = (res.output or b"").decode().split()
            self.keeper = words[0] if len(words) == 1 else None

    def _set_network(self, want: bool) -> None:
        if want == self.networked:
            return
        if self.spec.network_mode == "no-network" and want:
            raise SandboxError("this environment was started without a network")
        setting = network_setting()
        if setting is not None:
            raise SandboxError(
                f"switching the network per phase needs the engine's bridge ({NETWORK_ENV}="
                f"{setting} gives a container one network for its whole life)"
            )
        name = "bridge"
        try:
            net = self.client.networks.get(name)
        except Exception:  # noqa: BLE001 - docker.errors.NotFound
            raise SandboxError(
                f"the Docker engine has no {name!r} network for a phase that needs one; set "
                f"{NETWORK_ENV}=host (or none), or give the engine a bridge"
            ) from None
        try:
            (net.connect if want else net.disconnect)(self.container)
        except Exception as exc:  # noqa: BLE001 - API errors
            first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise SandboxError(f"cannot switch the network to {name!r}: {first}") from None
        self.networked = want

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
        if network is not None:
            self._set_network(network)
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        if timeout_s:
            argv = ["timeout", "-k", "5", f"{timeout_s:g}", *argv]
        start = time.monotonic()
        res = self.container.exec_run(
            argv,
            workdir=cwd or self.spec.workdir or self.built.workdir,
            environment=env or {},
            user=user or self.built.user or "root",
            demux=True,
        )
        out, err = res.output if res.output else (b"", b"")
        code = res.exit_code
        elapsed = time.monotonic() - start
        # ``timeout`` exits 124 (137 after its -k): a timeout only when the limit was reached.
        # A command that exits 124 itself, kills itself with SIGKILL or is killed for memory
        # ends sooner and keeps its own status, as on the local backend.
        limit = timeout_s or 0.0
        timed_out = bool(timeout_s) and code in (124, 137) and elapsed >= limit * 0.98
        return ExecResult(
            exit_code=None if timed_out else code,
            stdout=(out or b"").decode("utf-8", "replace"),
            stderr=(err or b"").decode("utf-8", "replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def _resolve(self, path: str) -> str:
        """``path`` with its links followed, by the container itself (the host is never
        involved; a link names a path of the container's own tree)."""
        res = self.exec(["realpath", "-e", "--", path], user="root")
        if res.exit_code != 0:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return res.stdout.strip() or path

    def _check_beneath(self, path: str, beneath: str | None, user: str | None) -> None:
        """Refuse ``path`` when, links followed inside the container, it is not below
        ``beneath`` (resolved by the engine's container, so the host is never involved;
        a link changed between this check and the use could still redirect inside the
        container)."""
        if beneath is None:
            return
        script = 'b=$(realpath -m -- "$1") && p=$(realpath -m -- "$2") && echo "$b" && echo "$p"'
        res = self.exec(["sh", "-c", script, "sh", beneath, path], user=user or "root")
        lines = res.stdout.splitlines()
        if res.exit_code != 0 or len(lines) != 2:
            raise OSError(errno.EXDEV, "cannot resolve the path", path)
        base, real = lines
        if not (base == "/" or real == base or real.startswith(base.rstrip("/") + "/")):
            raise OSError(errno.EXDEV, f"{path} leads outside {beneath}", path)

    def read(
        self,
        path: str,
        *,
        user: str | None = None,
        beneath: str | None = None,
        _following: bool | None = False,
    ) -> bytes:
        self._check_beneath(path, beneath, user)
        if user not in (None, "root", "0") or _following is None:
            res = self.exec(["sh", "-c", 'base64 < "$1"', "sh", path], user=user or "root")
            if res.exit_code != 0:
                if "ermission denied" in res.stderr:
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
                if "s a directory" in res.stderr:
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
                raise FileNotFoundError(errno.ENOENT, res.stderr.strip()[:200], path)
            return base64.b64decode(res.stdout)
        try:
            stream, _stat = self.container.get_archive(path)
        except Exception:  # noqa: BLE001 - docker.errors.NotFound
            # Not in the container's file system (e.g. /proc, which the engine cannot archive):
            # read by the container's own shell, as root.
            return self.read(path, _following=None)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            if member is not None and member.issym() and not _following:
                return self.read(self._resolve(path), _following=True)
            if member is None or not member.isfile():
                raise IsADirectoryError(path)
            fh = tar.extractfile(member)
            return fh.read() if fh else b""

    def write(
        self,
        path: str,
        data: bytes | str,
        mode: int = 0o644,
        *,
        user: str | None = None,
        beneath: str | None = None,
    ) -> None:
        self._check_beneath(path, beneath, user)
        payload = data.encode() if isinstance(data, str) else data
        if user not in (None, "root", "0"):
            # Staged where only root can write, copied into place by the user's own shell.
            stage = f"/run/repogym-stage-{secrets.token_hex(8)}"
            self.write(stage, payload, mode=0o644)
            try:
                script = 'mkdir -p -- "$(dirname -- "$2")" && cat -- "$1" > "$2"'
                res = self.exec(["sh", "-c", script, "sh", stage, path], user=user)
            finally:
                self.remove(stage)
            if res.exit_code != 0:
                raise PermissionError(errno.EACCES, res.stderr.strip()[:200], path)
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(os.path.basename(path))
            info.size, info.mode = len(payload), mode
            tar.addfile(info, io.BytesIO(payload))
        parent = os.path.dirname(path) or "/"
        self.exec(["mkdir", "-p", parent], user="root")
        self.container.put_archive(parent, buf.getvalue())

    def mount(self, src: Path, dest: str, *, read_only: bool = True) -> None:
        """Show the host folder ``src`` at ``dest``: at a mount point (``/tests``) a read-only
        volume is filled with a copy (root-owned; writes inside fail with EROFS, root's too),
        elsewhere a plain copy is uploaded."""
        point = posixpath.normpath(dest)
        if point not in self.mounts or not read_only or not Path(src).is_dir():
            super().mount(src, dest, read_only=read_only)
            return
        self.unmount(point)  # whatever is there goes first, the image's own content too
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for child in sorted(Path(src).iterdir()):
                tar.add(str(child), arcname=child.name, filter=root_owned)
        self._filler(point).put_archive("/m", buf.getvalue())
        self._filled.add(point)

    def unmount(self, dest: str) -> None:
        point = posixpath.normpath(dest)
        if point not in self.mounts:
            super().unmount(dest)
            return
        if point not in self._filled:
            listed = self.exec(["sh", "-c", 'ls -A -- "$1" | head -n 1', "sh", point])
            if listed.stdout.strip():  # the image's own content, copied in at creation
                self._filled.add(point)
        if point in self._filled:  # emptied by its filler, the only writer of the volume
            filler = self._filler(point)
            filler.start()
            status = filler.wait(timeout=120)
            if int((status or {}).get("StatusCode", 1)) != 0:
                raise SandboxError(f"cannot empty {point}: its volume's cleaner failed")
            self._filled.discard(point)

    def _filler(self, point: str) -> Any:
        """A container (never running but to empty it) that has the volume of ``point``
        writable at ``/m``: the engine copies archives into it."""
        if point not in self._fillers:
            self._fillers[point] = self.client.containers.create(
                self.built.key,
                entrypoint=["sh", "-c", "find /m -mindepth 1 -delete"],
                command=[],
                volumes={self.mounts[point]: {"bind": "/m", "mode": "rw"}},
                network_mode="none",
                user="root",
                labels={MOUNT_LABEL: point},
            )
        return self._fillers[point]

    def _in_mount(self, path: str) -> tuple[str, str] | None:
        """(mount point, path below it: ``""`` for the point) when ``path`` is in a mount."""
        path = posixpath.normpath(path)
        for point in self.mounts:
            if path == point or path.startswith(point + "/"):
                return point, path[len(point) + 1 :]
        return None

    def _put_in_mount(self, point: str, entries: list[tuple[Path, str]], under: str) -> None:
        """Copy host entries into the volume of ``point`` at ``under`` (parents created), each
        ``(host path, name below under)``, root-owned, through its filler: the orchestrator's
        own writes there (Harbor's upload of the tests) while the task's container sees the
        folder read-only."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            parts = [p for p in under.split("/") if p]
            for i in range(len(parts)):
                info = tarfile.TarInfo("/".join(parts[: i + 1]))
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            for host, name in entries:
                arcname = posixpath.join(under, name) if under else name
                tar.add(str(host), arcname=arcname, recursive=False, filter=root_owned)
        self._filler(point).put_archive("/m", buf.getvalue())
        self._filled.add(point)

    def upload(self, src: Path, dest: str) -> None:
        inside = self._in_mount(dest)
        if inside is not None:
            point, rel = inside
            if not rel and Path(src).is_dir():
                self.mount(src, dest)  # the hidden tests' folder is read-only however it arrives
                return
            src = Path(src)
            entries = [(src, posixpath.basename(rel))]
            if src.is_dir():
                entries += [
                    (src / sub, posixpath.join(posixpath.basename(rel), sub))
                    for sub in sorted(str(p.relative_to(src)) for p in src.rglob("*"))
                ]
            self._put_in_mount(point, entries, posixpath.dirname(rel))
            return
        self.remove(dest)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(src), arcname=os.path.basename(dest.rstrip("/")))
        parent = os.path.dirname(dest.rstrip("/")) or "/"
        self.exec(["mkdir", "-p", parent], user="root")
        self.container.put_archive(parent, buf.getvalue())

    def download(self, src: str, dest: Path) -> None:
        """Copy a container file or folder out to ``dest`` (replaced if present): the
        engine's archive is unpacked by the confined unpacker into a fresh folder beside
        ``dest`` (links kept as written, never followed; devices skipped; setuid bits
        dropped), then moved into place. Nothing else beside ``dest`` is touched."""
        dest = Path(dest)
        stream, _ = self.container.get_archive(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name[:40]}.", dir=dest.parent))
        try:
            top = unpack_engine_archive(stream, tmp / "x")
            if top is None:
                raise FileNotFoundError(errno.ENOENT, "the engine sent an empty archive", src)
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            os.rename(tmp / "x" / top, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def remove(self, path: str) -> None:
        if posixpath.normpath(path) in self.mounts:
            self.unmount(path)
            return
        self.exec(f"rm -rf -- {shlex.quote(path)}", user="root")

    def export_changes(self, root: str, dest: Path) -> ChangeSet:
        """The container's changes under ``root`` from the engine's diff (``docker diff``),
        content fetched with ``get_archive``; nothing runs inside the container."""
        return export_engine_changes(self.container, root, dest)

    def merge(self, src: Path, dest: str, paths: Iterable[str]) -> None:
        """One tar of the listed paths of ``src`` unpacked at ``dest`` by the engine."""
        inside = self._in_mount(dest)
        if inside is not None:
            point, rel = inside
            self._put_in_mount(point, [(Path(src, p), p) for p in paths], rel)
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for rel in paths:
                tar.add(str(Path(src, rel)), arcname=rel, recursive=False)
        self.exec(["mkdir", "-p", dest], user="root")
        self.container.put_archive(dest, buf.getvalue())

    def kill_all(self) -> None:
        """Kill every process but the init (PID 1) and the ``sleep infinity`` that keeps the
        container alive (noted when the session started), three passes against processes
        started meanwhile."""
        script = (
            "for _ in 1 2 3; do for p in /proc/[0-9]*; do p=${p#/proc/}; "
            'case "$p" in 1|"$KEEP"|$$) ;; *) kill -9 "$p" 2>/dev/null;; esac; done; done; true'
        )
        self.container.exec_run(
            ["sh", "-c", script], user="root", environment={"KEEP": self.keeper or "1"}
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for thing in [self.container, *self._fillers.values()]:
            with contextlib.suppress(Exception):  # already gone
                thing.remove(force=True)
        for name in self.mounts.values():
            with contextlib.suppress(Exception):
                self.client.volumes.get(name).remove(force=True)
