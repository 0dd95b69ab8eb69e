"""Shared explorer fixtures: a dataset shaped like ``repogym generate`` output, toy readers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomli_w

from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "tasks"
GOLD = "GOLDMARK"  # planted in every answer of the generated-like dataset


def _generated_task(root: Path, task_id: str, *, language: str, pipeline: str, n: int) -> Path:
    """A task folder laid out like repogym's runtime pipelines write them."""
    task = root / "tasks" / task_id
    (task / "environment" / "repo" / "pkg").mkdir(parents=True)
    (task / "tests" / "files" / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    f2p = [f"tests/test_mod.py::test_fix_{i}" for i in range(n)]
    p2p = ["tests/test_mod.py::test_ok_1", "tests/test_mod.py::test_ok_2"]
    config = {
        "version": "1.0",
        "schema_version": "1.4",
        "task": {
            "name": f"acme/{task_id}",
            "description": f"Fix the {task_id} parser on empty input",
            "keywords": [pipeline, language],
        },
        "metadata": {
            "difficulty": "medium",
            "category": "bugfix",
            "language": language,
            "repo2env": {
                "spec_version": "0.2.0",
                "pipeline": pipeline,
                "pipeline_version": "1",
                "repo": "acme/widgets",
                "ref": "abc123",
                "reference": "https://example.invalid/acme/widgets/pull/7",
                "source_access": "local",
                "built_at": "2026-01-01T00:00:00+00:00",
                "synthesis_llm": "none",
                "reward_kinds": ["test_execution"],
                "content_hash": f"sha256:{task_id:0>64}"[-71:],
                pipeline: {"fail_to_pass": f2p, "pass_to_pass": p2p, "test_files": ["t.py"]},
                "reproducibility": {"mode": "inline_dockerfile"},
            },
        },
        "agent": {"timeout_sec": 600.0},
        "verifier": {"timeout_sec": 240.0},
        "environment": {"network_mode": "no-network", "workdir": "/workspace"},
        "solution": {"env": {"REPOGYM_WORKDIR": "/workspace"}},
    }
    (task / "task.toml").write_text(tomli_w.dumps(config))
    (task / "instruction.md").write_text(
        f"# Empty input\n\nThe `{task_id}` parser crashes on empty input; make it return an "
        "empty list instead.\n\nMore detail in a second paragraph.\n"
    )
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.12-slim\nWORKDIR /workspace\nCOPY repo/ /workspace/\n"
    )
    (task / "environment" / "repo" / "pkg" / "mod.py").write_text("def parse(s):\n    return s\n")
    (task / "tests" / "test.sh").write_text(
        "#!/usr/bin/env bash\nexec python3 /tests/verifier.py\n"
    )
    (task / "tests" / "verifier.py").write_text("import json\nprint('grading')\n")
    (task / "tests" / "f2p.json").write_text(json.dumps(f2p))
    (task / "tests" / "p2p.json").write_text(json.dumps(p2p))
    (task / "tests" / "config.json").write_text(json.dumps({"command": "pytest", "restore": []}))
    (task / "tests" / "files" / "tests" / "test_mod.py").write_text("def test_fix_0():\n    pass\n")
    (task / "tests" / "test.patch").write_text(f"+++ b/tests/test_mod.py\n+# {GOLD} test patch\n")
    (task / "solution" / "patch.diff").write_text(f"+++ b/pkg/mod.py\n+    # {GOLD} gold\n")
    (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\n# {GOLD}\n")
    return task


def write_generated_dataset(root: Path, name: str = "acme-widgets") -> Path:
    """A dataset like ``repogym generate`` writes: tasks/, registry.json, manifest.json, README."""
    ds = root / name
    _generated_task(ds, "acme__widgets-7", language="python", pipeline="pr_runtime", n=2)
    _generated_task(ds, "acme__widgets-9", language="python", pipeline="pr_runtime", n=1)
    _generated_task(ds, "acme__widgets-c0ffee", language="python", pipeline="commit_runtime", n=3)
    registry = [
        {
            "name": "acme-widgets",
            "version": "1.0",
            "description": "Widget parser fixes mined from acme/widgets",
            "tasks": [{"name": t, "path": f"tasks/{t}"} for t in ("a", "b", "c")],
            "metrics": [{"type": "mean"}],
        }
    ]
    (ds / "registry.json").write_text(json.dumps(registry))
    (ds / "manifest.json").write_text(json.dumps({"schema": "repogym.manifest/1", "count": 3}))
    (ds / "README.md").write_text(
        "---\nlicense: apache-2.0\n---\n# Acme widgets\n\nTasks mined from the acme widgets "
        "repository.\n\nexpected_output: not a real key, just prose\n"
    )
    return ds


@pytest.fixture
def generated_dataset(tmp_path: Path) -> Path:
    """A generated-like Harbor dataset with planted answers (marked ``GOLDMARK``)."""
    return write_generated_dataset(tmp_path)


@pytest.fixture
def examples_dataset(tmp_path: Path) -> Path:
    """A private copy of ``examples/tasks`` named ``examples``."""
    dest = tmp_path / "examples"
    shutil.copytree(EXAMPLES, dest, symlinks=True)
    return dest


def toy_task(tid: str, title: str, **facets: str) -> TaskDoc:
    """A small TaskDoc with an instruction, one file and one solution file."""
    grading = facets.pop("grading", "exact-match")
    network = facets.pop("network", "no-network")
    text = f"{title}. Solve the {tid} puzzle."
    return TaskDoc(
        id=tid,
        title=title,
        summary=text,
        facets=facets,
        grading=grading,
        environment="text only",
        network=network,
        runnable=False,
        sections=[Section("instruction", "Instruction", text)],
        files=[
            FileDoc("prompt.txt", len(text), text.encode()),
            FileDoc("solution/answer.txt", 2, b"42"),
        ],
    )


def toy_env(env_id: str, kind: str = "toy", **facets: str) -> EnvDoc:
    return EnvDoc(
        id=env_id, kind=kind, title=env_id.title(), summary=f"The {env_id} set", facets=facets
    )
