"""``fake``: a sandbox without isolation, for tests of the logic above the sandbox.

:class:`FakeSandbox` keeps each session's files in a temporary folder on the host (its *root*;
the sandbox path ``/app/x`` is ``<root>/app/x``) and runs commands as ordinary host processes.
It honours the contract's bookkeeping — fresh sessions, files, uploads, downloads, listings,
mounts, the changes a session made — but none of its walls: no namespaces, users, limits or
network policy. Use it where a test checks what the code above the sandbox does (agents, tools,
trial and job bookkeeping, OpenEnv plumbing), never where it checks containment.

Commands:

* A *script* answers commands a test chose: ``FakeSandbox(script=[(regex, reply), …])``; the
  first regex found in the command's text decides, and the reply is an :class:`ExecResult`, a
  stdout text, or ``reply(session, text) -> ExecResult`` (which may change the session's files).
* With ``FakeSandbox(host=True)``, every other command runs on the host (``bash -c`` for a
  string) in the session's working folder, after the sandbox paths it names are mapped into the
  root (``/app/x`` → ``<root>/app/x``, for the root's own top-level folders, also as a shell
  parameter's default such as ``${LOGS:-/logs/verifier}``; host system folders such as
  ``/usr`` stay the host's). A script run as ``["bash", "/tests/test.sh"]`` has its text mapped
  too; what it calls in turn is not (a Python verifier sees the host's paths, and writes there).
  Without ``host=True`` (the default) an unscripted command answers exit 127: nothing runs.

Build: ``WORKDIR``, ``ENV``, ``USER`` and ``COPY``/``ADD`` of local files are replayed into a
template folder; ``RUN`` steps are never run (on the host, as whoever runs the tests, they
could change anything: ``useradd`` …) and are recorded in ``BuiltEnvironment.details["skipped"]``
with every other instruction the fake does not replay.
Every execution is recorded in :attr:`FakeSession.commands`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from repogym import dockerfile
from repogym.sandbox.base import (
    BuildError,
    BuiltEnvironment,
    Change,
    ChangeSet,
    DirEntry,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxError,
    Session,
)

__all__ = ["FakeSandbox", "FakeSession", "Reply", "Ran"]

Reply = ExecResult | str | Callable[["FakeSession", str], ExecResult]
HOST_FOLDERS = frozenset(
    [
        "bin",
        "sbin",
        "usr",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "etc",
        "proc",
        "dev",
        "sys",
        "run",
        "var",
        "opt",
        "boot",
        "srv",
        "mnt",
        "media",
    ]
)
"""Top-level folders that stay the host's in commands (the root may hold files there too)."""
_MAX_LINKS = 40
MARKER = "REPOGYM_FAKE_SESSION"
"""The environment variable every host command of a session carries (its session's id)."""
_SHELL_SYNTAX = re.compile(r"[;&|<>$`(){}*?\[\]~#!\n\\]")


@dataclass(frozen=True)
class Ran:
    """One command a session executed (or answered from its script)."""

    command: str
    cwd: str
    user: str | None
    env: dict[str, str]
    scripted: bool


class FakeSandbox(Sandbox):
    """Sessions in host folders, commands on the host; see the module's description."""

    name = "fake"

    def __init__(
        self,
        *,
        script: Sequence[tuple[str, Reply]] = (),
        host: bool = False,
        root: Path | None = None,
    ) -> None:
        self.script = [(re.compile(pattern), reply) for pattern, reply in script]
        self.host = host
        self.root = Path(root or tempfile.mkdtemp(prefix="repogym-fake-"))
        if root is None:  # its own folder goes with it
            weakref.finalize(self, shutil.rmtree, self.root, True)
        self.sessions: list[FakeSession] = []
        self._templates: dict[str, Path] = {}

    # -- build ----------------------------------------------------------------------------------

    def build(self, spec: EnvironmentSpec, *, log: Path | None = None) -> BuiltEnvironment:
        key = uuid.uuid4().hex[:16]
        template = self.root / "builds" / key
        template.mkdir(parents=True)
        built = BuiltEnvironment(
            "fake", key, spec.workdir or "/", dict(spec.env), details={"skipped": []}
        )
        if spec.context_dir is not None and spec.docker_image is None:
            path = spec.context_dir / spec.dockerfile
            try:
                text = path.read_text()
            except OSError as exc:
                raise BuildError(f"{path}: {exc.strerror or exc}") from None
            self._replay(dockerfile.parse(text), spec.context_dir, template, built)
        elif spec.docker_image:
            built.base_mapping = {"from": spec.docker_image, "host": "none (fake sandbox)"}
        if spec.workdir:
            built.workdir = spec.workdir
        built.env.update(spec.env)
        _host_path(template, built.workdir).mkdir(parents=True, exist_ok=True)
        self._templates[key] = template
        if log is not None:
            log.write_text(f"fake build {key}: skipped {built.details['skipped']}\n")
        return built

    def _replay(
        self, parsed: dockerfile.Dockerfile, context: Path, template: Path, built: BuiltEnvironment
    ) -> None:
        skipped: list[str] = []
        for ins in parsed.instructions:
            kw = ins.keyword
            if kw == "FROM":
                built.base_mapping = {"from": ins.args.split()[0], "host": "none (fake sandbox)"}
            elif kw == "WORKDIR":
                built.workdir = posixpath.join(built.workdir, ins.args.strip())
            elif kw == "ENV":
                for k, v in dockerfile.parse_key_values(ins, built.env, parsed.escape):
                    built.env[k] = v or ""
            elif kw == "USER":
                built.user = ins.args.strip() or None
            elif kw in ("COPY", "ADD") and "from" not in ins.flags:
                words = ins.json or dockerfile.expand_words(ins.args, built.env, parsed.escape)
                *sources, dest = words
                dest = posixpath.join(built.workdir, dest)
                for src in sources:
                    _copy_in(context / src, template, dest, many=len(sources) > 1)
            else:
                skipped.append(ins.text)
        built.details["skipped"] = skipped

    # -- sessions -------------------------------------------------------------------------------

    def start(self, built: BuiltEnvironment, spec: EnvironmentSpec) -> FakeSession:
        template = self._templates.get(built.key)
        if template is None:
            raise SandboxError(f"the fake sandbox did not build {built.key!r}")
        root = self.root / "sessions" / uuid.uuid4().hex[:16]
        shutil.copytree(template, root, symlinks=True)
        for name in ("tmp", "logs"):
            (root / name).mkdir(exist_ok=True)
        session = FakeSession(self, root, template, built)
        self.sessions.append(session)
        return session

    def close(self) -> None:
        """Close every session and remove the sandbox's folder."""
        for session in self.sessions:
            session.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _copy_in(src: Path, template: Path, dest: str, *, many: bool) -> None:
    if not src.exists():
        raise BuildError(f"COPY source not found in the build context: {src.name}")
    if src.is_dir():
        shutil.copytree(src, _host_path(template, dest), symlinks=True, dirs_exist_ok=True)
        return
    target = dest.rstrip("/") + "/" + src.name if dest.endswith("/") or many else dest
    host = _host_path(template, target)
    host.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, host)


def _host_path(root: Path, path: str) -> Path:
    """``path`` (absolute in the sandbox) under ``root``, lexically: ``..`` stops at the root."""
    return root.joinpath(*[p for p in posixpath.normpath("/" + path).split("/") if p])


def _resolve(root: Path, path: str, beneath: str | None = None) -> Path:
    """Where the absolute sandbox path ``path`` is under ``root``, symlinks followed as inside
    the sandbox (an absolute target starts again at the root). With ``beneath``, leaving that
    folder (``..``, an absolute or escaping link) is ``OSError(EXDEV)``."""
    todo = [p for p in path.split("/") if p]
    floor: list[str] = []
    if beneath is not None:
        floor = [p for p in posixpath.normpath("/" + beneath).split("/") if p]
        if todo[: len(floor)] != floor:
            raise OSError(errno.EXDEV, "path is not beneath the folder it must stay in", path)
        todo = todo[len(floor) :]
    parts = list(floor)
    links = 0
    while todo:
        name = todo.pop(0)
        if name == ".":
            continue
        if name == "..":
            if beneath is not None and len(parts) <= len(floor):
                raise OSError(errno.EXDEV, "path leaves the folder it must stay in", path)
            if parts:
                parts.pop()
            continue
        host = root.joinpath(*parts, name)
        if host.is_symlink():
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, "too many symbolic links", path)
            target = os.readlink(host)
            if target.startswith("/"):
                if beneath is not None:
                    raise OSError(errno.EXDEV, "path leaves the folder it must stay in", path)
                parts = []
            todo = [p for p in target.split("/") if p] + todo
            continue
        parts.append(name)
    return root.joinpath(*parts)


def map_paths(root: Path, text: str) -> str:
    """``text`` with the sandbox paths of ``root``'s own top-level folders mapped into it
    (``/app/x`` → ``<root>/app/x``, also as a shell default: ``${LOGS:-/logs/x}``);
    :data:`HOST_FOLDERS` stay the host's."""
    names = sorted((p.name for p in root.iterdir() if p.name not in HOST_FOLDERS), key=len)
    if not names:
        return text
    alt = "|".join(re.escape(n) for n in reversed(names))
    before = r"(?:(?<![\w.\-/~$])|(?<=:[-=+?]))"  # not inside a word or path; or ${X:-/p}
    pattern = re.compile(rf"{before}/(?:{alt})(?=/|$|[\s'\";:|&)<>}}])")
    return pattern.sub(lambda m: str(root) + m.group(0), text)


def run_on_host(
    argv: list[str],
    cwd: Path,
    variables: dict[str, str],
    timeout_s: float | None,
    root: Path,
    marker: str,
) -> ExecResult:
    """Run ``argv`` as a host process in its own process group, with the host's ``PATH``,
    ``HOME`` in the root's ``/tmp`` and ``REPOGYM_FAKE_SESSION=marker`` (what
    :func:`kill_marked` finds its processes by). A timeout kills the group."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "tmp"),
        "LANG": "C.UTF-8",
        **{k: v for k, v in variables.items() if k != "PATH"},
        MARKER: marker,
    }
    # Output goes to files, not pipes: a background job keeping them open does not hold the
    # command's result back (the command ends when its own process does).
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            return ExecResult(127, "", f"{argv[0]}: {exc.strerror}\n", 0.0)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_marked(marker)  # the command's whole tree, also what left its group
            proc.wait()
            timed_out = True
        took = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = _text(out.read()), _text(err.read())
    if timed_out:
        return ExecResult(None, stdout, stderr, took, True)
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    return ExecResult(code, stdout, stderr, took)


class FakeSession(Session):
    """One session of a :class:`FakeSandbox`: a host folder and host processes."""

    def __init__(
        self, sandbox: FakeSandbox, root: Path, template: Path, built: BuiltEnvironment
    ) -> None:
        self.sandbox = sandbox
        self.root = root
        self.template = template
        self.built = built
        self.commands: list[Ran] = []
        self.marker = uuid.uuid4().hex
        self.closed = False

    def host_path(self, path: str, *, beneath: str | None = None) -> Path:
        """The host path of the sandbox path ``path`` (symlinks followed inside the root)."""
        if not path.startswith("/"):
            path = posixpath.join(self.built.workdir, path)
        return _resolve(self.root, path, beneath)

    # -- commands -------------------------------------------------------------------------------

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
        text = command if isinstance(command, str) else shlex.join(command)
        where = cwd or self.built.workdir
        for pattern, reply in self.sandbox.script:
            if pattern.search(text):
                self.commands.append(Ran(text, where, user, dict(env or {}), True))
                if isinstance(reply, ExecResult):
                    return reply
                if isinstance(reply, str):
                    return ExecResult(0, reply, "", 0.0)
                return reply(self, text)
        self.commands.append(Ran(text, where, user, dict(env or {}), False))
        if not self.sandbox.host:
            return ExecResult(127, "", f"fake sandbox: no scripted reply for {text!r}\n", 0.0)
        return self._run_on_host(command, timeout_s, env, where)

    def map_paths(self, text: str) -> str:
        """``text`` with the sandbox paths of the root's own top-level folders mapped into it."""
        return map_paths(self.root, text)

    def _mapped_argv(self, argv: list[str]) -> list[str]:
        """``argv`` mapped; ``bash|sh SCRIPT …`` with SCRIPT in the root runs the script's
        text mapped too (what the script calls in turn is not)."""
        if len(argv) >= 2 and argv[0] in ("bash", "sh") and argv[1].startswith("/"):
            try:
                script = self.host_path(argv[1])
                text = script.read_text()
            except (OSError, UnicodeDecodeError):
                pass
            else:
                rest = [self.map_paths(a) for a in argv[2:]]
                return [argv[0], "-c", self.map_paths(text), str(script), *rest]
        return [self.map_paths(a) for a in argv]

    def _run_on_host(
        self,
        command: str | list[str],
        timeout_s: float | None,
        env: dict[str, str] | None,
        cwd: str,
    ) -> ExecResult:
        if isinstance(command, str) and not _SHELL_SYNTAX.search(command):
            words = shlex.split(command)
            if len(words) >= 2 and words[0] in ("bash", "sh"):
                command = words  # "bash /x.sh" runs a script, mapped as for a list
        argv = (
            ["bash", "-c", self.map_paths(command)]
            if isinstance(command, str)
            else self._mapped_argv(command)
        )
        folder = self.host_path(cwd)
        if not folder.is_dir():
            return ExecResult(1, "", f"fake sandbox: no folder {cwd}\n", 0.0)
        variables = {**self.built.env, **(env or {})}
        marker = f"{self.marker}.{uuid.uuid4().hex[:8]}"  # kill_all: the prefix; a timeout: this
        return run_on_host(argv, folder, variables, timeout_s, self.root, marker)

    def kill_all(self) -> None:
        kill_marked(self.marker)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.kill_all()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- files ----------------------------------------------------------------------------------

    def read(self, path: str, *, user: str | None = None, beneath: str | None = None) -> bytes:
        return self.host_path(path, beneath=beneath).read_bytes()

    def write(
        self,
        path: str,
        data: bytes | str,
        mode: int = 0o644,
        *,
        user: str | None = None,
        beneath: str | None = None,
    ) -> None:
        raw = data.encode() if isinstance(data, str) else data
        parent, _, name = path.rstrip("/").rpartition("/")
        folder = self.host_path(parent or "/", beneath=beneath)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        if user not in (None, "root"):
            target = self.host_path(path, beneath=beneath)
            with open(target, "wb") as f:
                f.write(raw)
            return
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, mode)
        os.replace(tmp, target)

    def listdir(
        self, path: str, *, user: str | None = None, beneath: str | None = None
    ) -> list[DirEntry]:
        out = []
        with os.scandir(self.host_path(path, beneath=beneath)) as it:
            for e in it:
                if e.is_symlink():
                    out.append(DirEntry(e.name, "symlink"))
                elif e.is_dir():
                    out.append(DirEntry(e.name, "dir"))
                elif e.is_file():
                    out.append(DirEntry(e.name, "file", e.stat().st_size))
                else:
                    out.append(DirEntry(e.name, "special"))
        return sorted(out, key=lambda e: e.name)

    def upload(self, src: Path, dest: str) -> None:
        self.remove(dest)
        target = self.host_path(dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True)
        else:
            shutil.copy2(src, target)

    def download(self, src: str, dest: Path) -> None:
        source = self.host_path(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest)

    def remove(self, path: str) -> None:
        target = _host_path(self.root, path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()

    def export_changes(self, root: str, dest: Path) -> ChangeSet:
        """The differences between the session's folder ``root`` and the built template's."""
        new, old = _host_path(self.root, root), _host_path(self.template, root)
        dest.mkdir(parents=True, exist_ok=True)
        changes: list[Change] = []
        _diff(new, old, "", dest, changes)
        return ChangeSet(root, changes, dest)


def _diff(new: Path, old: Path, rel: str, dest: Path, out: list[Change]) -> None:
    names = sorted({p.name for p in _entries(new)} | {p.name for p in _entries(old)})
    for name in names:
        path = f"{rel}/{name}" if rel else name
        a, b = new / name, old / name
        if not (a.exists() or a.is_symlink()):
            out.append(Change(path, "deleted"))
            continue
        st = a.lstat()
        if a.is_symlink():
            target = os.readlink(a)
            if not b.is_symlink() or os.readlink(b) != target:
                (dest / path).parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, dest / path)
                out.append(Change(path, "symlink", target=target))
        elif a.is_dir():
            if not b.is_dir() or b.is_symlink():
                (dest / path).mkdir(parents=True, exist_ok=True)
                out.append(Change(path, "dir", mode=st.st_mode & 0o7777))
            _diff(a, b, path, dest, out)
        elif a.is_file():
            same = b.is_file() and not b.is_symlink() and b.read_bytes() == a.read_bytes()
            if not same or (b.stat().st_mode & 0o7777) != (st.st_mode & 0o7777):
                (dest / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(a, dest / path)
                out.append(Change(path, "file", mode=st.st_mode & 0o7777, size=st.st_size))
        else:
            out.append(Change(path, "special"))


def _entries(folder: Path) -> list[Path]:
    if folder.is_symlink() or not folder.is_dir():
        return []
    return list(folder.iterdir())


def kill_marked(marker: str) -> None:
    """Kill every host process whose ``REPOGYM_FAKE_SESSION`` is ``marker`` or starts with
    ``marker.`` (found in ``/proc``, never by a process group number that may be reused)."""
    exact, below = f"{MARKER}={marker}".encode(), f"{MARKER}={marker}.".encode()
    for _ in range(3):  # a process may fork while the others are killed
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    words = f.read().split(b"\0")
                if any(w == exact or w.startswith(below) for w in words):
                    found.append(int(entry.name))
            except OSError:
                continue
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")
