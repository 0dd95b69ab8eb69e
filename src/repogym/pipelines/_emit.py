"""Writing a runtime task directory (Harbor layout + the graded-verifier files)."""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w

from repogym import __version__
from repogym.bootstrap import Recipe
from repogym.harbor import set_content_hash
from repogym.pipelines.base import Candidate
from repogym.spec import RuntimeOptions

SPEC_VERSION = "0.2.0"


@dataclass
class EmitInput:
    candidate: Candidate
    instruction: str
    recipe: Recipe
    context: Path
    """The environment folder (Dockerfile + repo/ snapshot at base) to copy."""
    f2p: list[str]
    p2p: list[str]
    command: str
    test_files: dict[str, bytes]
    deleted_tests: list[str]
    pipeline: str
    pipeline_version: str
    repo: str
    options: RuntimeOptions
    flaky: list[str] = field(default_factory=list)


def _template(name: str) -> bytes:
    return resources.files("repogym.pipelines").joinpath("_templates", name).read_bytes()


def _parsers_source() -> bytes:
    return resources.files("repogym.verify").joinpath("parsers.py").read_bytes()


def _write(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    path.chmod(mode)


def write_task(dest: Path, inp: EmitInput) -> None:
    """Write the whole task folder at ``dest`` (a staging folder; the caller publishes it)."""
    cand, recipe = inp.candidate, inp.recipe
    dest.mkdir(parents=True)
    _write(dest / "instruction.md", inp.instruction)
    shutil.copytree(inp.context, dest / "environment", symlinks=True)

    tests = dest / "tests"
    _write(tests / "test.sh", _template("test.sh"), 0o755)
    _write(tests / "verifier.py", _template("verifier.py"))
    _write(tests / "parsers.py", _parsers_source())
    _write(tests / "f2p.json", json.dumps(inp.f2p, indent=1) + "\n")
    _write(tests / "p2p.json", json.dumps(inp.p2p, indent=1) + "\n")
    config = {
        "workdir": recipe.workdir,
        "runner": recipe.runner,
        "command": inp.command,
        "restore": sorted(inp.test_files),
        "delete": sorted(inp.deleted_tests),
    }
    _write(tests / "config.json", json.dumps(config, indent=2) + "\n")
    for rel, data in inp.test_files.items():
        _write(tests / "files" / rel, data)
    _write(tests / "test.patch", cand.test_patch.encode("utf-8", "surrogateescape"))

    solution = dest / "solution"
    _write(solution / "patch.diff", cand.source_patch.encode("utf-8", "surrogateescape"))
    _write(solution / "solve.sh", _template("solve.sh"), 0o755)
    _write(solution / "apply_patch.py", _template("apply_patch.py"))

    owner = inp.repo.split("/")[0] if "/" in inp.repo else "local"
    sub: dict[str, Any] = {
        "base_commit": cand.base,
        "head_commit": cand.head,
        "fail_to_pass": inp.f2p,
        "pass_to_pass": inp.p2p,
        "test_files": sorted(inp.test_files),
        "runner": recipe.runner,
        "test_command": inp.command,
    }
    if cand.number is not None:
        sub["pr_number"] = cand.number
    if inp.flaky:
        sub["flaky_excluded"] = inp.flaky
    payload: dict[str, Any] = {
        # `version` is the legacy spelling older readers (and repo2rlenv) require; Harbor takes
        # schema_version when both are present.
        "version": "1.0",
        "schema_version": "1.4",
        "task": {
            "name": f"{owner}/{cand.task_id}",
            "description": (cand.title.strip() or cand.task_id)[:200],
            "keywords": [inp.pipeline, recipe.language, recipe.runner],
        },
        "metadata": {
            "difficulty": _difficulty(cand.source_patch),
            "category": "bugfix",
            "language": recipe.language,
            "repo2env": {
                "spec_version": SPEC_VERSION,
                "pipeline": inp.pipeline,
                "pipeline_version": inp.pipeline_version,
                "repo": inp.repo,
                "ref": cand.base,
                "reference": cand.reference,
                "source_access": "local",
                "built_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
                "synthesis_llm": "none",
                "reward_kinds": ["test_execution"],
                inp.pipeline: sub,
                "reproducibility": {"mode": "inline_dockerfile"},
            },
            "repogym": {"generator": f"repogym {__version__}", "recipe_hash": recipe.hash},
        },
        "agent": {"timeout_sec": inp.options.agent_timeout},
        "verifier": {"timeout_sec": inp.options.test_timeout * 2},
        "environment": {
            "build_timeout_sec": 1800.0,
            "cpus": 1,
            "memory_mb": 4096,
            "storage_mb": 4096,
            "network_mode": inp.options.network,
            "workdir": recipe.workdir,
        },
        "solution": {"env": {"REPOGYM_WORKDIR": recipe.workdir}},
    }
    _write(dest / "task.toml", tomli_w.dumps(payload))
    set_content_hash(dest)


def _difficulty(source_patch: str) -> str:
    changed = sum(
        1 for ln in source_patch.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
    )
    return "easy" if changed <= 10 else "medium" if changed <= 60 else "hard"
