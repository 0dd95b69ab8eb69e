"""The Dockerfile replayer of the local backend: stages, the build cache and the steps' sandboxes.

:class:`Builder` parses a Dockerfile into stages, refuses up front what cannot be replayed, and
builds the stages the target needs. Instructions that only change the image configuration
(``ENV``, ``ARG``, ``USER``, …) are steps of the cache key; ``WORKDIR`` and everything that writes
files run through :meth:`Builder.fs_step`: the step runs in a sandbox with a session's limits
(its upper on a tmpfs of the storage limit), and what it wrote becomes a cached layer
(:mod:`._layers`) once it succeeded, stripped of what must not reach the host (:mod:`._layerfs`).
``FROM``, ``RUN`` and ``COPY``/``ADD`` live in :mod:`._replay_steps`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from repogym import dockerfile as _dockerfile
from repogym.sandbox import _context, _images, _pull, _toolchains
from repogym.sandbox import _replay_steps as replay_steps
from repogym.sandbox._host import platform_arg, platform_args
from repogym.sandbox._layerfs import STRIPPED_KEPT, export_upper, oneline, strip_layer
from repogym.sandbox._layers import step_key
from repogym.sandbox._replay_state import ImageConfig, Stage, StageState
from repogym.sandbox._runtime import SandboxProcess
from repogym.sandbox.base import BuildError, BuiltEnvironment, EnvironmentSpec

if TYPE_CHECKING:
    from repogym.sandbox.local import LocalSandbox

FULL_BYTES = 256 << 10
"""A build step's upper layer with less free space than this is over its storage limit."""

_APK = re.compile(r"(?:^|[;&|(]\s*|\s)apk\s+(?:add|update|upgrade|del)\b")


class Builder:
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

    def note(self, text: str) -> None:
        if self.log is not None:
            self.log.write(text if text.endswith("\n") else text + "\n")
            self.log.flush()

    def fail(self, ins: _dockerfile.Instruction, message: str) -> BuildError:
        return BuildError(f"{self.dockerfile.name} line {ins.lineno}: {message} ({ins.text})")

    def remaining(self, ins: _dockerfile.Instruction) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.fail(ins, f"build timed out after {self.spec.build_timeout_sec:.0f}s")
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
        stages: list[Stage] = []
        for ins in df.instructions:
            if ins.keyword not in _dockerfile.KNOWN:
                raise self.fail(ins, f"unknown instruction {ins.keyword}")
            if ins.keyword == "FROM":
                stages.append(self._stage(ins, global_args))
            elif not stages:
                if ins.keyword != "ARG":
                    raise self.fail(ins, "only ARG may come before the first FROM")
                for k, v in self._arg_pairs(ins, global_args):
                    if v is not None:
                        global_args[k] = v
            else:
                stages[-1].body.append(ins)
        if not stages:
            raise BuildError(f"{self.dockerfile.name}: no FROM instruction")
        self.global_args = global_args
        self.stages = stages
        self.current = 0
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
            if self.stage_ref(image, idx) is not None:
                continue
            if image.lower() == "scratch":
                reasons.append(str(self.fail(ins, "FROM scratch is not supported")))
                continue
            try:
                ref = _images.parse(image)
            except _images.ImageRefError as exc:
                reasons.append(str(self.fail(ins, str(exc))))
                continue
            if _pull.endpoint_for(ref, self.sb.registries) is not None and not self.sb.rootless:
                continue  # pulled at build time (or mapped when the registry is down)
            try:
                _toolchains.resolve(image)
            except _toolchains.UnsupportedBase as exc:
                reasons.append(str(self.fail(ins, str(exc))))
                continue
            if "alpine" in ref.tag_or_latest:
                reasons += [
                    str(self.fail(run, f"apk is Alpine's package manager: {image} is an Alpine"
                                  " image, stood in for by this host's Debian base (no apk);"
                                  " configure a registry to pull the image itself"))
                    for run in self.stages[idx].body
                    if run.keyword == "RUN" and _APK.search(run.args)
                ]  # fmt: skip
        return reasons

    def run(self) -> BuiltEnvironment:
        started = time.monotonic()
        target = self.plan()
        lim = self.limits
        self.note(
            f"build limits: memory {lim['memory_mb'] or 'unlimited'} MB, storage "
            f"{lim['storage_mb']} MB, {lim['pids']} processes, cpus {lim['cpus'] or 'all'}, "
            f"timeout {float(lim['timeout_s']):.0f}s"  # type: ignore[arg-type]
        )
        self._states: dict[int, StageState] = {}
        final = self.build_stage(target)
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
        self.note(
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

    def _stage(self, ins: _dockerfile.Instruction, global_args: dict[str, str]) -> Stage:
        # FROM sees the global ARGs and the automatic platform ARGs ($BUILDPLATFORM, …).
        env = {**platform_args(), **global_args}
        for flag in ins.flags:
            if flag != "platform":
                raise self.fail(ins, f"FROM --{flag} is not supported")
        if "platform" in ins.flags:
            platform = _dockerfile.expand(ins.flags["platform"], env, self.escape)
            if not _images.platform_ok(platform):
                raise self.fail(
                    ins,
                    f"FROM --platform={platform}: this host runs {_images.host_platform()} "
                    "and the local backend does not emulate other platforms",
                )
        words = _dockerfile.expand_words(ins.args, env, self.escape)
        name = None
        if len(words) == 3 and words[1].lower() == "as":
            name = words[2].lower()
        elif len(words) != 1:
            raise self.fail(ins, "FROM takes an image and optionally AS <name>")
        ins.args = words[0]
        return Stage(name, ins, [])

    def stage_ref(self, name: str, before: int) -> int | None:
        """The stage a ``FROM``/``COPY --from`` name or index refers to (only earlier ones)."""
        if name.isdigit():
            return int(name) if int(name) < before else None
        low = name.lower()
        return next((j for j in range(before) if self.stages[j].name == low), None)

    def _target_index(self) -> int:
        target = self.spec.target
        if not target:
            return len(self.stages) - 1
        idx = self.stage_ref(target, len(self.stages))
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
            parent = self.stage_ref(self.stages[j].from_ins.args, j)
            if parent is not None and not self.stages[j].from_ins.args.isdigit():
                visit(parent)
            for ins in self.stages[j].body:
                src = ins.flags.get("from") if ins.keyword == "COPY" else None
                ref = self.stage_ref(src, j) if src else None
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
                raise self.fail(ins, "ADD has no --from (Docker's neither); use COPY --from")
            for flag in ins.flags:
                if flag not in ("chown", "chmod", "link", "from"):
                    raise self.fail(ins, f"{kw} --{flag} is not supported by the local backend")
            srcs = ins.json[:-1] if ins.json else ins.args.split()[:-1]
            for s in srcs if "from" not in ins.flags else ():
                if "://" in s or s.startswith("git@"):
                    raise self.fail(
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
                raise self.fail(ins, f"RUN --{flag}={value} is not supported by the local backend")
        elif kw == "SHELL" and ins.json is None:
            raise self.fail(ins, "SHELL requires the JSON array form")

    # -- stages

    def build_stage(self, idx: int) -> StageState:
        if idx in self._states:
            return self._states[idx]
        stage = self.stages[idx]
        image = stage.from_ins.args
        parent = None if image.isdigit() else self.stage_ref(image, idx)
        if parent is not None:
            prev = self.build_stage(parent)
            state = StageState(prev.key, list(prev.layers), prev.config.copy(), prev.base)
            state.config.args = {}
        else:
            state = replay_steps.base_state(self, stage.from_ins, image)
        # Global ARGs are visible to a stage only once redeclared.
        outer, self.current = self.current, idx
        try:
            for ins in stage.body:
                self._step(state, ins)
        finally:
            self.current = outer
        self._states[idx] = state
        return state

    # -- steps

    def fs_step(
        self,
        state: StageState,
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
        (:func:`strip_layer`). A failed step leaves nothing in the cache.
        """
        assert action is None or populate_host is None
        t0 = time.monotonic()
        store = self.sb.store
        # Other machines' layers ($REPOGYM_SHARED_CACHE; None when unset). Not for a copy of
        # this host's own toolchain (FROM mapped onto the host): made here faster than fetched.
        shared = self.sb.shared if populate_host is None else None
        cached = True
        from_shared = False
        stripped: list[str] = []
        with store.lock(key):
            if shared is not None and not store.exists(key):
                from_shared = shared.fetch_layer(store, key)
            if store.exists(key):
                stored: dict[str, Any] = store.meta(key)  # its JSON file, as written by commit
                parts = list(stored.get("parts", []))
            else:
                cached = False
                tmp = store.new_tmp(key)
                try:
                    if populate_host is not None:
                        populate_host(tmp)
                    if action is not None:
                        self._sandboxed(state, ins, action, tmp / "fs", network=network)
                    stripped = strip_layer(tmp / "fs")
                    meta: dict[str, object] = {
                        "parent": state.key,
                        "instruction": label or ins.text,
                        "line": ins.lineno,
                        "dockerfile": str(self.dockerfile),
                    }
                    if stripped:
                        meta["stripped"] = stripped[:STRIPPED_KEPT]
                        meta["stripped_count"] = len(stripped)
                    parts = store.commit(key, tmp, meta)
                except BaseException:
                    store.discard(tmp)
                    raise
                if shared is not None:
                    shared.put_layer(store, key)
        seconds = time.monotonic() - t0
        if cached:
            self.hits += 1
        else:
            self.misses += 1
        tag = "CACHED (shared) " if from_shared else "CACHED " if cached else ""
        self.note(f"#{ins.lineno} {tag}{label or ins.text} ({seconds:.2f}s)")
        step: dict[str, object] = {
            "line": ins.lineno,
            "instruction": label or ins.text,
            "key": key,
            "cached": cached,
            "seconds": round(seconds, 3),
        }
        if from_shared:
            step["shared"] = True
        if stripped:
            step["stripped"] = stripped[:STRIPPED_KEPT]
            shown = ", ".join(oneline(x) for x in stripped[:5])
            more = f" and {len(stripped) - 5} more" if len(stripped) > 5 else ""
            self.note(f"#{ins.lineno} stripped from the layer: {shown}{more}")
        self.steps.append(step)
        state.key = key
        if parts:
            state.layers.append((key, parts))

    def rlimits(self, proc: SandboxProcess) -> dict[str, int]:
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
        state: StageState,
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
        proc = self.sb.start_process(
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
                    raise self.fail(ins, over) from None
                raise
            over = self._over_limit(proc, tmpfs, "")
            if over:
                raise self.fail(ins, over)
            proc.kill_all()  # nothing of the step may change its files while they are copied
            export_upper(tmpfs / "u", fs)
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
            full = st.f_bavail * st.f_frsize < FULL_BYTES
        if full or "No space left on device" in error:
            return f"the build step exceeded the storage limit ({lim['storage_mb']} MB)"
        if hits.get("pids"):
            return f"the build step exceeded the process limit ({lim['pids']})"
        return None

    def _meta_step(self, state: StageState, ins: _dockerfile.Instruction, *parts: str) -> None:
        state.key = step_key(state.key, ins.keyword, *parts)
        self.steps.append({"line": ins.lineno, "instruction": ins.text, "key": state.key})
        self.note(f"#{ins.lineno} {ins.text}")

    def _arg_pairs(
        self, ins: _dockerfile.Instruction, env: dict[str, str]
    ) -> list[tuple[str, str | None]]:
        try:
            return _dockerfile.parse_key_values(ins, env, self.escape, allow_bare=True)
        except _dockerfile.DockerfileError as exc:
            raise self.fail(ins, str(exc).split(" (")[0]) from None

    def expand(self, ins: _dockerfile.Instruction, text: str, cfg: ImageConfig) -> str:
        try:
            return _dockerfile.expand(text, cfg.vars(), self.escape, ins.lineno)
        except _dockerfile.DockerfileError as exc:
            raise self.fail(ins, str(exc)) from None

    def words(self, ins: _dockerfile.Instruction, cfg: ImageConfig) -> list[str]:
        if ins.json is not None:
            return [self.expand(ins, w, cfg) for w in ins.json]
        try:
            return _dockerfile.expand_words(ins.args, cfg.vars(), self.escape)
        except _dockerfile.DockerfileError as exc:
            raise self.fail(ins, str(exc)) from None

    def _step(self, state: StageState, ins: _dockerfile.Instruction) -> None:
        cfg = state.config
        kw = ins.keyword
        if kw == "RUN":
            replay_steps.run_step(self, state, ins)
        elif kw in ("COPY", "ADD"):
            replay_steps.copy_step(self, state, ins)
        elif kw == "WORKDIR":
            path = self.expand(ins, ins.args, cfg)
            if not path:
                raise self.fail(ins, "WORKDIR requires a path")
            cfg.workdir = _context.posix_join(cfg.workdir, path)
            owner = cfg.user
            workdir = cfg.workdir

            def mkdir(proc: SandboxProcess) -> None:
                proc.file_op("mkdir", path=workdir, owner=owner)

            key = step_key(state.key, "WORKDIR", workdir, owner or "")
            self.fs_step(state, ins, key, action=mkdir)
        elif kw == "ENV":
            try:
                pairs = _dockerfile.parse_key_values(ins, cfg.vars(), self.escape)
            except _dockerfile.DockerfileError as exc:
                raise self.fail(ins, str(exc).split(" (")[0]) from None
            for k, v in pairs:
                cfg.env[k] = v or ""
            self._meta_step(state, ins, json.dumps(pairs))
        elif kw == "ARG":
            pairs = self._arg_pairs(ins, cfg.vars())
            for k, v in pairs:
                if v is None:
                    v = self.global_args.get(k, platform_arg(k))
                if v is not None:
                    cfg.args[k] = v
            self._meta_step(state, ins, json.dumps([[k, cfg.args.get(k)] for k, _ in pairs]))
        elif kw == "USER":
            user = self.expand(ins, ins.args, cfg).strip()
            if not user:
                raise self.fail(ins, "USER requires a user name")
            cfg.user = user
            self._meta_step(state, ins, user)
        elif kw == "LABEL":
            try:
                pairs = _dockerfile.parse_key_values(ins, cfg.vars(), self.escape)
            except _dockerfile.DockerfileError as exc:
                raise self.fail(ins, str(exc).split(" (")[0]) from None
            cfg.labels.update({k: v or "" for k, v in pairs})
            self._meta_step(state, ins, json.dumps(pairs))
        elif kw == "SHELL":
            assert ins.json is not None
            if not ins.json:
                raise self.fail(ins, "SHELL requires at least one argument")
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
            cfg.exposed.extend(self.words(ins, cfg))
            self._meta_step(state, ins, json.dumps(cfg.exposed))
        elif kw == "VOLUME":
            cfg.volumes.extend(self.words(ins, cfg))
            self._meta_step(state, ins, json.dumps(cfg.volumes))
        elif kw == "STOPSIGNAL":
            cfg.stopsignal = self.expand(ins, ins.args, cfg)
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
            raise self.fail(ins, "unexpected FROM")
        else:  # pragma: no cover - KNOWN and this switch agree
            raise self.fail(ins, f"the local backend cannot honour {kw}")
