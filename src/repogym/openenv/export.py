"""Export a task set as a deployable OpenEnv package (no ``openenv`` import here).

The package holds ``openenv.yaml``, a server ``Dockerfile``, a ``README.md`` with Hugging Face
Space front matter, ``pyproject.toml``, a two-line ``server/app.py`` over
:func:`repogym.openenv.build_app`, and ``tasks/`` copied byte for byte.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from repogym import __version__
from repogym.atomic import make_temp_dir, publish_dir
from repogym.harbor import iter_task_dirs, load_task
from repogym.openenv.tasks import is_text_only

PORT = 8000
APP_PY = "from repogym.openenv import build_app\napp = build_app()\n"


@dataclass
class ExportResult:
    out: Path
    tasks: int
    text_only: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

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
    """``repogym[openenv]`` pinned at the installed version."""
    return f"repogym[openenv]=={__version__}"


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
    empty)."""
    path, out = Path(path), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: exists and is not an empty folder")
    requirement = requirement or default_requirement()
    name = _slug(name or path.resolve().name)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written beside ``out`` and renamed into place: a failure leaves no half package.
    staging = make_temp_dir(out.parent, prefix=f".{out.name}.", suffix=".export")
    try:
        copied = _copy_tasks(path, staging / "tasks")
        tasks = [load_task(d) for d in copied]
        text_only = sorted(t.id for t in tasks if is_text_only(t))
        files = {
            "openenv.yaml": _openenv_yaml(name),
            "Dockerfile": _dockerfile(requirement),
            "README.md": _readme(name, len(tasks), len(text_only)),
            "pyproject.toml": _pyproject(name, requirement),
            "server/__init__.py": "",
            "server/app.py": APP_PY,
        }
        for rel, text in files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        publish_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ExportResult(out, len(tasks), text_only, sorted(files))


def _openenv_yaml(name: str) -> str:
    return (
        "spec_version: 1\n"
        f"name: {name}\n"
        "type: space\n"
        "runtime: fastapi\n"
        "app: server.app:app\n"
        f"port: {PORT}\n"
    )


def _dockerfile(requirement: str) -> str:
    return f"""FROM python:3.11-slim
RUN pip install --no-cache-dir '{requirement}'
WORKDIR /app
COPY . /app
# Task sandboxes are containers started through the host's Docker engine.
ENV REPOGYM_TASKS=/app/tasks REPOGYM_SANDBOX=docker
EXPOSE {PORT}
CMD ["uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "{PORT}"]
"""


def _readme(name: str, count: int, text_only: int) -> str:
    skipped = (
        f"\n{text_only} of them are text-only (no environment) and are refused at reset.\n"
        if text_only
        else ""
    )
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
**Task containers need a Docker-capable host.** The server starts one sandbox per session with
the `docker` backend (`REPOGYM_SANDBOX=docker`); a host without a Docker engine (for example a
plain Hugging Face Space) serves `/health`, `/schema`, `/metadata` and `/tasks` but cannot start
episodes. Without Docker, run it with `REPOGYM_SANDBOX=local` on a Linux host with bubblewrap.

## Run

```bash
docker build -t {name} . && docker run -p {PORT}:{PORT} \\
  -e REPOGYM_ORCHESTRATOR_TOKEN=... -v /var/run/docker.sock:/var/run/docker.sock {name}
# or, without the server image:
pip install 'repogym[openenv]' && uvicorn server.app:app --port {PORT}
```

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


def _pyproject(name: str, requirement: str) -> str:
    return f"""[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "openenv-{name}"
version = "0.1.0"
description = "repogym tasks served as an OpenEnv environment"
requires-python = ">=3.11"
dependencies = ["{requirement}", "openenv-core>=0.3"]

[tool.setuptools]
packages = ["server"]
"""
