"""Export a task set as a deployable OpenEnv package (no ``openenv`` import here).

The package holds ``openenv.yaml`` (with the RFC 008 ``validation:`` block and its runtime plan
``validation/runtime.json``: :mod:`repogym.openenv.manifest`), a server ``Dockerfile``, a
``README.md`` with Hugging Face Space front matter, ``pyproject.toml``, a two-line
``server/app.py`` over :func:`repogym.openenv.build_app`, ``wheels/`` and ``tasks/`` copied
byte for byte.

How the image gets repogym (:func:`resolve_requirement`): always with the ``openenv`` and
``docker`` extras (the server and its task containers). A local wheel given with
``--requirement`` is copied into ``wheels/`` and installed from that copy; without
``--requirement``, a repogym installed from a package index is pinned at its version, and any
other install (a checkout, a wheel file) is packed as a wheel of the running build and shipped
the same way. ``pyproject.toml`` names repogym by name and version, never by a path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from repogym import __version__
from repogym.atomic import publish_dir, staging_dir
from repogym.openenv import _wheel, manifest
from repogym.openenv.tasks import is_text_only
from repogym.taskdir import Task, iter_task_dirs, load_task

PORT = 8000
APP_PY = "from repogym.openenv import build_app\napp = build_app()\n"
EXTRAS = ("docker", "openenv")
"""What the image needs: the server (``openenv``) and its task containers (``docker``)."""
SERVE = f'exec uvicorn server.app:app --host "${{HOST:-0.0.0.0}}" --port "${{PORT:-{PORT}}}"'
CMD = json.dumps(["sh", "-c", SERVE])
WHEELS = "wheels"
IMAGE_WHEELS = "/tmp/wheels"
WHEELS_README = """Wheels here are installed when the image is built (`pip install --find-links`).
repogym's own wheel is here when the export shipped one. Put dependency wheels beside it and
build with `--build-arg PIP_NO_INDEX=1` to build without a package index.
"""


@dataclass
class ExportResult:
    out: Path
    tasks: int
    text_only: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    requirement: Shipped | None = None

    @property
    def notes(self) -> list[str]:
        """What the user should know about how the image gets repogym."""
        return [self.requirement.note] if self.requirement and self.requirement.note else []

    @property
    def warnings(self) -> list[str]:
        if not self.text_only:
            return []
        return [
            f"{len(self.text_only)} text-only task(s) have no environment and cannot be served: "
            + ", ".join(self.text_only[:10])
            + ("…" if len(self.text_only) > 10 else "")
        ]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "tasks"


def default_requirement() -> str:
    """``repogym[docker,openenv]`` pinned at the installed version (what the image installs
    from an index when the running repogym came from one)."""
    return f"repogym[{','.join(EXTRAS)}]=={__version__}"


@dataclass(frozen=True)
class Shipped:
    """How the package's image gets repogym."""

    install: str
    """The ``pip install`` argument in the Dockerfile."""
    dependency: str
    """The PEP 508 dependency in ``pyproject.toml`` (a name and version, never a path)."""
    wheel: Path | None = None
    """A wheel copied into ``wheels/`` (None: installed from the index)."""
    note: str | None = None
    """Said to the user (for example: a wheel of the running build is shipped)."""


def _with_extras(extras: set[str]) -> str:
    return ",".join(sorted(extras | set(EXTRAS)))


def _local_path(spec: str) -> Path | None:
    """The local file ``spec`` names (a path or a ``file:`` URL), or None for a pip spec."""
    if spec.startswith("file:"):
        return Path(unquote(urlparse(spec).path))
    if spec.startswith(("/", ".", "~")):
        return Path(spec).expanduser()
    if "@" not in spec and (os.sep in spec or spec.endswith(".whl")):
        return Path(spec).expanduser()
    return None


def _wheel_requirement(path: Path, extras: set[str], note: str | None = None) -> Shipped:
    if not path.is_file() or path.suffix != ".whl":
        raise ValueError(
            f"--requirement {path}: a local path must be a wheel file of repogym (build one "
            "in the checkout with `uv build --wheel` or `pip wheel --no-deps .`)"
        )
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise ValueError(f"--requirement {path}: {exc}") from None
    if name != canonicalize_name(_wheel.DIST):
        raise ValueError(f"--requirement {path}: a wheel of {name}, not of repogym")
    extra = _with_extras(extras)
    return Shipped(
        install=f"{IMAGE_WHEELS}/{path.name}[{extra}]",
        dependency=f"repogym[{extra}]=={version}",
        wheel=path,
        note=note,
    )


def resolve_requirement(requirement: str | None, scratch: Path) -> Shipped:
    """What the image installs for ``--requirement`` (see the module's notes). ``scratch`` is
    where a wheel of the running repogym is written when one is needed. ValueError (one line)
    for a spec that cannot give the image repogym."""
    if requirement is None or not requirement.strip():
        if _wheel.installed_from_index():
            return Shipped(default_requirement(), default_requirement())
        try:
            wheel = _wheel.build_own_wheel(scratch)
        except _wheel.NoWheel as exc:
            raise ValueError(str(exc)) from None
        note = (
            f"repogym {__version__} here was installed from {_wheel.installed_source()}, not "
            f"from a package index: shipping a wheel of it in {WHEELS}/"
        )
        return _wheel_requirement(wheel, set(), note)
    spec = requirement.strip()
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in spec):
        # It is written into the exported Dockerfile: a newline would be a line of its own.
        raise ValueError(
            f"--requirement {spec!r}: holds a newline or control character; give one spec"
        )
    # ``path.whl[extra,…]``: a local wheel with extras.
    found = re.fullmatch(r"(?P<path>.+?)\[(?P<extras>[A-Za-z0-9_.,\s-]*)\]", spec)
    bare, extras = (found["path"], found["extras"]) if found else (spec, "")
    if "://" in bare and "@" not in bare and not bare.startswith("file:"):
        raise ValueError(f"--requirement {spec!r}: name the project with a URL: 'repogym @ URL'")
    local = _local_path(bare)
    if local is not None:
        wanted = {e.strip() for e in extras.split(",") if e.strip()}
        return _wheel_requirement(local, wanted)
    try:
        req = Requirement(spec)
    except InvalidRequirement as exc:
        raise ValueError(f"--requirement {spec!r}: not a pip requirement ({exc})") from None
    if canonicalize_name(req.name) != canonicalize_name(_wheel.DIST):
        raise ValueError(f"--requirement {spec!r}: names {req.name}, not repogym")
    if req.url and req.url.startswith("file:"):
        local = _local_path(req.url)
        assert local is not None
        return _wheel_requirement(local, set(req.extras))
    req.extras = set(req.extras) | set(EXTRAS)
    return Shipped(str(req), str(req))


def _copy_tasks(src: Path, dest: Path) -> list[Path]:
    """Copy every task directory under ``src`` into ``dest``, keeping its path relative to
    ``src`` (a single task goes to ``dest/<its name>``). Bytes are copied unchanged."""
    task_dirs = list(iter_task_dirs(src))
    if not task_dirs:
        raise FileNotFoundError(f"{src}: no task.toml found (not a task or task set)")
    copied = []
    src_resolved = src.resolve()
    for task_dir in task_dirs:
        rel = task_dir.resolve().relative_to(src_resolved)
        target = dest / (rel if rel.parts else Path(src_resolved.name))
        shutil.copytree(task_dir, target, symlinks=True)
        copied.append(target)
    return copied


def export_openenv(
    path: Path, out: Path, *, requirement: str | None = None, name: str | None = None
) -> ExportResult:
    """Write the package for the tasks under ``path`` into ``out`` (which must not exist or be
    empty). ``requirement``: see :func:`resolve_requirement`."""
    path, out = Path(path), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: exists and is not an empty folder")
    name = _slug(name or path.resolve().name)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written beside ``out`` and renamed into place: a failure leaves no half package.
    staging = staging_dir(out.parent, "export", out.name)
    try:
        shipped = resolve_requirement(requirement, staging / WHEELS)
        if shipped.wheel is not None and shipped.wheel.parent != staging / WHEELS:
            (staging / WHEELS).mkdir(exist_ok=True)
            shutil.copyfile(shipped.wheel, staging / WHEELS / shipped.wheel.name)
        copied = _copy_tasks(path, staging / "tasks")
        tasks = [load_task(d) for d in copied]
        text_only = sorted(t.id for t in tasks if is_text_only(t))
        task_rel = {
            t.id: d.relative_to(staging).as_posix() for t, d in zip(tasks, copied, strict=True)
        }
        files = {
            "openenv.yaml": _openenv_yaml(name, tasks, task_rel),
            manifest.PLAN_PATH: manifest.plan_json(tasks),
            "Dockerfile": _dockerfile(shipped),
            "README.md": _readme(name, len(tasks), len(text_only), shipped),
            "pyproject.toml": _pyproject(name, shipped),
            "server/__init__.py": "",
            "server/app.py": APP_PY,
            f"{WHEELS}/README.md": WHEELS_README,
        }
        for rel, text in files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        publish_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    written = sorted(files)
    if shipped.wheel is not None:
        written = sorted([*written, f"{WHEELS}/{shipped.wheel.name}"])
        if shipped.wheel.parent == staging / WHEELS:  # written there: now in the package
            shipped = dataclasses.replace(shipped, wheel=out / WHEELS / shipped.wheel.name)
    return ExportResult(out, len(tasks), text_only, written, shipped)


def _openenv_yaml(name: str, tasks: list[Task], task_rel: dict[str, str]) -> str:
    block = manifest.yaml_lines(manifest.validation_block(tasks, task_rel), indent=1)
    return (
        "spec_version: 1\n"
        f"name: {name}\n"
        f"version: {json.dumps(__version__)}\n"
        "type: space\n"
        "runtime: fastapi\n"
        "app: server.app:app\n"
        f"port: {PORT}\n"
        "# OpenEnv RFC 008 auto-validation (`openenv validate`); the runtime plan is\n"
        f"# {manifest.PLAN_PATH}.\n"
        "validation:\n" + "\n".join(block) + "\n"
    )


def _dockerfile(shipped: Shipped) -> str:
    return f"""FROM python:3.12-slim
# repogym with the extras this server needs: openenv (the server) and docker (task containers).
# Wheels in wheels/ are used from there: repogym's own when the export shipped one, and any
# dependency put beside it. pip settings as build args: PIP_INDEX_URL=URL (a mirror),
# PIP_NO_INDEX=1 (every wheel is in wheels/: no index at all).
ARG PIP_INDEX_URL
ARG PIP_NO_INDEX
COPY {WHEELS}/ {IMAGE_WHEELS}/
RUN pip install --no-cache-dir --find-links {IMAGE_WHEELS} {shlex.quote(shipped.install)} \\
    && rm -rf {IMAGE_WHEELS}
WORKDIR /app
COPY server/ /app/server/
COPY tasks/ /app/tasks/
# Task containers are started through the Docker engine whose socket is mounted at
# /var/run/docker.sock (or DOCKER_HOST); without one the server still starts, and reset says why
# it cannot run an episode.
ENV REPOGYM_TASKS=/app/tasks REPOGYM_SANDBOX=docker PYTHONUNBUFFERED=1
EXPOSE {PORT}
# HOST and PORT choose where it listens (e.g. with --network host).
CMD {CMD}
"""


def _readme(name: str, count: int, text_only: int, shipped: Shipped) -> str:
    skipped = (
        f"\n{text_only} of them are text-only (no environment) and are refused at reset.\n"
        if text_only
        else ""
    )
    deps = (
        "its dependencies come from the package index (a mirror: `--build-arg\n"
        "PIP_INDEX_URL=URL`) or, with every wheel put in `wheels/`, from there alone\n"
        "(`--build-arg PIP_NO_INDEX=1`)."
    )
    if shipped.wheel is not None:
        source = (
            f"The image installs repogym from the wheel in `{WHEELS}/`\n"
            f"(`{shipped.dependency}`); {deps}"
        )
        local = f"pip install --find-links {WHEELS} ."
    else:
        source = f"The image installs `{shipped.install}`;\n{deps}"
        local = "pip install ."
    return f"""---
title: {name}
sdk: docker
app_port: {PORT}
tags:
  - openenv
  - repogym
---

# {name}: repogym tasks as an OpenEnv environment

{count} coding tasks (Harbor task directories under `tasks/`), served by
`repogym.openenv.build_app()` over OpenEnv's HTTP/WebSocket protocol.
{skipped}
{source}

## Run

**Task containers need a Docker engine.** The server starts one container per episode with the
`docker` backend (`REPOGYM_SANDBOX=docker`) through the engine whose socket is mounted into it;
the task containers are the server's siblings on that engine, and it builds each task's image
from `tasks/<id>/environment/` there (the `FROM` images must be present on that engine or
pullable by it).

```bash
docker build -t {name} .
docker run --rm -p {PORT}:{PORT} -e REPOGYM_ORCHESTRATOR_TOKEN=... \\
  -v /var/run/docker.sock:/var/run/docker.sock {name}
# on the host's network, listening where HOST and PORT say:
docker run --rm --network host -e HOST=127.0.0.1 -e PORT=8123 \\
  -e REPOGYM_ORCHESTRATOR_TOKEN=... -v /var/run/docker.sock:/var/run/docker.sock {name}
```

Tasks without network run with `--network none`. Image builds and tasks with network use the
engine's default network; `-e REPOGYM_DOCKER_NETWORK=host` (or `none`) chooses another.

Without an engine (for example a plain Hugging Face Space) the server still starts and serves
`/health`, `/schema`, `/metadata`, `/tasks` and `/tools`; `reset` answers with an error that
names what is missing. To run episodes without Docker, serve the package on a Linux host with
bubblewrap and the `local` backend:

```bash
{local}
REPOGYM_SANDBOX=local uvicorn server.app:app --port {PORT}
```

A server marks its task containers with the labels `io.repogym.serve` (this task set's
identity, or `REPOGYM_SERVER_ID`) and `io.repogym.serve.owner` (the server's container or
process). When a server starts, it removes the task containers of the same identity whose
server is gone (killed, its container stopped or removed), with their volumes; containers of a
server that still runs and containers without these labels are left alone.

## Use

```python
from openenv.core.generic_client import GenericEnvClient

with GenericEnvClient(base_url="http://localhost:{PORT}").sync() as env:
    obs = env.reset(index=0).observation          # instruction, task_id, workdir
    env.step({{"type": "exec", "command": "ls"}})
    result = env.step({{"type": "evaluate", "metadata": {{"orchestrator_token": "..."}}}})
    print(result.reward, result.observation["reward_details"])
```

Agent actions: `exec`, `read`, `write`, `list`. `evaluate` and `solve` are orchestration actions
and need the server's orchestrator token (`REPOGYM_ORCHESTRATOR_TOKEN`), which the trainer keeps.
"""


def _pyproject(name: str, shipped: Shipped) -> str:
    note = (
        f"# repogym comes from the wheel in {WHEELS}/: pip install --find-links {WHEELS} .\n"
        if shipped.wheel is not None
        else ""
    )
    return f"""[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

{note}[project]
name = "openenv-{name}"
version = "0.1.0"
description = "repogym tasks served as an OpenEnv environment"
requires-python = ">=3.11"
dependencies = [{json.dumps(shipped.dependency)}]

[tool.setuptools]
packages = ["server"]
"""
