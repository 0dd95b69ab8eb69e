"""The ``local`` sandbox backend: Harbor tasks on this machine, no Docker daemon.

* **build** replays the task's Dockerfile step by step. ``FROM`` is mapped onto the host's
  matching toolchain (:mod:`._toolchains`); ``RUN`` runs in a sandbox over the layers built so
  far; ``COPY``/``ADD`` copy from the build context. Every step that changes files becomes a
  cached layer (:mod:`._layers`), keyed like Docker's build cache. A step runs under a
  session's limits (its upper on a tmpfs of the storage limit, copied into the layer once it
  succeeded); symlinks never lead a copy out of the context, ``ADD`` archives are bounded, and
  setuid bits and special files never reach the host's layer cache (``_Builder``).
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
import fnmatch
import json
import lzma
import os
import posixpath
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from repogym import dockerfile as _dockerfile
from repogym.sandbox import (
    _cabundle,
    _context,
    _images,
    _pull,
    _registry,
    _rootfs,
    _toolchains,
    _unpack,
)
from repogym.sandbox._cgroups import SessionCgroups, cleanup_stale, detect
from repogym.sandbox._layers import LayerStore, step_key
from repogym.sandbox._netns import SharedNetwork
from repogym.sandbox._pull import ImageStore, registries_from_env, runtime_dir
from repogym.sandbox._runtime import ForkServer, RawResult, SandboxProcess
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

BWRAP = "/usr/bin/bwrap"
DEFAULT_STORAGE_MB = 10240
DEFAULT_MEMORY_MB = 8192
DEFAULT_PIDS = 4096
MAX_ARCHIVE_MEMBERS = 100_000
"""``ADD`` refuses archives with more members than this (their bytes are bounded by storage)."""
_FULL_BYTES = 256 << 10
"""A build step's upper layer with less free space than this is over its storage limit."""
DEFAULT_EXEC_TIMEOUT_S = 3600.0
_INSTALL_HINT = "install the Debian package `bubblewrap` (apt-get install bubblewrap)"
SLIRP4NETNS = "/usr/bin/slirp4netns"
# User-mode networking for sandboxes: no route to the host's loopback (10.0.2.2 is not mapped
# to it), its own mount namespace and a seccomp filter for slirp4netns itself.
SLIRP_FLAGS = (
    "--configure",
    "--mtu=65520",
    "--disable-host-loopback",
    "--enable-sandbox",
    "--enable-seccomp",
)
_SLIRP_HINT = "install the Debian package `slirp4netns` (apt-get install slirp4netns)"
_ALLOWLIST_MSG = (
    "allowlist network mode is not supported by the local backend (it cannot filter hosts); "
    "use network_mode public or no-network, or --sandbox docker"
)
_install_lock = threading.Lock()


def default_cache_root() -> Path:
    """``$REPOGYM_CACHE`` or ``~/.cache/repogym``."""
    env = os.environ.get("REPOGYM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "repogym"


def _find_bwrap() -> str | None:
    if os.access(BWRAP, os.X_OK):
        return BWRAP
    return shutil.which("bwrap")


def _apt_install(package: str, find: Callable[[], str | None]) -> str | None:
    """``apt-get install -y PACKAGE`` (after ``apt-get update`` if needed), as root."""
    with _install_lock:
        if find():
            return find()
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            return None
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", package]
        run = subprocess.run(cmd, env=env, capture_output=True, timeout=600)
        if run.returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
            subprocess.run(cmd, env=env, capture_output=True, timeout=600)
        return find()


def _install_bwrap() -> str | None:
    """``apt-get install -y bubblewrap`` (after ``apt-get update`` if needed), as root."""
    return _apt_install("bubblewrap", _find_bwrap)


def _find_slirp() -> str | None:
    if os.access(SLIRP4NETNS, os.X_OK):
        return SLIRP4NETNS
    return shutil.which("slirp4netns")


def slirp_argv(*, install: bool = True) -> list[str]:
    """The slirp4netns command line of networked sandboxes (target pid and tap name follow).

    Installs the Debian package as root when it is missing; raises :class:`SandboxError` with
    a one-line message when it cannot be had (never a fallback to the host's network).
    """
    path = _find_slirp() or (_apt_install("slirp4netns", _find_slirp) if install else None)
    if path is None:
        raise SandboxError(f"slirp4netns is missing: networked sandboxes need it; {_SLIRP_HINT}")
    return [path, *SLIRP_FLAGS]


_rootless_check: tuple[bool, str] | None = None


def _rootless_ok() -> tuple[bool, str]:
    """Whether unprivileged user namespaces with overlayfs work here (checked once)."""
    global _rootless_check
    if _rootless_check is None:
        release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
        if release < (5, 11):
            _rootless_check = (False, "without root the local sandbox needs Linux >= 5.11")
        else:
            probe = subprocess.run(
                [_find_bwrap() or BWRAP, "--ro-bind", "/", "/", "--unshare-user", "true"],
                capture_output=True,
                timeout=30,
            )
            _rootless_check = (
                (True, "")
                if probe.returncode == 0
                else (
                    False,
                    "without root the local sandbox needs unprivileged user namespaces "
                    "(sysctl kernel.unprivileged_userns_clone=1); or run as root",
                )
            )
    return _rootless_check


def _memtotal_mb() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 8192


@dataclass
class _Config:
    """The image configuration as the Dockerfile builds it up."""

    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str | None = None
    shell: list[str] = field(default_factory=lambda: ["/bin/sh", "-c"])
    cmd: list[str] | None = None
    entrypoint: list[str] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    exposed: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    stopsignal: str | None = None
    healthcheck: str | None = None
    onbuild: list[str] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)

    def copy(self) -> _Config:
        return _Config(
            env=dict(self.env),
            workdir=self.workdir,
            user=self.user,
            shell=list(self.shell),
            cmd=list(self.cmd) if self.cmd is not None else None,
            entrypoint=list(self.entrypoint) if self.entrypoint is not None else None,
            labels=dict(self.labels),
            exposed=list(self.exposed),
            volumes=list(self.volumes),
            stopsignal=self.stopsignal,
            healthcheck=self.healthcheck,
            onbuild=list(self.onbuild),
            args=dict(self.args),
        )

    def vars(self) -> dict[str, str]:
        """Variables visible to word expansion: ARG values, overridden by ENV."""
        return {**self.args, **self.env}


@dataclass
class _Stage:
    name: str | None
    from_ins: _dockerfile.Instruction
    body: list[_dockerfile.Instruction]


@dataclass
class _State:
    key: str
    layers: list[tuple[str, list[str]]]
    config: _Config
    base: _toolchains.BaseImage


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
        self.bwrap = _find_bwrap() or BWRAP
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
        mem_cap = int(_memtotal_mb() * 0.75)
        self.default_memory_mb = min(default_memory_mb, mem_cap) if default_memory_mb else None
        self.exec_timeout_s = exec_timeout_s
        self.max_file_mb = max_file_mb
        self.registries = dict(registries if registries is not None else registries_from_env())
        self.oci = ImageStore(self.cache_root / "oci")
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
        if _find_bwrap() is None and not (install and os.geteuid() == 0 and _install_bwrap()):
            return False, f"bubblewrap (bwrap) is missing: {_INSTALL_HINT}"
        if os.geteuid() != 0:
            return _rootless_ok()
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
        neither a configured registry nor the host mapping can provide."""
        try:
            with self._dockerfile_of(spec) as (ctx, dockerfile):
                return _Builder(self, spec, ctx, dockerfile, None).refusals()
        except BuildError as exc:
            return [str(exc)]

    @contextlib.contextmanager
    def _dockerfile_of(self, spec: EnvironmentSpec) -> Iterator[tuple[Path, Path]]:
        """``(context, Dockerfile)`` of ``spec``; a prebuilt image alone (``docker_image``)
        becomes a one-line ``FROM`` in an empty context (pulled, or mapped onto the host)."""
        ctx = spec.context_dir
        dockerfile = Path(ctx, spec.dockerfile) if ctx is not None else None
        if dockerfile is None or not dockerfile.is_file():
            if not spec.docker_image:
                raise BuildError(f"no Dockerfile found at {dockerfile or '(no context dir)'}")
            if "\n" in spec.docker_image or not spec.docker_image.strip():
                raise BuildError(f"invalid docker_image {spec.docker_image!r}")
            with tempfile.TemporaryDirectory(prefix="repogym-image-") as tmp:
                path = Path(tmp, "Dockerfile")
                path.write_text(f"FROM {spec.docker_image.strip()}\n", encoding="utf-8")
                yield Path(tmp), path
            return
        assert ctx is not None
        try:
            _context.inside(Path(ctx), spec.dockerfile)
        except _context.ContextError as exc:
            # Never read it: a parse error would quote a host file's lines in the log.
            raise BuildError(f"{spec.dockerfile}: {exc}") from None
        yield Path(ctx), dockerfile

    def build(self, spec: EnvironmentSpec, *, log: Path | None = None) -> BuiltEnvironment:
        """Replay the Dockerfile of ``spec`` into cached layers (a prebuilt ``docker_image``
        alone is built as ``FROM <image>``)."""
        with self._dockerfile_of(spec) as (ctx, dockerfile):
            return self._build(spec, ctx, dockerfile, log)

    def _build(
        self, spec: EnvironmentSpec, ctx: Path, dockerfile: Path, log: Path | None
    ) -> BuiltEnvironment:
        self.store.prune_tmp()
        log_fh: IO[str] | None = None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log_fh = open(log, "a", encoding="utf-8")  # noqa: SIM115 - closed below
        try:
            builder = _Builder(self, spec, ctx, dockerfile, log_fh)
            return builder.run()
        except BuildError as exc:
            if log_fh is not None:
                log_fh.write(f"\nBUILD FAILED: {exc}\n")
            raise
        finally:
            if log_fh is not None:
                log_fh.close()

    def _start_process(
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
        slirp = slirp_argv() if network and shared is None else None
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
        return ForkServer.get().netns(slirp_argv())

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
        raw = built.details.get("layers")
        if raw is None:
            manifest = self.images / f"{built.key}.json"
            if not manifest.is_file():
                raise SandboxError(
                    f"environment {built.key[:12]} is not in the local cache; build it again"
                )
            raw = json.loads(manifest.read_text())["layers"]
        layers = [(str(k), list(p)) for k, p in raw]  # type: ignore[union-attr]
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
        fd, exit_fd = ForkServer.get().netns(slirp_argv() if public else [])
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
        proc = self._start_process(
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
        self.env = {**sandbox.ca_env, **built.env, **spec.env}
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

    def read(self, path: str) -> bytes:
        """Contents of a file inside the sandbox."""
        return self.proc.file_op("read", path=self._abs(path), data_out=True)  # type: ignore[return-value]

    def write(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file inside the sandbox (parents created, owned by root)."""
        payload = data.encode() if isinstance(data, str) else data
        self.proc.file_op("write", path=self._abs(path), data_in=payload, mode=mode)

    def upload(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to ``dest`` (created, replaced if present), owned by root."""
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(src)
        flags = os.O_RDONLY | (os.O_DIRECTORY if src.is_dir() else 0)
        fd = os.open(src, flags)
        try:
            self.proc.file_op("copy_in", path=self._abs(dest), fds=[fd], replace=True, owner="0:0")
        finally:
            os.close(fd)

    def download(self, src: str, dest: Path) -> None:
        """Copy a sandbox file or folder out to ``dest`` on the host (replaced if present)."""
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


# ------------------------------------------------------------------------------------ builder


class _Builder:
    """Replays one Dockerfile into layers."""

    def __init__(
        self,
        sandbox: LocalSandbox,
        spec: EnvironmentSpec,
        context: Path,
        dockerfile: Path,
        log: IO[str] | None,
    ) -> None:
        self.sb = sandbox
        self.spec = spec
        self.context = context
        self.dockerfile = dockerfile
        self.log = log
        self.deadline = time.monotonic() + spec.build_timeout_sec
        self.hits = 0
        self.misses = 0
        self.steps: list[dict[str, object]] = []
        try:
            self.ignore = _context.IgnoreRules.load(context)
        except _context.ContextError as exc:
            raise BuildError(f".dockerignore: {exc}") from None
        # Build steps get a session's limits: the task's memory, storage and CPUs, the
        # sandbox's process limit, and build_timeout_sec for the whole build.
        self.limits: dict[str, object] = {
            "memory_mb": spec.memory_mb or sandbox.default_memory_mb,
            "storage_mb": spec.storage_mb or sandbox.default_storage_mb,
            "pids": sandbox.pids_max,
            "cpus": spec.cpus,
            "timeout_s": spec.build_timeout_sec,
        }
        self.escape = "\\"

    # -- helpers

    def _log(self, text: str) -> None:
        if self.log is not None:
            self.log.write(text if text.endswith("\n") else text + "\n")
            self.log.flush()

    def _fail(self, ins: _dockerfile.Instruction, message: str) -> BuildError:
        return BuildError(f"{self.dockerfile.name} line {ins.lineno}: {message} ({ins.text})")

    def _remaining(self, ins: _dockerfile.Instruction) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._fail(ins, f"build timed out after {self.spec.build_timeout_sec:.0f}s")
        return left

    # -- driver

    def plan(self) -> int:
        """Parse the Dockerfile into stages and refuse, before any work, what cannot be
        replayed in the stages the target needs; returns the target stage's index."""
        try:
            df = _dockerfile.parse(self.dockerfile.read_text(encoding="utf-8", errors="replace"))
        except _dockerfile.DockerfileError as exc:
            raise BuildError(f"{self.dockerfile.name}: {exc}") from None
        self.escape = df.escape
        global_args: dict[str, str] = {}
        stages: list[_Stage] = []
        for ins in df.instructions:
            if ins.keyword not in _dockerfile.KNOWN:
                raise self._fail(ins, f"unknown instruction {ins.keyword}")
            if ins.keyword == "FROM":
                stages.append(self._stage(ins, global_args))
            elif not stages:
                if ins.keyword != "ARG":
                    raise self._fail(ins, "only ARG may come before the first FROM")
                for k, v in self._arg_pairs(ins, global_args):
                    if v is not None:
                        global_args[k] = v
            else:
                stages[-1].body.append(ins)
        if not stages:
            raise BuildError(f"{self.dockerfile.name}: no FROM instruction")
        self.global_args = global_args
        self.stages = stages
        self._current = 0
        target = self._target_index()
        for idx in self._needed(target):
            for ins in stages[idx].body:
                self._preflight(ins)
        return target

    def refusals(self) -> list[str]:
        """What :meth:`run` would refuse, found without building or pulling: the plan's
        refusals, then base images that neither a registry endpoint nor the host mapping
        can provide (one line each)."""
        try:
            target = self.plan()
        except BuildError as exc:
            return [str(exc)]
        reasons = []
        for idx in self._needed(target):
            ins = self.stages[idx].from_ins
            image = ins.args
            if self._stage_ref(image, idx) is not None:
                continue
            if image.lower() == "scratch":
                reasons.append(str(self._fail(ins, "FROM scratch is not supported")))
                continue
            try:
                ref = _images.parse(image)
            except _images.ImageRefError as exc:
                reasons.append(str(self._fail(ins, str(exc))))
                continue
            if _pull.endpoint_for(ref, self.sb.registries) is not None and not self.sb.rootless:
                continue  # pulled at build time (or mapped when the registry is down)
            try:
                _toolchains.resolve(image)
            except _toolchains.UnsupportedBase as exc:
                reasons.append(str(self._fail(ins, str(exc))))
        return reasons

    def run(self) -> BuiltEnvironment:
        started = time.monotonic()
        target = self.plan()
        lim = self.limits
        self._log(
            f"build limits: memory {lim['memory_mb'] or 'unlimited'} MB, storage "
            f"{lim['storage_mb']} MB, {lim['pids']} processes, cpus {lim['cpus'] or 'all'}, "
            f"timeout {float(lim['timeout_s']):.0f}s"  # type: ignore[arg-type]
        )
        self._states: dict[int, _State] = {}
        final = self._build_stage(target)
        cfg = final.config
        layers = [[k, p] for k, p in final.layers]
        rootfs = str(final.base.rootfs) if final.base.rootfs is not None else None
        manifest = {
            "key": final.key,
            "layers": layers,
            "env": cfg.env,
            "workdir": cfg.workdir,
            "user": cfg.user,
            "base_mapping": final.base.mapping,
            "rootfs": rootfs,
        }
        tmp = self.sb.images / f".{final.key}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1))
        tmp.replace(self.sb.images / f"{final.key}.json")
        seconds = time.monotonic() - started
        self._log(
            f"built {final.key[:12]} in {seconds:.1f}s ({self.hits} cached, {self.misses} built)"
        )
        return BuiltEnvironment(
            backend="local",
            key=final.key,
            workdir=cfg.workdir,
            env=dict(cfg.env),
            user=cfg.user,
            base_mapping=dict(final.base.mapping),
            details={
                "layers": layers,
                "cache_hits": self.hits,
                "cache_misses": self.misses,
                "steps": self.steps,
                "build_seconds": round(seconds, 3),
                "cmd": cfg.cmd,
                "entrypoint": cfg.entrypoint,
                "shell": cfg.shell,
                "labels": cfg.labels,
                "exposed_ports": cfg.exposed,
                "volumes": cfg.volumes,
                "stopsignal": cfg.stopsignal,
                "healthcheck": cfg.healthcheck,
                "limits": self.sb.cgroups.describe(),
                "build_limits": dict(self.limits),
                "dockerfile": str(self.dockerfile),
                "rootfs": rootfs,
                "target": self.stages[target].name or str(target),
            },
        )

    def _stage(self, ins: _dockerfile.Instruction, global_args: dict[str, str]) -> _Stage:
        # FROM sees the global ARGs and the automatic platform ARGs ($BUILDPLATFORM, …).
        env = {**_platform_args(), **global_args}
        for flag in ins.flags:
            if flag != "platform":
                raise self._fail(ins, f"FROM --{flag} is not supported")
        if "platform" in ins.flags:
            platform = _dockerfile.expand(ins.flags["platform"], env, self.escape)
            if not _images.platform_ok(platform):
                raise self._fail(
                    ins,
                    f"FROM --platform={platform}: this host runs {_images.host_platform()} "
                    "and the local backend does not emulate other platforms",
                )
        words = _dockerfile.expand_words(ins.args, env, self.escape)
        name = None
        if len(words) == 3 and words[1].lower() == "as":
            name = words[2].lower()
        elif len(words) != 1:
            raise self._fail(ins, "FROM takes an image and optionally AS <name>")
        ins.args = words[0]
        return _Stage(name, ins, [])

    def _stage_ref(self, name: str, before: int) -> int | None:
        """The stage a ``FROM``/``COPY --from`` name or index refers to (only earlier ones)."""
        if name.isdigit():
            return int(name) if int(name) < before else None
        low = name.lower()
        return next((j for j in range(before) if self.stages[j].name == low), None)

    def _target_index(self) -> int:
        target = self.spec.target
        if not target:
            return len(self.stages) - 1
        idx = self._stage_ref(target, len(self.stages))
        if idx is None:
            names = ", ".join(st.name for st in self.stages if st.name) or "none"
            raise BuildError(
                f"{self.dockerfile.name}: target stage {target!r} not found (stages: {names})"
            )
        return idx

    def _needed(self, idx: int) -> list[int]:
        """Stages ``idx`` builds on (``FROM <stage>``, ``COPY --from=<stage>``), in order."""
        out: list[int] = []

        def visit(j: int) -> None:
            if j in out:
                return
            parent = self._stage_ref(self.stages[j].from_ins.args, j)
            if parent is not None and not self.stages[j].from_ins.args.isdigit():
                visit(parent)
            for ins in self.stages[j].body:
                src = ins.flags.get("from") if ins.keyword == "COPY" else None
                ref = self._stage_ref(src, j) if src else None
                if ref is not None:
                    visit(ref)
            out.append(j)

        visit(idx)
        return out

    def _preflight(self, ins: _dockerfile.Instruction) -> None:
        """Refuse what the local backend cannot honour before doing any work."""
        kw = ins.keyword
        if kw in ("COPY", "ADD"):
            if kw == "ADD" and "from" in ins.flags:
                raise self._fail(ins, "ADD has no --from (Docker's neither); use COPY --from")
            for flag in ins.flags:
                if flag not in ("chown", "chmod", "link", "from"):
                    raise self._fail(ins, f"{kw} --{flag} is not supported by the local backend")
            srcs = ins.json[:-1] if ins.json else ins.args.split()[:-1]
            for s in srcs if "from" not in ins.flags else ():
                if "://" in s or s.startswith("git@"):
                    raise self._fail(
                        ins,
                        f"{kw} of a remote URL is not supported by the local backend "
                        "(download it in a RUN step instead)",
                    )
        elif kw == "RUN":
            for flag, value in ins.flags.items():
                if flag == "network" and value in ("default", "host", "none", ""):
                    continue
                if flag == "mount" and value.startswith("type=cache"):
                    continue
                raise self._fail(ins, f"RUN --{flag}={value} is not supported by the local backend")
        elif kw == "SHELL" and ins.json is None:
            raise self._fail(ins, "SHELL requires the JSON array form")

    # -- stages

    def _build_stage(self, idx: int) -> _State:
        if idx in self._states:
            return self._states[idx]
        stage = self.stages[idx]
        image = stage.from_ins.args
        parent = None if image.isdigit() else self._stage_ref(image, idx)
        if parent is not None:
            prev = self._build_stage(parent)
            state = _State(prev.key, list(prev.layers), prev.config.copy(), prev.base)
            state.config.args = {}
        else:
            state = self._base(stage.from_ins, image)
        # Global ARGs are visible to a stage only once redeclared.
        outer, self._current = self._current, idx
        try:
            for ins in stage.body:
                self._step(state, ins)
        finally:
            self._current = outer
        self._states[idx] = state
        return state

    def _base(self, ins: _dockerfile.Instruction, image: str) -> _State:
        if image.lower() == "scratch":
            raise self._fail(ins, "FROM scratch is not supported by the local backend")
        pulled, why = self._pull(ins, image)
        if pulled is not None:
            base = self._pulled_base(ins, image, pulled)
        else:
            try:
                base = _toolchains.resolve(image)
            except _toolchains.UnsupportedBase as exc:
                raise self._fail(ins, str(exc) + (f"; {why}" if why else "")) from None
            if why:
                note = base.mapping.get("note")
                base.mapping["note"] = f"{why}; {note}" if note else why
        self._log(f"#{ins.lineno} FROM {image} -> {base.mapping.get('host')}")
        if base.mapping.get("note"):
            self._log(f"#{ins.lineno} note: {base.mapping['note']}")
        key = step_key("", "FROM", base.kind, base.fingerprint, "rootless" * self.sb.rootless)
        state = _State(key, [], _Config(env=dict(base.env), workdir=base.workdir), base)
        if pulled is not None:
            image_cfg = pulled.image_config
            if image_cfg.get("User"):
                state.config.user = str(image_cfg["User"])
            # The image's process (a sidecar started from it runs this) and its healthcheck.
            for attr, name in (("cmd", "Cmd"), ("entrypoint", "Entrypoint")):
                value = image_cfg.get(name)
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    setattr(state.config, attr, list(value))
            health = image_cfg.get("Healthcheck")
            if isinstance(health, dict) and isinstance(health.get("Test"), list):
                state.config.healthcheck = _image_healthcheck(health)
        if pulled is not None and base.workdir != "/":
            workdir = base.workdir

            def mkdir(proc: SandboxProcess) -> None:
                # Like BuildKit: the image's WorkingDir exists for the steps that run in it.
                proc.file_op("mkdir", path=workdir, owner=None)

            wd_key = step_key(key, "WORKDIR", workdir, "")
            self._fs_step(state, ins, wd_key, action=mkdir, label=f"(base) WORKDIR {workdir}")
        if base.populate is not None:

            def populate(tmp: Path) -> None:
                assert base.populate is not None
                base.populate(tmp / "fs")

            self._fs_step(state, ins, key, populate_host=populate, label=f"FROM {image}")
        else:
            self.steps.append({"line": ins.lineno, "instruction": ins.text, "key": key})
        for cmd in base.post_commands:
            post_key = step_key(state.key, "RUN", json.dumps(["/bin/sh", "-c", cmd]))

            def run_post(proc: SandboxProcess, cmd: str = cmd) -> None:
                res = proc.exec(
                    ["/bin/sh", "-c", cmd],
                    env={**self.sb.ca_env, **state.config.env},
                    cwd="/",
                    user="root",
                    network=None,
                    rlimits=self._rlimits(proc),
                    timeout_s=self._remaining(ins),
                )
                if res.exit_code != 0:
                    raise self._fail(ins, f"base setup `{cmd}` failed: {res.stderr[-2000:]!r}")

            self._fs_step(state, ins, post_key, action=run_post, label=f"(base) {cmd}")
        return state

    def _pull(
        self, ins: _dockerfile.Instruction, image: str
    ) -> tuple[_pull.PulledImage | None, str]:
        """Pull ``image`` when a registry endpoint is configured for it.

        Returns ``(pulled, "")``, or ``(None, why)`` when the host mapping should be used
        (``why`` is empty when no endpoint is configured). A registry that answers with
        something broken (digest mismatch, unsafe layer) fails the build.
        """
        try:
            ref = _images.parse(image)
        except _images.ImageRefError as exc:
            raise self._fail(ins, str(exc)) from None
        endpoint = _pull.endpoint_for(ref, self.sb.registries)
        if endpoint is None:
            return None, ""
        if self.sb.rootless:
            return None, "pulled images need root: mapped onto the host instead"
        scratch = self.sb.cache_root / "run"
        try:
            pulled = self.sb.oci.pull(ref, endpoint, scratch=scratch)
        except (_registry.Unreachable, _registry.NotFound) as exc:
            return None, f"not pulled ({_oneline(str(exc))}): mapped onto the host instead"
        except (_registry.RegistryError, _unpack.UnpackError) as exc:
            raise self._fail(ins, f"pulling {ref.familiar}: {_oneline(str(exc))}") from None
        verb = "cached" if pulled.cached else "pulled"
        self._log(
            f"#{ins.lineno} {verb} {ref.canonical} from {endpoint}: {pulled.digest} "
            f"({pulled.size / 1e6:.1f} MB, {pulled.seconds:.2f}s)"
        )
        return pulled, ""

    def _pulled_base(
        self, ins: _dockerfile.Instruction, image: str, pulled: _pull.PulledImage
    ) -> _toolchains.BaseImage:
        cfg = pulled.image_config
        env: dict[str, str] = {}
        for item in cfg.get("Env") or []:  # type: ignore[attr-defined]
            k, _, v = str(item).partition("=")
            env[k] = v
        env.setdefault("PATH", _toolchains.DEFAULT_PATH)
        if not any(
            _unpack.scoped(pulled.rootfs, [d, "sleep"], follow_last=True).exists()
            for d in ("bin", "usr/bin", "usr/local/bin", "sbin", "usr/sbin")
        ):
            raise self._fail(
                ins,
                f"{pulled.ref.familiar} has no `sleep` program, which the local backend runs as "
                "the sandbox's init; use a base image with coreutils or busybox",
            )
        mapping = {
            "from": image,
            "host": f"pulled {pulled.ref.canonical}",
            "pulled": pulled.ref.canonical,
            "registry": pulled.endpoint,
            "digest": pulled.digest,
            "size": str(pulled.size),
            "compressed_size": str(pulled.compressed),
        }
        if pulled.notes:
            mapping["note"] = "; ".join(pulled.notes)
        return _toolchains.BaseImage(
            image=image,
            kind="oci",
            mapping=mapping,
            env=env,
            workdir=str(cfg.get("WorkingDir") or "/"),
            fingerprint=pulled.digest,
            rootfs=pulled.rootfs,
        )

    # -- steps

    def _fs_step(
        self,
        state: _State,
        ins: _dockerfile.Instruction,
        key: str,
        *,
        action: Callable[[SandboxProcess], None] | None = None,
        populate_host: Callable[[Path], None] | None = None,
        label: str | None = None,
        network: bool = True,
    ) -> None:
        """Run one filesystem-changing step (or reuse its cached layer).

        ``action`` runs in a sandbox with a session's limits (:meth:`_sandboxed`); what it
        wrote becomes the layer once it succeeded, minus what must not land on the host
        (:func:`_strip_layer`). A failed step leaves nothing in the cache.
        """
        assert action is None or populate_host is None
        t0 = time.monotonic()
        store = self.sb.store
        cached = True
        stripped: list[str] = []
        with store.lock(key):
            if store.exists(key):
                parts = list(store.meta(key).get("parts", []))  # type: ignore[arg-type]
            else:
                cached = False
                tmp = store.new_tmp(key)
                try:
                    if populate_host is not None:
                        populate_host(tmp)
                    if action is not None:
                        self._sandboxed(state, ins, action, tmp / "fs", network=network)
                    stripped = _strip_layer(tmp / "fs")
                    meta: dict[str, object] = {
                        "parent": state.key,
                        "instruction": label or ins.text,
                        "line": ins.lineno,
                        "dockerfile": str(self.dockerfile),
                    }
                    if stripped:
                        meta["stripped"] = stripped[:_STRIPPED_KEPT]
                        meta["stripped_count"] = len(stripped)
                    parts = store.commit(key, tmp, meta)
                except BaseException:
                    store.discard(tmp)
                    raise
        seconds = time.monotonic() - t0
        if cached:
            self.hits += 1
        else:
            self.misses += 1
        self._log(
            f"#{ins.lineno} {'CACHED ' if cached else ''}{label or ins.text} ({seconds:.2f}s)"
        )
        step: dict[str, object] = {
            "line": ins.lineno,
            "instruction": label or ins.text,
            "key": key,
            "cached": cached,
            "seconds": round(seconds, 3),
        }
        if stripped:
            step["stripped"] = stripped[:_STRIPPED_KEPT]
            shown = ", ".join(_oneline(x) for x in stripped[:5])
            more = f" and {len(stripped) - 5} more" if len(stripped) > 5 else ""
            self._log(f"#{ins.lineno} stripped from the layer: {shown}{more}")
        self.steps.append(step)
        state.key = key
        if parts:
            state.layers.append((key, parts))

    def _rlimits(self, proc: SandboxProcess) -> dict[str, int]:
        """A session's resource limits (file size from storage; RLIMIT_AS without a memory
        cgroup), for the commands of a build step."""
        storage = int(self.limits["storage_mb"])  # type: ignore[call-overload]
        out = {
            **self.sb.base_rlimits(self.sb.pids_max),
            "RLIMIT_FSIZE": (self.sb.max_file_mb or storage + 16) << 20,
        }
        memory = self.limits["memory_mb"]
        if memory and (proc.cgroups is None or "memory" not in proc.cgroups.limited):
            out["RLIMIT_AS"] = int(memory) << 20  # type: ignore[call-overload]
        return out

    def _sandboxed(
        self,
        state: _State,
        ins: _dockerfile.Instruction,
        action: Callable[[SandboxProcess], None],
        fs: Path,
        *,
        network: bool,
    ) -> None:
        """Run ``action`` in a sandbox like a session's and copy what it wrote into ``fs``.

        The step's upper layer is the session tmpfs of the storage limit (not the layer store
        on disk), its processes are in the session's cgroups (memory, pids, cpu). Over a limit
        the step fails naming it. Once it succeeded everything it left running is killed, then
        the upper is copied out with ``cp -a`` (whiteouts, overlay xattrs, hard links kept).
        """
        lim = self.limits
        storage = int(lim["storage_mb"])  # type: ignore[call-overload]
        # The files a step writes live on its tmpfs until copied out, and tmpfs pages count
        # as the writer's memory: the cgroup allows the task's memory plus its storage, so a
        # step that installs large dependencies is bounded by storage_mb, as on Docker.
        memory = lim["memory_mb"]
        proc = self.sb._start_process(
            state.layers,
            rootfs=state.base.rootfs,
            network=network,
            storage_mb=storage,
            memory_mb=int(memory) + storage if memory else None,  # type: ignore[call-overload]
            cpus=lim["cpus"],  # type: ignore[arg-type]
            pids_max=self.sb.pids_max,
        )
        try:
            # The session tmpfs, seen from the host (as LocalSession.export_changes reads it).
            tmpfs = Path(f"/proc/{proc.bwrap_pid}/root") / self.sb.mountpoint.relative_to("/")
            try:
                action(proc)
            except Exception as exc:
                over = self._over_limit(proc, tmpfs, str(exc))
                if over:
                    raise self._fail(ins, over) from None
                raise
            over = self._over_limit(proc, tmpfs, "")
            if over:
                raise self._fail(ins, over)
            proc.kill_all()  # nothing of the step may change its files while they are copied
            _export_upper(tmpfs / "u", fs)
        finally:
            proc.close()

    def _over_limit(self, proc: SandboxProcess, tmpfs: Path, error: str) -> str | None:
        """Which limit a step ran into, as a message (None: none)."""
        lim = self.limits
        hits = proc.cgroups.limit_hits() if proc.cgroups is not None else {}
        if hits.get("memory"):
            return (
                f"the build step exceeded the memory limit ({lim['memory_mb']} MB, plus "
                f"{lim['storage_mb']} MB for the files it writes)"
            )
        full = False
        with contextlib.suppress(OSError):
            st = os.statvfs(tmpfs)
            full = st.f_bavail * st.f_frsize < _FULL_BYTES
        if full or "No space left on device" in error:
            return f"the build step exceeded the storage limit ({lim['storage_mb']} MB)"
        if hits.get("pids"):
            return f"the build step exceeded the process limit ({lim['pids']})"
        return None

    def _meta_step(self, state: _State, ins: _dockerfile.Instruction, *parts: str) -> None:
        state.key = step_key(state.key, ins.keyword, *parts)
        self.steps.append({"line": ins.lineno, "instruction": ins.text, "key": state.key})
        self._log(f"#{ins.lineno} {ins.text}")

    def _arg_pairs(
        self, ins: _dockerfile.Instruction, env: dict[str, str]
    ) -> list[tuple[str, str | None]]:
        try:
            return _dockerfile.parse_key_values(ins, env, self.escape, allow_bare=True)
        except _dockerfile.DockerfileError as exc:
            raise self._fail(ins, str(exc).split(" (")[0]) from None

    def _expand(self, ins: _dockerfile.Instruction, text: str, cfg: _Config) -> str:
        try:
            return _dockerfile.expand(text, cfg.vars(), self.escape, ins.lineno)
        except _dockerfile.DockerfileError as exc:
            raise self._fail(ins, str(exc)) from None

    def _words(self, ins: _dockerfile.Instruction, cfg: _Config) -> list[str]:
        if ins.json is not None:
            return [self._expand(ins, w, cfg) for w in ins.json]
        try:
            return _dockerfile.expand_words(ins.args, cfg.vars(), self.escape)
        except _dockerfile.DockerfileError as exc:
            raise self._fail(ins, str(exc)) from None

    def _step(self, state: _State, ins: _dockerfile.Instruction) -> None:
        cfg = state.config
        kw = ins.keyword
        if kw == "RUN":
            self._run(state, ins)
        elif kw in ("COPY", "ADD"):
            self._copy(state, ins)
        elif kw == "WORKDIR":
            path = self._expand(ins, ins.args, cfg)
            if not path:
                raise self._fail(ins, "WORKDIR requires a path")
            cfg.workdir = _context.posix_join(cfg.workdir, path)
            owner = cfg.user
            workdir = cfg.workdir

            def mkdir(proc: SandboxProcess) -> None:
                proc.file_op("mkdir", path=workdir, owner=owner)

            key = step_key(state.key, "WORKDIR", workdir, owner or "")
            self._fs_step(state, ins, key, action=mkdir)
        elif kw == "ENV":
            try:
                pairs = _dockerfile.parse_key_values(ins, cfg.vars(), self.escape)
            except _dockerfile.DockerfileError as exc:
                raise self._fail(ins, str(exc).split(" (")[0]) from None
            for k, v in pairs:
                cfg.env[k] = v or ""
            self._meta_step(state, ins, json.dumps(pairs))
        elif kw == "ARG":
            pairs = self._arg_pairs(ins, cfg.vars())
            for k, v in pairs:
                if v is None:
                    v = self.global_args.get(k, _platform_arg(k))
                if v is not None:
                    cfg.args[k] = v
            self._meta_step(state, ins, json.dumps([[k, cfg.args.get(k)] for k, _ in pairs]))
        elif kw == "USER":
            user = self._expand(ins, ins.args, cfg).strip()
            if not user:
                raise self._fail(ins, "USER requires a user name")
            cfg.user = user
            self._meta_step(state, ins, user)
        elif kw == "LABEL":
            try:
                pairs = _dockerfile.parse_key_values(ins, cfg.vars(), self.escape)
            except _dockerfile.DockerfileError as exc:
                raise self._fail(ins, str(exc).split(" (")[0]) from None
            cfg.labels.update({k: v or "" for k, v in pairs})
            self._meta_step(state, ins, json.dumps(pairs))
        elif kw == "SHELL":
            assert ins.json is not None
            if not ins.json:
                raise self._fail(ins, "SHELL requires at least one argument")
            cfg.shell = list(ins.json)
            self._meta_step(state, ins, json.dumps(cfg.shell))
        elif kw in ("CMD", "ENTRYPOINT"):
            value = ins.json if ins.json is not None else [*cfg.shell, ins.args]
            if kw == "CMD":
                cfg.cmd = list(value)
            else:
                cfg.entrypoint = list(value)
            self._meta_step(state, ins, json.dumps(value))
        elif kw == "EXPOSE":
            cfg.exposed.extend(self._words(ins, cfg))
            self._meta_step(state, ins, json.dumps(cfg.exposed))
        elif kw == "VOLUME":
            cfg.volumes.extend(self._words(ins, cfg))
            self._meta_step(state, ins, json.dumps(cfg.volumes))
        elif kw == "STOPSIGNAL":
            cfg.stopsignal = self._expand(ins, ins.args, cfg)
            self._meta_step(state, ins, cfg.stopsignal)
        elif kw == "HEALTHCHECK":
            cfg.healthcheck = ins.raw
            self._meta_step(state, ins, ins.raw)
        elif kw == "ONBUILD":
            cfg.onbuild.append(ins.args)
            self._meta_step(state, ins, ins.args)
        elif kw == "MAINTAINER":
            cfg.labels["maintainer"] = ins.args
            self._meta_step(state, ins, ins.args)
        elif kw == "FROM":
            raise self._fail(ins, "unexpected FROM")
        else:  # pragma: no cover - KNOWN and this switch agree
            raise self._fail(ins, f"the local backend cannot honour {kw}")

    # -- RUN

    def _run(self, state: _State, ins: _dockerfile.Instruction) -> None:
        cfg = state.config
        script: str | None = None
        if ins.heredocs:
            if not ins.args_without_heredocs.strip() and len(ins.heredocs) == 1:
                body = ins.heredocs[0].body
                if body.startswith("#!"):
                    script = body
                    argv = ["/dev/shm/.repogym-heredoc"]
                else:
                    argv = [*cfg.shell, body]
            else:
                full = ins.args + "\n" + "".join(f"{h.body}{h.name}\n" for h in ins.heredocs)
                argv = [*cfg.shell, full]
        elif ins.json is not None:
            argv = list(ins.json)
        else:
            argv = [*cfg.shell, ins.args]
        if not argv or argv == [*cfg.shell, ""]:
            raise self._fail(ins, "RUN needs a command")
        # The CA bundle's variables are not part of the step (nor of its cache key).
        env = {**self.sb.ca_env, **cfg.args, **cfg.env}
        env.setdefault("PATH", _toolchains.DEFAULT_PATH)
        network = ins.flags.get("network") != "none"
        key = step_key(
            state.key,
            "RUN",
            json.dumps(argv),
            json.dumps(sorted(cfg.args.items())),
            script or "",
            "net" if network else "nonet",
        )
        user, workdir = cfg.user or "root", cfg.workdir
        tail: list[str] = []

        def sink(chunk: bytes) -> None:
            text = chunk.decode("utf-8", errors="replace")
            if self.log is not None:
                self.log.write(text)
            tail.append(text)
            if len(tail) > 400:
                del tail[:200]

        def action(proc: SandboxProcess) -> None:
            if script is not None:
                proc.file_op(
                    "write", path="/dev/shm/.repogym-heredoc", data_in=script.encode(), mode=0o755
                )
            res = proc.exec(
                argv,
                env=env,
                cwd=workdir,
                user=user,
                network=None,
                rlimits=self._rlimits(proc),
                timeout_s=self._remaining(ins),
                on_output=sink,
            )
            if self.log is not None:
                self.log.flush()
            if res.timed_out:
                raise self._fail(ins, "RUN step timed out (build_timeout_sec)")
            if res.error:
                raise self._fail(ins, f"RUN could not start: {res.error}")
            if res.exit_code != 0:
                code = res.exit_code if res.exit_code is not None else f"signal {res.signal}"
                missing = _apt_missing("".join(tail)) if state.base.host_mapped else None
                if missing:
                    m = state.base.mapping
                    raise self._fail(
                        ins,
                        f"apt-get cannot install {missing}: the base image {m.get('from')} is "
                        f"mapped onto the {m.get('base') or m.get('host')}, whose package archive "
                        "does not provide it (see base_mapping; a registry mirror gives the real "
                        "image, docs/sandbox.md)",
                    )
                out = "".join(tail).splitlines()[-25:]
                detail = "\n".join(out)
                raise BuildError(
                    f"{self.dockerfile.name} line {ins.lineno}: RUN failed with exit code {code} "
                    f"({ins.text})" + (f"\n--- output (tail) ---\n{detail}" if detail else "")
                )

        self._fs_step(state, ins, key, action=action, network=network)

    # -- COPY / ADD

    def _copy(self, state: _State, ins: _dockerfile.Instruction) -> None:
        if ins.flags.get("from"):
            self._copy_from(state, ins)
            return
        cfg = state.config
        words = self._words(ins, cfg)
        heredocs = {h.name: h for h in ins.heredocs}
        if heredocs:
            try:
                rest = _dockerfile.expand_words(ins.args_without_heredocs, cfg.vars(), self.escape)
            except _dockerfile.DockerfileError as exc:
                raise self._fail(ins, str(exc)) from None
            words = [*[f"<<{n}" for n in heredocs], *rest]
        if len(words) < 2:
            raise self._fail(ins, f"{ins.keyword} requires at least two arguments")
        *srcs, dest = words
        dest_abs = _context.posix_join(cfg.workdir, dest)
        dest_is_dir = dest.endswith("/") or dest in (".", "..")
        file_srcs = [s for s in srcs if not s.startswith("<<")]
        try:
            sources = _context.resolve_sources(self.context, file_srcs, self.ignore)
        except _context.ContextError as exc:
            raise self._fail(ins, str(exc)) from None
        count = len(sources) + len(heredocs)
        if count > 1 and not dest_is_dir:
            raise self._fail(
                ins,
                f"when using {ins.keyword} with more than one source file, the destination "
                "must be a directory and end with a /",
            )
        chown = ins.flags.get("chown") or None
        if chown:
            chown = self._expand(ins, chown, cfg)
        chmod = None
        if ins.flags.get("chmod"):
            try:
                chmod = int(ins.flags["chmod"], 8)
            except ValueError:
                raise self._fail(ins, f"invalid --chmod {ins.flags['chmod']!r}") from None
        bodies: dict[str, str] = {}
        for n, h in heredocs.items():
            try:
                body = _dockerfile.expand(h.body, cfg.vars(), self.escape) if h.expand else h.body
                bodies[n] = body
            except _dockerfile.DockerfileError:
                # The message would quote the body: name the heredoc only.
                raise self._fail(ins, f"bad variable substitution in heredoc {n}") from None
        extract = ins.keyword == "ADD"
        storage_mb = int(self.limits["storage_mb"])  # type: ignore[call-overload]
        content = _context.hash_sources(sources)
        key = step_key(
            state.key,
            ins.keyword,
            json.dumps([srcs, dest_abs, dest_is_dir, chown, chmod]),
            content,
            json.dumps(sorted(bodies.items())),
        )

        def action(proc: SandboxProcess) -> None:
            def is_dir(path: str) -> bool:
                st = proc.file_op("stat", path=path)
                return bool(st and st["is_dir"])  # type: ignore[index]

            into_dir = dest_is_dir or is_dir(dest_abs)
            for name, body in bodies.items():
                target = _context.posix_join(dest_abs, name) if into_dir else dest_abs
                proc.file_op(
                    "write", path=target, data_in=body.encode(), mode=chmod or 0o644, owner=chown
                )
            for src in sources:
                if src.is_dir:
                    _copy_in(
                        proc, src.path, dest_abs, include=src.include, owner=chown, chmod=chmod
                    )
                elif extract and _is_archive(src.path):
                    scratch = self.sb.cache_root / "run"
                    with tempfile.TemporaryDirectory(prefix="add-", dir=scratch) as tmpd:
                        try:
                            _extract(src.path, Path(tmpd), storage_mb=storage_mb, label=src.rel)
                        except _ArchiveError as exc:
                            raise self._fail(ins, f"ADD {_oneline(str(exc))}") from None
                        _copy_in(proc, Path(tmpd), dest_abs, include=None, owner=chown, chmod=chmod)
                else:
                    target = _context.posix_join(dest_abs, src.name) if into_dir else dest_abs
                    _copy_in(proc, src.path, target, include=None, owner=chown, chmod=chmod)

        try:
            self._fs_step(state, ins, key, action=action)
        except SandboxError as exc:
            if isinstance(exc, BuildError):
                raise
            raise self._fail(ins, str(exc)) from None

    # -- COPY --from

    def _copy_from(self, state: _State, ins: _dockerfile.Instruction) -> None:
        """``COPY --from=<stage|index|image>``: copy out of another stage's file system, a
        pulled image's root, or a tool image's stand-in (:mod:`._toolimages`)."""
        cfg = state.config
        source = self._expand(ins, ins.flags["from"], cfg)
        words = self._words(ins, cfg)
        if len(words) < 2:
            raise self._fail(ins, "COPY requires at least two arguments")
        *srcs, dest = words
        dest_abs = _context.posix_join(cfg.workdir, dest)
        dest_is_dir = dest.endswith("/") or dest in (".", "..")
        chown = self._expand(ins, ins.flags["chown"], cfg) if ins.flags.get("chown") else None
        chmod = None
        if ins.flags.get("chmod"):
            try:
                chmod = int(ins.flags["chmod"], 8)
            except ValueError:
                raise self._fail(ins, f"invalid --chmod {ins.flags['chmod']!r}") from None
        stage_idx = self._stage_ref(source, self._current)
        with contextlib.ExitStack() as stack:
            if stage_idx is not None:
                src_state = self._build_stage(stage_idx)
                origin = f"stage:{src_state.key}"
                root = stack.enter_context(self._stage_root(src_state))
            else:
                root, origin = self._image_root(ins, source)
            matches = self._from_sources(ins, root, srcs, source)
            if len(matches) > 1 and not dest_is_dir:
                raise self._fail(
                    ins,
                    "when using COPY with more than one source file, the destination must be a "
                    "directory and end with a /",
                )
            key = step_key(
                state.key,
                "COPY",
                json.dumps([source, srcs, dest_abs, dest_is_dir, chown, chmod]),
                origin,
            )

            def action(proc: SandboxProcess) -> None:
                st = proc.file_op("stat", path=dest_abs)
                into_dir = dest_is_dir or bool(st and st["is_dir"])  # type: ignore[index]
                for path in matches:
                    if path.is_dir():
                        _copy_in(proc, path, dest_abs, include=None, owner=chown, chmod=chmod)
                    else:
                        target = _context.posix_join(dest_abs, path.name) if into_dir else dest_abs
                        _copy_in(proc, path, target, include=None, owner=chown, chmod=chmod)

            try:
                self._fs_step(state, ins, key, action=action)
            except SandboxError as exc:
                if isinstance(exc, BuildError):
                    raise
                raise self._fail(ins, str(exc)) from None

    @contextlib.contextmanager
    def _stage_root(self, src: _State) -> Iterator[Path]:
        """The merged root of a built stage, seen from the host (a sandbox with nothing
        running in it holds the mounts while files are copied out)."""
        proc = self.sb._start_process(
            src.layers, network=False, storage_mb=64, rootfs=src.base.rootfs
        )
        try:
            yield (
                Path(f"/proc/{proc.bwrap_pid}/root") / self.sb.mountpoint.relative_to("/") / "root"
            )
        finally:
            proc.close()

    def _image_root(self, ins: _dockerfile.Instruction, source: str) -> tuple[Path, str]:
        """The root of an image named by ``COPY --from``: pulled, or a tool image's stand-in."""
        try:
            ref = _images.parse(source)
        except _images.ImageRefError:
            msg = f"COPY --from={source}: no such stage, and not an image name"
            raise self._fail(ins, msg) from None
        pulled, why = self._pull(ins, source)
        if pulled is not None:
            return pulled.rootfs, f"image:{pulled.digest}"
        tool = _images.tool_image(ref)
        if tool is not None:
            from repogym.sandbox import _toolimages

            try:
                root, version = _toolimages.tool_root(ref, tool, self.sb.cache_root)
            except _toolimages.ToolImageError as exc:
                raise self._fail(ins, f"COPY --from={source}: {_oneline(str(exc))}") from None
            self._log(f"#{ins.lineno} COPY --from={source} -> {tool.pypi} {version} from PyPI")
            return root, f"tool:{tool.pypi}:{version}"
        reason = why or (
            f"no registry endpoint is configured for {ref.registry} "
            f"({_pull.ENV_VAR}, see docs/sandbox.md)"
        )
        raise self._fail(
            ins,
            f"COPY --from={source}: not a build stage of this Dockerfile, {reason}, and it is "
            "not a known tool image",
        )

    def _from_sources(
        self, ins: _dockerfile.Instruction, root: Path, srcs: list[str], source: str
    ) -> list[Path]:
        """Resolve source paths inside ``root`` (symlinks followed, never out of it)."""
        out: list[Path] = []
        for src in srcs:
            parts = [p for p in src.split("/") if p not in ("", ".")]
            try:
                if parts and any(c in parts[-1] for c in "*?["):
                    folder = _unpack.scoped(root, parts[:-1], follow_last=True)
                    names = sorted(os.listdir(folder)) if folder.is_dir() else []
                    found = [folder / n for n in names if fnmatch.fnmatchcase(n, parts[-1])]
                    found = [
                        _unpack.scoped(root, [*parts[:-1], p.name], follow_last=True) for p in found
                    ]
                else:
                    found = [_unpack.scoped(root, parts, follow_last=True)]
            except _unpack.UnpackError as exc:
                raise self._fail(ins, f"COPY --from={source} {src}: {exc}") from None
            found = [p for p in found if p.exists() and not p.is_symlink()]
            if not found:
                raise self._fail(ins, f"COPY --from={source}: {src} not found")
            out += found
        return out


_APT_MISSING = (
    re.compile(r"^E: Unable to locate package (\S+)", re.M),
    re.compile(r"^E: Package '([^']+)' has no installation candidate", re.M),
    re.compile(r"^E: Version '[^']+' for '([^']+)' was not found", re.M),
    re.compile(r"^E: Couldn't find any package by (?:glob|regex) '([^']+)'", re.M),
)


def _apt_missing(output: str) -> str | None:
    """The packages an ``apt-get install`` could not find, as ``'a', 'b'`` (None: other
    failure)."""
    names: list[str] = []
    for pattern in _APT_MISSING:
        names += [n for n in pattern.findall(output) if n not in names]
    return ", ".join(f"package {n!r}" for n in names) if names else None


def _image_healthcheck(health: dict[str, object]) -> str | None:
    """An image config's ``Healthcheck`` as the Dockerfile ``HEALTHCHECK`` line it came from
    (durations are nanoseconds there)."""
    test = [str(t) for t in health.get("Test") or []]  # type: ignore[attr-defined]
    if not test or test[0] == "NONE":
        return None
    flags = []
    for key, flag in (
        ("Interval", "interval"),
        ("Timeout", "timeout"),
        ("StartPeriod", "start-period"),
        ("StartInterval", "start-interval"),
    ):
        value = health.get(key)
        if isinstance(value, int) and value > 0:
            flags.append(f"--{flag}={value / 1e9:g}s")
    if isinstance(health.get("Retries"), int) and health["Retries"]:
        flags.append(f"--retries={health['Retries']}")
    body = json.dumps(test[1:]) if test[0] == "CMD" else " ".join(test[1:])
    return " ".join(["HEALTHCHECK", *flags, "CMD", body])


def _platform_arg(name: str) -> str | None:
    return _platform_args().get(name)


def _platform_args() -> dict[str, str]:
    """The automatic platform ARGs (``TARGETPLATFORM``, ``BUILDPLATFORM``, …) of this host."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    return {
        "TARGETPLATFORM": f"linux/{arch}",
        "BUILDPLATFORM": f"linux/{arch}",
        "TARGETOS": "linux",
        "BUILDOS": "linux",
        "TARGETARCH": arch,
        "BUILDARCH": arch,
        "TARGETVARIANT": "",
        "BUILDVARIANT": "",
    }


def _copy_in(
    proc: SandboxProcess,
    src: Path,
    dest: str,
    *,
    include: set[str] | None,
    owner: str | None,
    chmod: int | None,
) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if src.is_dir() else 0)
    fd = os.open(src, flags)
    try:
        proc.file_op(
            "copy_in",
            path=dest,
            fds=[fd],
            include=include,
            owner=owner,
            chmod=chmod,
            replace=False,
        )
    finally:
        os.close(fd)


def _is_archive(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


class _ArchiveError(ValueError):
    """An archive ``ADD`` refuses (the message starts with the archive's name)."""


def _extract(archive: Path, dest: Path, *, storage_mb: int, label: str) -> None:
    """Unpack a tar archive (any compression) for ``ADD``, streamed and bounded.

    Its regular files may add up to the storage limit and it may have at most
    :data:`MAX_ARCHIVE_MEMBERS` members; both are checked from each member's header *before*
    its bytes are read, so a small archive expanding to gigabytes stops at the first header
    over the limit. Members with absolute names or ``..`` components, links pointing
    outside the destination (or absolute), and device/fifo members are refused; the
    extraction filter ``data`` enforces the same again and clears setuid bits.
    """
    budget = storage_mb << 20
    total = count = 0
    try:
        with tarfile.open(archive, mode="r|*") as tf:
            for m in tf:
                count += 1
                if count > MAX_ARCHIVE_MEMBERS:
                    raise _ArchiveError(
                        f"{label}: the archive has more than {MAX_ARCHIVE_MEMBERS} members"
                    )
                why = _unsafe_member(m)
                if why:
                    raise _ArchiveError(f"{label}: archive member {m.name!r} {why}")
                if m.isreg():
                    total += m.size
                    if total > budget:
                        raise _ArchiveError(
                            f"{label}: the archive expands beyond the storage limit "
                            f"({storage_mb} MB)"
                        )
                tf.extract(m, dest, set_attrs=True, filter="data")
    except _ArchiveError:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
        # Never the archive's bytes: the kind of error and, at most, a member name.
        why = _oneline(str(exc))[:200]
        raise _ArchiveError(f"{label}: cannot unpack the archive ({why})") from None


def _unsafe_member(m: tarfile.TarInfo) -> str | None:
    parts = PurePosixPath(m.name).parts
    if m.name.startswith("/") or ".." in parts:
        return "points outside the destination"
    if m.isdev() and not (m.isfifo() or m.ischr() or m.isblk()):  # pragma: no cover
        return "is a special file"
    if m.ischr() or m.isblk() or m.isfifo():
        return "is a device or fifo"
    if m.issym() or m.islnk():
        link = m.linkname
        if link.startswith("/"):
            return f"links to an absolute path ({link!r})"
        base = posixpath.dirname(m.name) if m.issym() else ""
        resolved = posixpath.normpath(posixpath.join(base, link))
        if resolved == ".." or resolved.startswith("../"):
            return f"links outside the destination ({link!r})"
    return None


def _oneline(text: str) -> str:
    """``text`` on one line (names from a stranger's files may hold newlines)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


_STRIPPED_KEPT = 1000
"""At most this many stripped entries are listed in a layer's metadata (the count is exact)."""


def _shown(fs: Path, path: str) -> str:
    """A layer path as the sandbox sees it (``fs/@root/x`` → ``/x``, ``fs/usr/x`` → ``/usr/x``)."""
    rel = os.path.relpath(path, fs)
    part, _, rest = rel.partition("/")
    return _oneline("/" + rest if part == _rootfs.ROOT_PART else "/" + rel)


def _strip_layer(fs: Path) -> list[str]:
    """Make a finished layer safe to keep on the host; returns what was stripped.

    Layers live in the host's cache as ordinary files, so nothing in them may grant
    privileges or act as a device there: setuid/setgid bits of files and file capabilities
    (``security.capability``) are removed, device nodes (except overlayfs whiteouts, char
    0/0), FIFOs and sockets are deleted. Setgid on folders (group inheritance) stays.
    """
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(fs):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            mode = st.st_mode
            if stat.S_ISREG(mode):
                bits = stat.S_IMODE(mode) & (stat.S_ISUID | stat.S_ISGID)
                if bits:
                    os.chmod(path, stat.S_IMODE(mode) & ~bits)
                    what = "setuid" if bits & stat.S_ISUID else "setgid"
                    if bits == stat.S_ISUID | stat.S_ISGID:
                        what = "setuid+setgid"
                    out.append(f"{_shown(fs, path)}: {what} bit removed")
                try:
                    os.removexattr(path, "security.capability", follow_symlinks=False)
                except OSError:
                    pass
                else:
                    out.append(f"{_shown(fs, path)}: file capabilities removed")
            elif stat.S_ISCHR(mode) and st.st_rdev == 0:
                continue  # an overlayfs whiteout: a deletion, not a device
            elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                os.unlink(path)
                out.append(f"{_shown(fs, path)}: device node removed")
            elif stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.unlink(path)
                kind = "fifo" if stat.S_ISFIFO(mode) else "socket"
                out.append(f"{_shown(fs, path)}: {kind} removed")
    return out


def _export_upper(upper: Path, fs: Path) -> None:
    """Copy a build step's upper layer (on its tmpfs) into the layer being built."""
    fs.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        ["cp", "-a", "--", f"{upper}/.", f"{fs}/"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    if run.returncode != 0:
        lines = run.stderr.decode(errors="replace").strip().splitlines() or ["(no output)"]
        raise SandboxError(f"could not save the build step's files: {_oneline(lines[-1])[:300]}")


__all__ = ["LocalSandbox", "LocalSession", "default_cache_root"]
