"""The ``local`` sandbox backend: Harbor tasks on this machine, no Docker daemon.

* **build** replays the task's Dockerfile step by step (:mod:`._replay`). ``FROM`` is mapped onto
  the host's matching toolchain (:mod:`._toolchains`); ``RUN`` runs in a sandbox over the layers
  built so far; ``COPY``/``ADD`` copy from the build context. Every step that changes files becomes
  a cached layer (:mod:`._layers`), keyed like Docker's build cache (and shared with other
  machines through ``$REPOGYM_SHARED_CACHE``, :mod:`._shared_cache`). A step runs under a
  session's limits (its upper on a tmpfs of the storage limit, copied into the layer once it
  succeeded); symlinks never lead a copy out of the context, ``ADD`` archives are bounded, and
  setuid bits and special files never reach the host's layer cache (:mod:`._layerfs`).
* **host probing** (bubblewrap, slirp4netns, rootless user namespaces, memory) is :mod:`._host`.
* **start** mounts a fresh copy-on-write root (overlayfs, upper layer on a size-limited tmpfs)
  over those layers and the read-only base — host ``/usr`` plus a minimal ``/etc``, ``/var``,
  ``/opt`` (:mod:`._rootfs`) — inside bubblewrap namespaces (pid, ipc, uts, mount, net; a
  networked sandbox is wired out by slirp4netns, never the host's network namespace). Commands
  are forked by a session server that already lives in those namespaces (:mod:`._forkserver`),
  so an exec costs one fork, not a new sandbox.
* **limits**: cgroups (pids, memory, cpu; v2 or v1, whatever the host allows; :mod:`._cgroups`),
  tmpfs size for storage, ``RLIMIT_FSIZE`` for file size, Docker's default capability set. A
  timeout kills the command's whole process tree (its own cgroup); closing kills everything.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from repogym.sandbox import _cabundle, _context, _host, _rootfs, _shared_cache, _toolchains
from repogym.sandbox._cgroups import SessionCgroups, cleanup_stale, detect
from repogym.sandbox._host import default_cache_root
from repogym.sandbox._image_run import build_from_image
from repogym.sandbox._layers import LayerStore
from repogym.sandbox._netns import SharedNetwork
from repogym.sandbox._pull import ImageStore, registries_from_env, runtime_dir
from repogym.sandbox._replay import Builder
from repogym.sandbox._runtime import ForkServer, RawResult, SandboxProcess, interrupted
from repogym.sandbox.base import (
    BuildError,
    BuiltEnvironment,
    ChangeSet,
    DirEntry,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxError,
    Session,
)

DEFAULT_STORAGE_MB = 10240
DEFAULT_MEMORY_MB = 8192
DEFAULT_PIDS = 4096
DEFAULT_EXEC_TIMEOUT_S = 3600.0
_ALLOWLIST_MSG = (
    "allowlist network mode is not supported by the local backend (it cannot filter hosts); "
    "use network_mode public or no-network, or --sandbox docker"
)


class LocalSandbox(Sandbox):
    """Sandboxes on this host: bubblewrap namespaces + overlayfs + cgroups, no Docker daemon."""

    name = "local"

    def __init__(
        self,
        cache_dir: Path | str | None = None,
        *,
        pids_max: int = DEFAULT_PIDS,
        default_storage_mb: int = DEFAULT_STORAGE_MB,
        default_memory_mb: int | None = DEFAULT_MEMORY_MB,
        exec_timeout_s: float = DEFAULT_EXEC_TIMEOUT_S,
        max_file_mb: int | None = None,
        registries: Mapping[str, str] | None = None,
        ca_bundle: Path | str | None = None,
    ) -> None:
        """``registries`` maps registry hosts (``docker.io``, ``ghcr.io``, ``*`` for all) to
        endpoints images are pulled from (default: ``$REPOGYM_REGISTRY_MIRROR``, see
        :mod:`._pull`); images without one are mapped onto the host. ``ca_bundle`` (default:
        ``$REPOGYM_CA_BUNDLE``) is offered to every sandbox (see :mod:`._cabundle`)."""
        ok, why = self.available()
        if not ok:
            raise SandboxError(why)
        self.bwrap = _host.find_bwrap() or _host.BWRAP
        self.cache_root = Path(cache_dir).expanduser() if cache_dir else default_cache_root()
        self.cache_root.mkdir(parents=True, exist_ok=True)
        real = self.cache_root.resolve()
        for part in _rootfs.base_dirs():
            base = Path("/", part)
            if real == base or base in real.parents:
                raise SandboxError(
                    f"the repogym cache ({real}) must not live inside {base}, which sandboxes "
                    "see as their base system; set REPOGYM_CACHE elsewhere"
                )
        self.store = LayerStore(self.cache_root / "layers")
        # Layers other nodes built ($REPOGYM_SHARED_CACHE); None (no calls at all) when unset.
        self.shared = _shared_cache.from_env(self.cache_root)
        self.images = self.cache_root / "images"
        self.images.mkdir(exist_ok=True)
        self.mountpoint = self.cache_root / "run" / "mnt"
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.skeleton = _rootfs.ensure_skeleton(self.cache_root)
        self.opt_binds = [f"/opt/{name}" for name in _toolchains.opt_toolchain_dirs()]
        self.bases = _rootfs.ensure_root(
            self.cache_root, tuple(Path(b).name for b in self.opt_binds)
        )
        self.empty_file = self.cache_root / "run" / "empty"
        self.empty_file.touch(exist_ok=True)
        self.rootless = os.geteuid() != 0
        self.cgroups = detect()
        cleanup_stale()
        self.store.prune_tmp()
        self.pids_max = pids_max
        self.default_storage_mb = default_storage_mb
        mem_cap = int(_host.memtotal_mb() * 0.75)
        self.default_memory_mb = min(default_memory_mb, mem_cap) if default_memory_mb else None
        self.exec_timeout_s = exec_timeout_s
        self.max_file_mb = max_file_mb
        self.registries = dict(registries if registries is not None else registries_from_env())
        self.oci = ImageStore(self.cache_root / "oci")
        self.oci.shared = self.shared
        try:
            self.ca_bundle = (
                _cabundle.load(ca_bundle, self.cache_root)
                if ca_bundle is not None
                else _cabundle.from_env(self.cache_root)
            )
        except _cabundle.CaBundleError as exc:
            raise SandboxError(str(exc)) from None
        self.ca_env = self.ca_bundle.env if self.ca_bundle else {}

    @classmethod
    def available(cls, *, install: bool = True) -> tuple[bool, str]:
        """True when bubblewrap and root privileges are there (installs bwrap as root)."""
        if not Path("/proc/self/ns/mnt").exists():
            return False, "the local sandbox needs Linux namespaces"
        if _host.find_bwrap() is None and not (
            install and os.geteuid() == 0 and _host.install_bwrap()
        ):
            return False, f"bubblewrap (bwrap) is missing: {_host.INSTALL_HINT}"
        if os.geteuid() != 0:
            return _host.rootless_ok()
        return True, ""

    def base_rlimits(self, pids: int) -> dict[str, int]:
        """Resource limits every command gets (``RLIMIT_NPROC`` stands in for cgroups when
        rootless: it counts per user namespace, i.e. per sandbox)."""
        limits = {"RLIMIT_CORE": 0}
        if self.rootless:
            limits["RLIMIT_NPROC"] = pids
        return limits

    # ------------------------------------------------------------------------------ build

    def preflight(self, spec: EnvironmentSpec) -> list[str]:
        """What :meth:`build` would refuse for ``spec`` and why (one line each), found without
        building or pulling: Dockerfile constructs it cannot replay and base images that
        neither a configured registry nor the host mapping can provide. A task published with
        its image (``image_first``) is judged by the image when it runs, not by its Dockerfile."""
        if spec.image_first and spec.docker_image:
            return []
        try:
            with _context.dockerfile_of(spec) as (ctx, dockerfile):
                return Builder(self, spec, ctx, dockerfile, None).refusals()
        except BuildError as exc:
            return [str(exc)]

    def build(self, spec: EnvironmentSpec, *, log: Path | None = None) -> BuiltEnvironment:
        """Replay the Dockerfile of ``spec`` into cached layers (a prebuilt ``docker_image``
        alone is built as ``FROM <image>``; with ``image_first``, see :mod:`._image_run`)."""
        fallback = ""
        if spec.image_first and spec.docker_image:
            built, fallback = build_from_image(self, spec, log)
            if built is not None:
                return built
        with _context.dockerfile_of(spec) as (ctx, dockerfile):
            built = self._build(spec, ctx, dockerfile, log)
        if fallback:
            built.base_mapping["image_fallback"] = fallback
        return built

    def _build(
        self, spec: EnvironmentSpec, ctx: Path, dockerfile: Path, log: Path | None
    ) -> BuiltEnvironment:
        self.store.prune_tmp()
        log_fh: IO[str] | None = None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log_fh = open(log, "a", encoding="utf-8")  # noqa: SIM115 - closed below
        try:
            builder = Builder(self, spec, ctx, dockerfile, log_fh)
            return builder.run()
        except BuildError as exc:
            if log_fh is not None:
                log_fh.write(f"\nBUILD FAILED: {exc}\n")
            raise
        finally:
            if log_fh is not None:
                log_fh.close()

    def start_process(
        self,
        layers: list[tuple[str, list[str]]],
        *,
        network: bool,
        upper_dir: Path | None = None,
        storage_mb: int | None = None,
        memory_mb: int | None = None,
        cpus: float | None = None,
        pids_max: int | None = None,
        rootfs: Path | None = None,
        shared: SharedNetwork | None = None,
    ) -> SandboxProcess:
        if interrupted():
            raise SandboxError("the run was interrupted: no sandbox starts")
        storage_bytes = (storage_mb or self.default_storage_mb) << 20
        image = None
        if rootfs is not None:
            runtime = runtime_dir(self.oci.root, _rootfs.SANDBOX_HOSTNAME, _rootfs.SANDBOX_DNS)
            image = [runtime, rootfs]
        try:
            plan = _rootfs.plan_mounts(
                layers_dir=self.store.root,
                layers=layers,
                skeleton=self.skeleton,
                mountpoint=self.mountpoint,
                upper_dir=upper_dir,
                storage_bytes=storage_bytes,
                rootless=self.rootless,
                bases=self.bases,
                binds=self.opt_binds,
                image=image,
            )
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        slirp = _host.slirp_argv() if network and shared is None else None
        bwrap = [
            self.bwrap,
            "--bind",
            plan.root,
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--ro-bind-try",
            "/sys",
            "/sys",
            *self._hardening(),
            *(self.ca_bundle.bwrap_args() if self.ca_bundle else []),
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--hostname",
            _rootfs.SANDBOX_HOSTNAME,
            # Always a network namespace of its own (with a network, slirp4netns wires it
            # out), or the one a task's services share (``shared``), never the host's.
            *(["--unshare-net"] if shared is None else []),
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--info-fd",
            "{INFO_FD}",
            "--chdir",
            "/",
            "--",
            "sleep",
            "infinity",
        ]
        cgroups = None
        if self.cgroups.can_track or self.cgroups.v1:
            memory = memory_mb if memory_mb is not None else None
            cgroups = SessionCgroups(
                self.cgroups,
                pids_max=pids_max or self.pids_max,
                memory_bytes=(memory << 20) if memory else None,
                cpus=cpus,
            )
        try:
            return ForkServer.get().start(
                plan=plan.to_request(),
                bwrap=bwrap,
                network=network,
                cgroups=cgroups,
                slirp=slirp,
                netns_factory=self._netns_for_command,
                netns_fd=shared.fd if shared is not None else None,
            )
        except BaseException:
            if cgroups is not None:
                cgroups.destroy()
            raise

    def _netns_for_command(self) -> tuple[int, int]:
        """A slirp4netns-wired namespace for ``exec(..., network=True)`` in a session without."""
        if self.rootless:
            raise SandboxError(
                "without root a command cannot get a network in a session started without one; "
                "start the session with network_mode public"
            )
        return ForkServer.get().netns(_host.slirp_argv())

    def _hardening(self) -> list[str]:
        """Docker's read-only and masked ``/proc`` and ``/sys`` paths, as bwrap arguments.

        Commands run as root: writable sysctls (``/proc/sys/kernel/core_pattern`` …) or
        ``/proc/sysrq-trigger`` would reach the host.
        """
        args = ["--ro-bind", "/proc/sys", "/proc/sys"]
        if os.path.exists("/proc/sysrq-trigger"):
            args += ["--ro-bind", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
        for name in ("kcore", "keys", "timer_list", "timer_stats", "sched_debug", "latency_stats"):
            if os.path.exists(f"/proc/{name}"):
                args += ["--ro-bind", str(self.empty_file), f"/proc/{name}"]
        for name in ("acpi", "scsi", "asound"):
            if os.path.isdir(f"/proc/{name}"):
                args += ["--tmpfs", f"/proc/{name}"]
        if os.path.isdir("/sys/firmware"):
            args += ["--tmpfs", "/sys/firmware"]
        return args

    # ------------------------------------------------------------------------------ start

    def _rootfs_of(self, built: BuiltEnvironment) -> Path | None:
        """The pulled image root a build stands on (None: the host base)."""
        raw = built.details.get("rootfs")
        if raw is None and "layers" not in built.details:
            manifest = self.images / f"{built.key}.json"
            if manifest.is_file():
                raw = json.loads(manifest.read_text()).get("rootfs")
        if not raw:
            return None
        path = Path(str(raw))
        if not path.is_dir():
            raise SandboxError(f"pulled image root {path} is missing from the cache; rebuild")
        return path

    def _layers_of(self, built: BuiltEnvironment) -> list[tuple[str, list[str]]]:
        raw: Any = built.details.get("layers")  # JSON: [[key, [part, ...]], ...]
        if raw is None:
            manifest = self.images / f"{built.key}.json"
            if not manifest.is_file():
                raise SandboxError(
                    f"environment {built.key[:12]} is not in the local cache; build it again"
                )
            raw = json.loads(manifest.read_text())["layers"]
        layers = [(str(k), list(p)) for k, p in raw]
        for key, _parts in layers:
            if not self.store.exists(key):
                raise SandboxError(f"layer {key[:12]} is missing from the local cache; rebuild")
        return layers

    def shared_network(self, *, public: bool) -> SharedNetwork:
        """A network namespace several sessions join (a task's main session and sidecars):
        wired out by one slirp4netns when ``public``, else loopback only. Close it after the
        sessions."""
        if self.rootless:
            raise SandboxError("sessions sharing a network (compose sidecars) need root")
        fd, exit_fd = ForkServer.get().netns(_host.slirp_argv() if public else [])
        return SharedNetwork(fd, exit_fd, public)

    def start(
        self,
        built: BuiltEnvironment,
        spec: EnvironmentSpec,
        *,
        shared: SharedNetwork | None = None,
    ) -> LocalSession:
        """A fresh copy-on-write root over ``built``, discarded on close; in the network
        namespace ``shared`` when given (whose mode then wins over the spec's)."""
        if spec.network_mode == "allowlist":
            raise SandboxError(_ALLOWLIST_MSG)
        network = spec.network_mode == "public" if shared is None else shared.public
        storage_mb = spec.storage_mb or self.default_storage_mb
        memory_mb = spec.memory_mb or self.default_memory_mb
        proc = self.start_process(
            self._layers_of(built),
            network=network,
            storage_mb=storage_mb,
            memory_mb=memory_mb,
            cpus=spec.cpus,
            rootfs=self._rootfs_of(built),
            shared=shared,
        )
        session = LocalSession(self, proc, built, spec, storage_mb=storage_mb, memory_mb=memory_mb)
        if spec.workdir:
            # Like ``docker run -w``: the working directory exists even if the image lacks it.
            try:
                proc.file_op("mkdir", path=session.workdir, owner=built.user)
            except BaseException:
                session.close()
                raise
        return session


# ------------------------------------------------------------------------------------ session


class LocalSession(Session):
    """A running local sandbox."""

    def __init__(
        self,
        sandbox: LocalSandbox,
        proc: SandboxProcess,
        built: BuiltEnvironment,
        spec: EnvironmentSpec,
        *,
        storage_mb: int,
        memory_mb: int | None,
    ) -> None:
        self.sandbox = sandbox
        self.proc = proc
        self.built = built
        self.spec = spec
        self.env = _cabundle.resolve_env(
            sandbox.ca_bundle,
            {**built.env, **spec.env},
            lambda path: bool(proc.file_op("stat", path=path)),
        )
        self.env.setdefault("PATH", _toolchains.DEFAULT_PATH)
        self.workdir = spec.workdir or built.workdir or "/"
        self.user = built.user
        self.network = proc.network
        max_file_mb = sandbox.max_file_mb or storage_mb + 16
        self.rlimits = {
            **sandbox.base_rlimits(sandbox.pids_max),
            "RLIMIT_FSIZE": max_file_mb << 20,
        }
        if (proc.cgroups is None or "memory" not in proc.cgroups.limited) and memory_mb:
            self.rlimits["RLIMIT_AS"] = memory_mb << 20
        self._mounts: set[str] = set()
        # A session dropped without close() (or still open at exit) is still torn down.
        self._finalizer = weakref.finalize(self, proc.close)

    @property
    def init_pid(self) -> int:
        """Host pid of the sandbox's init process (its ``/proc/<pid>/root`` is the root)."""
        return self.proc.init_pid

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
        """Run a command (a string goes through ``bash -c``); the timeout kills its tree."""
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty command")
        raw = self._run(argv, timeout_s=timeout_s, env=env, cwd=cwd, user=user, network=network)
        if raw.error and isinstance(command, str) and raw.error.endswith("not found: bash"):
            argv = ["sh", "-c", command]
            raw = self._run(argv, timeout_s=timeout_s, env=env, cwd=cwd, user=user, network=network)
        return _to_result(raw)

    def _run(
        self,
        argv: list[str],
        *,
        timeout_s: float | None,
        env: dict[str, str] | None,
        cwd: str | None,
        user: str | None,
        network: bool | None,
    ) -> RawResult:
        full_env = {**self.env, **(env or {})}
        return self.proc.exec(
            argv,
            env=full_env,
            cwd=cwd or self.workdir,
            user=user or self.user or "root",
            network=None if network is None or network == self.network else network,
            rlimits=self.rlimits,
            timeout_s=timeout_s if timeout_s is not None else self.sandbox.exec_timeout_s,
        )

    @staticmethod
    def _abs(path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"sandbox paths must be absolute: {path!r}")
        return _context.posix_join("/", path)

    def read(self, path: str, *, user: str | None = None, beneath: str | None = None) -> bytes:
        """Contents of a regular file inside the sandbox, looked up confined to its root."""
        return self.proc.file_op(  # type: ignore[return-value]
            "read", path=self._abs(path), data_out=True, as_user=user, beneath=_opt_abs(beneath)
        )

    def write(
        self,
        path: str,
        data: bytes | str,
        mode: int = 0o644,
        *,
        user: str | None = None,
        beneath: str | None = None,
    ) -> None:
        """Write a file inside the sandbox (see :meth:`Session.write`)."""
        payload = data.encode() if isinstance(data, str) else data
        self.proc.file_op(
            "write",
            path=self._abs(path),
            data_in=payload,
            mode=mode,
            as_user=user,
            beneath=_opt_abs(beneath),
            in_place=user is not None or None,
        )

    def listdir(
        self, path: str, *, user: str | None = None, beneath: str | None = None
    ) -> list[DirEntry]:
        """The entries of a folder inside the sandbox (links not followed)."""
        raw: Any = self.proc.file_op(
            "list", path=self._abs(path), as_user=user, beneath=_opt_abs(beneath)
        )
        return [DirEntry(str(n), k, int(z)) for n, k, z in raw]

    def upload(self, src: Path, dest: str) -> None:
        """Copy a host file, folder or symlink to ``dest`` (created, replaced if present),
        owned by root. Links are recreated, never followed, ``src`` itself included: what
        was downloaded from one sandbox may be uploaded to another without the host
        following a link it planted."""
        src = Path(src)
        st = os.lstat(src)  # FileNotFoundError when absent
        if stat.S_ISLNK(st.st_mode):
            flags = os.O_PATH | os.O_NOFOLLOW
        elif stat.S_ISDIR(st.st_mode):
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        else:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(src, flags)
        try:
            self.proc.file_op("copy_in", path=self._abs(dest), fds=[fd], replace=True, owner="0:0")
        finally:
            os.close(fd)

    def download(self, src: str, dest: Path) -> None:
        """Copy a sandbox file or folder out to ``dest`` on the host (replaced if present).

        The sandbox side is looked up confined to its root; on the host only the entry
        ``dest`` is created (links recreated, never followed; setuid/setgid bits dropped).
        """
        dest = Path(dest)
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif dest.exists() or dest.is_symlink():
            dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(dest.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.proc.file_op("copy_out", path=self._abs(src), fds=[fd], name=dest.name)
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        """Remove a file or folder inside the sandbox (no error when absent)."""
        p = self._abs(path)
        if p in self._mounts:
            self.unmount(p)
        else:
            self.proc.file_op("remove", path=p)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists inside the sandbox."""
        return self.proc.file_op("stat", path=self._abs(path)) is not None

    def mount(self, src: Path, dest: str, *, read_only: bool = True) -> None:
        """Bind a host folder into the running sandbox at ``dest`` (undo with :meth:`unmount`).

        Unlike :meth:`upload` nothing is copied: the sandbox sees the host folder itself, so
        use ``read_only=True`` (the default) unless it should write back to the host.
        """
        from repogym.sandbox import _mountapi

        fd = _mountapi.clone_tree(Path(src), read_only=read_only)
        try:
            self.proc.file_op("mount", path=self._abs(dest), fds=[fd])
        finally:
            os.close(fd)
        self._mounts.add(self._abs(dest))

    def unmount(self, dest: str) -> None:
        """Detach a folder added with :meth:`mount` and remove its (empty) mount point."""
        p = self._abs(dest)
        self.proc.file_op("umount", path=p)
        self._mounts.discard(p)
        self.proc.file_op("remove", path=p)

    def export_changes(self, root: str, dest: Path) -> ChangeSet:
        """The session's changes under ``root``, read from its copy-on-write upper layer on the
        host side (see :mod:`._upper`); call :meth:`kill_all` first."""
        from repogym.sandbox import _upper

        norm = self._abs(root)
        first, _, rest = norm.strip("/").partition("/")
        if not first:
            raise SandboxError("changes can only be exported for a folder below /, not / itself")
        if first in _rootfs.base_dirs() and not self.built.details.get("rootfs"):
            part, rel = first, rest
        else:
            part, rel = _rootfs.ROOT_PART, norm.strip("/")
        base = Path(f"/proc/{self.proc.bwrap_pid}/root") / self.sandbox.mountpoint.relative_to("/")
        if self.proc.closed or not (base / "u").is_dir():
            raise SandboxError("the session is gone: its changes cannot be read")
        changes = _upper.read_upper(base / "u" / part, base / "root", rel, Path(dest))
        return ChangeSet(norm, changes, Path(dest))

    def merge(self, src: Path, dest: str, paths: Iterable[str]) -> None:
        """Copy the listed paths of host folder ``src`` into ``dest`` in one bulk copy (parent
        folders of each path come along; everything else in ``dest`` stays)."""
        include: set[str] = set()
        for rel in paths:
            parts = rel.strip("/").split("/")
            include.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
            include.add("/".join(parts))
        if not include:
            return
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.proc.file_op(
                "copy_in", path=self._abs(dest), fds=[fd], include=include, replace=False
            )
        finally:
            os.close(fd)

    def kill_all(self) -> None:
        """Kill every process started by :meth:`exec` (background jobs and daemons too).

        The root, its files and the session stay: use this between phases (e.g. before the
        verifier) so nothing the agent left running can interfere.
        """
        self.proc.kill_all()

    def host_pids(self) -> list[int]:
        """Host pids of every process of this session (empty after close)."""
        pids: set[int] = set()
        cg = self.proc.cgroups
        if cg is None:
            return []
        for d, _v2 in cg.dirs:
            for sub in [d, *d.rglob("*")] if d.exists() else []:
                with contextlib.suppress(OSError, ValueError):
                    pids.update(int(x) for x in (sub / "cgroup.procs").read_text().split())
        return sorted(pids)

    def close(self) -> None:
        """Kill every process of the session and discard its root. Idempotent."""
        self._finalizer()


def _opt_abs(path: str | None) -> str | None:
    return None if path is None else LocalSession._abs(path)


def _to_result(raw: RawResult) -> ExecResult:
    stdout = raw.stdout.decode("utf-8", errors="replace")
    stderr = raw.stderr.decode("utf-8", errors="replace")
    code = raw.exit_code
    if raw.error and not raw.timed_out:
        stderr = (stderr + ("\n" if stderr and not stderr.endswith("\n") else "")) + raw.error
        code = 127 if "not found" in raw.error else 126
    elif code is None and raw.signal is not None and not raw.timed_out:
        code = 128 + raw.signal
    return ExecResult(
        exit_code=code,
        stdout=stdout,
        stderr=stderr,
        duration_s=raw.duration_s,
        timed_out=raw.timed_out,
    )


__all__ = ["LocalSandbox", "LocalSession", "default_cache_root"]
