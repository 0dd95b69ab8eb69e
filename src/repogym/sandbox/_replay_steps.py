"""The instructions of a Dockerfile that do real work, for :class:`._replay.Builder`:
``FROM`` (a pulled image, or the host's matching toolchain), ``RUN``, ``COPY``/``ADD`` from the
build context and ``COPY --from`` a stage, a pulled image or a tool image's stand-in.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from repogym import dockerfile as _dockerfile
from repogym.sandbox import (
    _apt_sources,
    _cabundle,
    _confine,
    _context,
    _images,
    _pull,
    _registry,
    _toolchains,
    _unpack,
)
from repogym.sandbox._image_export import epoch_from_env as build_epoch
from repogym.sandbox._layerfs import (
    ArchiveError,
    copy_fd_in,
    copy_in,
    extract_archive,
    is_archive,
    oneline,
)
from repogym.sandbox._layers import step_key
from repogym.sandbox._replay_state import ImageConfig, StageState
from repogym.sandbox._runtime import SandboxProcess
from repogym.sandbox.base import BuildError, SandboxError

if TYPE_CHECKING:
    from repogym.sandbox._replay import Builder


def base_state(b: Builder, ins: _dockerfile.Instruction, image: str) -> StageState:
    if image.lower() == "scratch":
        raise b.fail(ins, "FROM scratch is not supported by the local backend")
    pulled, why = pull_image(b, ins, image)
    if pulled is not None:
        base = pulled_base(b, ins, image, pulled)
    else:
        try:
            base = _toolchains.resolve(image)
        except _toolchains.UnsupportedBase as exc:
            raise b.fail(ins, str(exc) + (f"; {why}" if why else "")) from None
        if why:
            note = base.mapping.get("note")
            base.mapping["note"] = f"{why}; {note}" if note else why
    b.note(f"#{ins.lineno} FROM {image} -> {base.mapping.get('host')}")
    if base.mapping.get("note"):
        b.note(f"#{ins.lineno} note: {base.mapping['note']}")
    key = step_key("", "FROM", base.kind, base.fingerprint, "rootless" * b.sb.rootless)
    state = StageState(key, [], ImageConfig(env=dict(base.env), workdir=base.workdir), base)
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
            state.config.healthcheck = image_healthcheck(health)
    if pulled is not None and base.workdir != "/" and not _is_dir(pulled.rootfs, base.workdir):
        workdir = base.workdir

        def mkdir(proc: SandboxProcess) -> None:
            # Like BuildKit: the image's WorkingDir exists for the steps that run in it.
            proc.file_op("mkdir", path=workdir, owner=None)

        wd_key = step_key(key, "WORKDIR", workdir, "")
        b.fs_step(state, ins, wd_key, action=mkdir, label=f"(base) WORKDIR {workdir}")
    if base.populate is not None:

        def populate(tmp: Path) -> None:
            assert base.populate is not None
            base.populate(tmp / "fs")

        b.fs_step(state, ins, key, populate_host=populate, label=f"FROM {image}")
    else:
        b.steps.append({"line": ins.lineno, "instruction": ins.text, "key": key})
    for cmd in base.post_commands:
        post_key = step_key(state.key, "RUN", json.dumps(["/bin/sh", "-c", cmd]))

        def run_post(proc: SandboxProcess, cmd: str = cmd) -> None:
            res = proc.exec(
                ["/bin/sh", "-c", cmd],
                env={**b.sb.ca_env, **state.config.env},
                cwd="/",
                user="root",
                network=None,
                rlimits=b.rlimits(proc),
                timeout_s=b.remaining(ins),
            )
            if res.exit_code != 0:
                raise b.fail(ins, f"base setup `{cmd}` failed: {res.stderr[-2000:]!r}")

        b.fs_step(state, ins, post_key, action=run_post, label=f"(base) {cmd}")
    return state


def _is_dir(root: Path, path: str) -> bool:
    """Whether ``path`` is a folder in the image root ``root`` (looked up inside it)."""
    with _confine.Root.at(root) as confined:
        st = confined.stat(path.strip("/"))
    return st is not None and stat.S_ISDIR(st.st_mode)


def pull_image(
    b: Builder, ins: _dockerfile.Instruction, image: str
) -> tuple[_pull.PulledImage | None, str]:
    """Pull ``image`` when a registry endpoint is configured for it.

    Returns ``(pulled, "")``, or ``(None, why)`` when the host mapping should be used
    (``why`` is empty when no endpoint is configured). A registry that answers with
    something broken (digest mismatch, unsafe layer) fails the build.
    """
    try:
        ref = _images.parse(image)
    except _images.ImageRefError as exc:
        raise b.fail(ins, str(exc)) from None
    endpoint = _pull.endpoint_for(ref, b.sb.registries)
    if endpoint is None and ref.digest and b.sb.oci.cached(ref.digest) is not None:
        endpoint = "cache"  # pinned and already here (a task's published image): no registry
    if endpoint is None:
        return None, ""
    if b.sb.rootless:
        return None, "pulled images need root: mapped onto the host instead"
    scratch = b.sb.cache_root / "run"
    try:
        pulled = b.sb.oci.pull(ref, endpoint, scratch=scratch)
    except (_registry.Unreachable, _registry.NotFound) as exc:
        return None, f"not pulled ({oneline(str(exc))}): mapped onto the host instead"
    except (_registry.RegistryError, _unpack.UnpackError) as exc:
        raise b.fail(ins, f"pulling {ref.familiar}: {oneline(str(exc))}") from None
    verb = "cached" if pulled.cached else "pulled"
    b.note(
        f"#{ins.lineno} {verb} {ref.canonical} from {endpoint}: {pulled.digest} "
        f"({pulled.size / 1e6:.1f} MB, {pulled.seconds:.2f}s)"
    )
    return pulled, ""


def pulled_base(
    b: Builder, ins: _dockerfile.Instruction, image: str, pulled: _pull.PulledImage
) -> _toolchains.BaseImage:
    cfg = pulled.image_config
    env: dict[str, str] = {}
    for item in cfg.get("Env") or []:  # type: ignore[attr-defined]
        k, _, v = str(item).partition("=")
        env[k] = v
    env.setdefault("PATH", _toolchains.DEFAULT_PATH)
    with _confine.Root.at(pulled.rootfs) as confined:
        has_sleep = any(
            confined.stat(f"{d}/sleep") is not None
            for d in ("bin", "usr/bin", "usr/local/bin", "sbin", "usr/sbin")
        )
    if not has_sleep:
        raise b.fail(
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


# -- RUN


def run_step(b: Builder, state: StageState, ins: _dockerfile.Instruction) -> None:
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
        raise b.fail(ins, "RUN needs a command")
    # The CA bundle's variables are not part of the step (nor of its cache key).
    env = {**cfg.args, **cfg.env}
    env.setdefault("PATH", _toolchains.DEFAULT_PATH)
    # Reproducible steps, as BuildKit's SOURCE_DATE_EPOCH: Python writes hash-checked .pyc
    # files instead of ones stamped with the time their sources were unpacked, wheels get
    # fixed times (unless the Dockerfile sets it itself).
    env.setdefault("SOURCE_DATE_EPOCH", str(build_epoch()))
    network = ins.flags.get("network") != "none"
    key = step_key(
        state.key,
        "RUN",
        json.dumps(argv),
        json.dumps(sorted(cfg.args.items())),
        script or "",
        "net" if network else "nonet",
        f"sde={env['SOURCE_DATE_EPOCH']}",
    )
    user, workdir = cfg.user or "root", cfg.workdir
    tail: list[str] = []

    def sink(chunk: bytes) -> None:
        text = chunk.decode("utf-8", errors="replace")
        if b.log is not None:
            b.log.write(text)
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
            env=_cabundle.resolve_env(
                b.sb.ca_bundle, env, lambda path: bool(proc.file_op("stat", path=path))
            ),
            cwd=workdir,
            user=user,
            network=None,
            rlimits=b.rlimits(proc),
            timeout_s=b.remaining(ins),
            on_output=sink,
        )
        if b.log is not None:
            b.log.flush()
        if res.timed_out:
            raise b.fail(ins, "RUN step timed out (build_timeout_sec)")
        if res.error:
            raise b.fail(ins, f"RUN could not start: {res.error}")
        if res.exit_code != 0:
            code = res.exit_code if res.exit_code is not None else f"signal {res.signal}"
            missing = _apt_missing("".join(tail)) if state.base.host_mapped else None
            if missing:
                why = _apt_sources.explain(missing, "".join(tail), _added_sources(proc))
                if why:
                    raise b.fail(ins, why)
                m = state.base.mapping
                raise b.fail(
                    ins,
                    f"apt-get cannot install {missing}: the base image {m.get('from')} is "
                    f"mapped onto the {m.get('base') or m.get('host')}, whose package archive "
                    "does not provide it (see base_mapping; a registry mirror gives the real "
                    "image, docs/sandbox.md)",
                )
            out = "".join(tail).splitlines()[-25:]
            detail = "\n".join(out)
            raise BuildError(
                f"{b.dockerfile.name} line {ins.lineno}: RUN failed with exit code {code} "
                f"({ins.text})" + (f"\n--- output (tail) ---\n{detail}" if detail else "")
            )

    b.fs_step(state, ins, key, action=action, network=network)


# -- COPY / ADD


def _owner_and_mode(
    b: Builder, ins: _dockerfile.Instruction, cfg: ImageConfig
) -> tuple[str | None, int | None]:
    """``COPY``/``ADD`` ``--chown`` (variables expanded) and ``--chmod`` (octal)."""
    chown = b.expand(ins, ins.flags["chown"], cfg) if ins.flags.get("chown") else None
    chmod = None
    if ins.flags.get("chmod"):
        try:
            chmod = int(ins.flags["chmod"], 8)
        except ValueError:
            raise b.fail(ins, f"invalid --chmod {ins.flags['chmod']!r}") from None
    return chown, chmod


def copy_step(b: Builder, state: StageState, ins: _dockerfile.Instruction) -> None:
    if ins.flags.get("from"):
        copy_from_step(b, state, ins)
        return
    cfg = state.config
    words = b.words(ins, cfg)
    heredocs = {h.name: h for h in ins.heredocs}
    if heredocs:
        try:
            rest = _dockerfile.expand_words(ins.args_without_heredocs, cfg.vars(), b.escape)
        except _dockerfile.DockerfileError as exc:
            raise b.fail(ins, str(exc)) from None
        words = [*[f"<<{n}" for n in heredocs], *rest]
    if len(words) < 2:
        raise b.fail(ins, f"{ins.keyword} requires at least two arguments")
    *srcs, dest = words
    dest_abs = _context.posix_join(cfg.workdir, dest)
    dest_is_dir = dest.endswith("/") or dest in (".", "..")
    file_srcs = [s for s in srcs if not s.startswith("<<")]
    try:
        sources = _context.resolve_sources(b.context, file_srcs, b.ignore)
    except _context.ContextError as exc:
        raise b.fail(ins, str(exc)) from None
    count = len(sources) + len(heredocs)
    if count > 1 and not dest_is_dir:
        raise b.fail(
            ins,
            f"when using {ins.keyword} with more than one source file, the destination "
            "must be a directory and end with a /",
        )
    chown, chmod = _owner_and_mode(b, ins, cfg)
    bodies: dict[str, str] = {}
    for n, h in heredocs.items():
        try:
            body = _dockerfile.expand(h.body, cfg.vars(), b.escape) if h.expand else h.body
            bodies[n] = body
        except _dockerfile.DockerfileError:
            # The message would quote the body: name the heredoc only.
            raise b.fail(ins, f"bad variable substitution in heredoc {n}") from None
    extract = ins.keyword == "ADD"
    storage_mb = int(b.limits["storage_mb"])  # type: ignore[call-overload]
    content = _context.hash_sources(sources)
    # Copied files take the build's epoch as their time, not the time the task folder was
    # written: the layer (and the image made from it) is the same wherever it is built.
    epoch = build_epoch()
    key = step_key(
        state.key,
        ins.keyword,
        json.dumps([srcs, dest_abs, dest_is_dir, chown, chmod]),
        content,
        json.dumps(sorted(bodies.items())),
        f"mtime={epoch}",
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
                copy_in(
                    proc,
                    src.path,
                    dest_abs,
                    include=src.include,
                    owner=chown,
                    chmod=chmod,
                    mtime=epoch,
                )
            elif extract and is_archive(src.path):
                scratch = b.sb.cache_root / "run"
                with tempfile.TemporaryDirectory(prefix="add-", dir=scratch) as tmpd:
                    out = Path(tmpd, "archive")
                    try:
                        extract_archive(src.path, out, storage_mb=storage_mb, label=src.rel)
                    except ArchiveError as exc:
                        raise b.fail(ins, f"ADD {oneline(str(exc))}") from None
                    copy_in(proc, out, dest_abs, include=None, owner=chown, chmod=chmod)
            else:
                target = _context.posix_join(dest_abs, src.name) if into_dir else dest_abs
                copy_in(proc, src.path, target, include=None, owner=chown, chmod=chmod, mtime=epoch)

    try:
        b.fs_step(state, ins, key, action=action)
    except SandboxError as exc:
        if isinstance(exc, BuildError):
            raise
        raise b.fail(ins, str(exc)) from None


# -- COPY --from


def copy_from_step(b: Builder, state: StageState, ins: _dockerfile.Instruction) -> None:
    """``COPY --from=<stage|index|image>``: copy out of another stage's file system, a
    pulled image's root, or a tool image's stand-in (:mod:`._toolimages`)."""
    cfg = state.config
    source = b.expand(ins, ins.flags["from"], cfg)
    words = b.words(ins, cfg)
    if len(words) < 2:
        raise b.fail(ins, "COPY requires at least two arguments")
    *srcs, dest = words
    dest_abs = _context.posix_join(cfg.workdir, dest)
    dest_is_dir = dest.endswith("/") or dest in (".", "..")
    chown, chmod = _owner_and_mode(b, ins, cfg)
    stage_idx = b.stage_ref(source, b.current)
    with contextlib.ExitStack() as stack:
        if stage_idx is not None:
            src_state = b.build_stage(stage_idx)
            origin = f"stage:{src_state.key}"
            root = stack.enter_context(stage_root(b, src_state))
        else:
            root, origin = image_root(b, ins, source)
        matches = from_sources(b, ins, root, srcs, source)
        for _name, fd in matches:
            stack.callback(os.close, fd)
        if len(matches) > 1 and not dest_is_dir:
            raise b.fail(
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
            for name, fd in matches:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    copy_fd_in(proc, fd, dest_abs, include=None, owner=chown, chmod=chmod)
                else:
                    target = _context.posix_join(dest_abs, name) if into_dir else dest_abs
                    copy_fd_in(proc, fd, target, include=None, owner=chown, chmod=chmod)

        try:
            b.fs_step(state, ins, key, action=action)
        except SandboxError as exc:
            if isinstance(exc, BuildError):
                raise
            raise b.fail(ins, str(exc)) from None


@contextlib.contextmanager
def stage_root(b: Builder, src: StageState) -> Iterator[Path]:
    """The merged root of a built stage, seen from the host (a sandbox with nothing
    running in it holds the mounts while files are copied out)."""
    proc = b.sb.start_process(src.layers, network=False, storage_mb=64, rootfs=src.base.rootfs)
    try:
        yield (Path(f"/proc/{proc.bwrap_pid}/root") / b.sb.mountpoint.relative_to("/") / "root")
    finally:
        proc.close()


def image_root(b: Builder, ins: _dockerfile.Instruction, source: str) -> tuple[Path, str]:
    """The root of an image named by ``COPY --from``: pulled, or a tool image's stand-in."""
    try:
        ref = _images.parse(source)
    except _images.ImageRefError:
        msg = f"COPY --from={source}: no such stage, and not an image name"
        raise b.fail(ins, msg) from None
    pulled, why = pull_image(b, ins, source)
    if pulled is not None:
        return pulled.rootfs, f"image:{pulled.digest}"
    tool = _images.tool_image(ref)
    if tool is not None:
        from repogym.sandbox import _toolimages

        try:
            root, version = _toolimages.tool_root(ref, tool, b.sb.cache_root)
        except _toolimages.ToolImageError as exc:
            raise b.fail(ins, f"COPY --from={source}: {oneline(str(exc))}") from None
        b.note(f"#{ins.lineno} COPY --from={source} -> {tool.pypi} {version} from PyPI")
        return root, f"tool:{tool.pypi}:{version}"
    reason = why or (
        f"no registry endpoint is configured for {ref.registry} "
        f"({_pull.ENV_VAR}, see docs/sandbox.md)"
    )
    raise b.fail(
        ins,
        f"COPY --from={source}: not a build stage of this Dockerfile, {reason}, and it is "
        "not a known tool image",
    )


def from_sources(
    b: Builder, ins: _dockerfile.Instruction, root: Path, srcs: list[str], source: str
) -> list[tuple[str, int]]:
    """Open the source paths inside ``root`` (symlinks followed, never out of it: see
    :mod:`._confine`); ``(name, descriptor)`` of each regular file or folder found."""
    out: list[tuple[str, int]] = []
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
    with _confine.Root.at(root) as confined:
        try:
            for src in srcs:
                parts = [p for p in src.split("/") if p not in ("", ".")]
                if parts and any(c in parts[-1] for c in "*?["):
                    folder = "/".join(parts[:-1])
                    try:
                        listing = confined.names(folder)
                    except OSError:
                        listing = []
                    names = [n for n in listing if fnmatch.fnmatchcase(n, parts[-1])]
                    wanted = [(n, f"{folder}/{n}") for n in names]
                else:
                    wanted = [(parts[-1] if parts else "", "/".join(parts))]
                found = 0
                for name, rel in wanted:
                    try:
                        fd = confined.open(rel, flags)
                    except OSError:
                        continue  # a dangling link, a loop, nothing there
                    if stat.S_IFMT(os.fstat(fd).st_mode) not in (stat.S_IFREG, stat.S_IFDIR):
                        os.close(fd)
                        continue
                    out.append((name, fd))
                    found += 1
                if not found:
                    raise b.fail(ins, f"COPY --from={source}: {src} not found")
        except BaseException:
            for _name, fd in out:
                os.close(fd)
            raise
    return out


def _added_sources(proc: SandboxProcess) -> dict[str, list[str]]:
    """Apt sources the Dockerfile's steps added (:func:`._apt_sources.added_sources`)."""

    def list_dir(path: str) -> list[str]:
        entries = proc.file_op("list", path=path)
        assert isinstance(entries, list)
        return [str(e[0]) for e in entries if e[1] == "file"]

    def read(path: str) -> str:
        data = proc.file_op("read", path=path, data_out=True)
        assert isinstance(data, bytes)
        return data.decode("utf-8", errors="replace")

    return _apt_sources.added_sources(list_dir, read)


APT_MISSING_PATTERNS = (
    re.compile(r"^E: Unable to locate package (\S+)", re.M),
    re.compile(r"^E: Package '([^']+)' has no installation candidate", re.M),
    re.compile(r"^E: Version '[^']+' for '([^']+)' was not found", re.M),
    re.compile(r"^E: Couldn't find any package by (?:glob|regex) '([^']+)'", re.M),
)


def _apt_missing(output: str) -> str | None:
    """The packages an ``apt-get install`` could not find, as ``'a', 'b'`` (None: other
    failure)."""
    names: list[str] = []
    for pattern in APT_MISSING_PATTERNS:
        names += [n for n in pattern.findall(output) if n not in names]
    return ", ".join(f"package {n!r}" for n in names) if names else None


def image_healthcheck(health: dict[str, object]) -> str | None:
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
