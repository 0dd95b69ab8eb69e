"""``generate --executor ray`` on the session's local cluster (a head without CPUs, two 1-CPU
worker nodes): the candidates are evaluated on the workers over a shipped git bundle, the
driver alone publishes the tasks, and the dataset is the one the local executor writes.

Each task carries a random integrity key (``tests/integrity.key``, also in the Dockerfile's
record step) and its build time (``built_at``); with ``REPOGYM_BUILD_SEED`` and
``SOURCE_DATE_EPOCH`` set (reproducible builds) both are fixed, and the tasks the two executors
write have the same content hashes, byte for byte. Without them, tasks are compared with those
two values normalised."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from repogym.example_repo import build_example_repo
from repogym.pipelines._ray.worker import KILL_HOOK
from repogym.spec import GenerationInput
from repogym.taskdir import content_hash, iter_task_dirs
from repogym.taskdir.validate import validate_task
from repogym.workflows import generate
from tests.sources.conftest import pin_git_env

pytestmark = pytest.mark.slow

CHEAP = {"mutants": "0", "reruns": "0", "verify_reruns": "0", "adversarial": "false"}
"""The runtime pipeline's gate, minus the repeated runs: enough to keep and verify a task."""


def normalised_hash(task_dir: Path, scratch: Path) -> str:
    """The task's content hash with its integrity key and build time made constant."""
    copy = scratch / task_dir.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(task_dir, copy, symlinks=True)
    key = (copy / "tests" / "integrity.key").read_text().strip().encode()
    assert len(key) >= 16
    for path in copy.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if key in data:
                path.write_bytes(data.replace(key, b"KEY"))
    toml = copy / "task.toml"
    toml.write_text(re.sub(r'(?m)^built_at = ".*"$', 'built_at = "T"', toml.read_text()))
    return content_hash(copy)


def hashes(out: Path, scratch: Path) -> dict[str, str]:
    scratch.mkdir(parents=True, exist_ok=True)
    return {d.name: normalised_hash(d, scratch) for d in iter_task_dirs(out / "tasks")}


def outcomes(out: Path) -> dict[str, tuple[bool, str | None]]:
    report = json.loads((out / "generate-report.json").read_text())
    return {o["key"]: (o["kept"], o["reason"]) for o in report["outcomes"]}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray-example")
    with pytest.MonkeyPatch.context() as mp:
        pin_git_env(mp)
        return build_example_repo(root / "statkit")


REPRODUCIBLE = {"REPOGYM_BUILD_SEED": "test-seed-0c1d", "SOURCE_DATE_EPOCH": "1790000000"}


def exact_hashes(out: Path) -> dict[str, str]:
    return {d.name: content_hash(d) for d in iter_task_dirs(out / "tasks")}


@pytest.fixture(scope="module")
def reference(example: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The local executor's dataset for the two newest commits (one kept, one dropped), built
    reproducibly."""
    out = tmp_path_factory.mktemp("local") / "out"
    inp = GenerationInput(
        repo=str(example),
        pipeline="commit_runtime",
        out=out,
        options={**CHEAP, "max_candidates": "2"},
    )
    with pytest.MonkeyPatch.context() as mp:
        for k, v in REPRODUCIBLE.items():
            mp.setenv(k, v)
        result = generate(inp)
    assert result.stats.kept == 1, outcomes(out)
    return {
        "out": out,
        "hashes": hashes(out, out.parent / "scratch"),
        "exact": exact_hashes(out),
        "outcomes": outcomes(out),
    }


def test_ray_gives_the_local_tasks(
    ray_cluster: Any,
    example: Path,
    reference: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same candidates, same outcomes, same tasks (content hashes), published by the driver
    only; one worker killed mid-candidate is retried by Ray and changes nothing."""
    from repogym.executors import RayExecutor

    marker = tmp_path / "killed-once"
    for k, v in REPRODUCIBLE.items():
        monkeypatch.setenv(k, v)
    executor = RayExecutor(ray_cluster.address, env={KILL_HOOK: str(marker), **REPRODUCIBLE})
    out = tmp_path / "out"
    inp = GenerationInput(
        repo=str(example),
        pipeline="commit_runtime",
        out=out,
        options={**CHEAP, "max_candidates": "2"},
    )
    result = generate(inp, executor=executor)
    assert marker.exists(), "no worker was killed: the retry was not exercised"
    assert outcomes(out) == reference["outcomes"]
    assert hashes(out, tmp_path / "scratch") == reference["hashes"]
    assert exact_hashes(out) == reference["exact"]  # reproducible builds: the same bytes
    for task_dir in iter_task_dirs(out / "tasks"):
        assert validate_task(task_dir, deep=True).ok, task_dir  # recorded hash = the files
    assert [o.task_dir for o in result.outcomes if o.kept] == [
        out / "tasks" / name for name in reference["hashes"]
    ]
    assert not [p.name for p in (out / "tasks").iterdir() if p.name.startswith(".")]
    state = json.loads((out / ".repogym" / "commit_runtime-state.json").read_text())
    assert sorted(state) == sorted(reference["outcomes"])
    assert json.loads((out / "generate-report.json").read_text())["status"] == "complete"


def test_llm_is_refused_on_ray(ray_cluster: Any, example: Path, tmp_path: Path) -> None:
    from repogym.executors import RayExecutor
    from repogym.pipelines import GenerateError

    inp = GenerationInput(
        repo=str(example), pipeline="commit_runtime", out=tmp_path / "o", llm="openai/gpt-x"
    )
    with pytest.raises(GenerateError, match="--llm is not available with --executor ray"):
        generate(inp, executor=RayExecutor(ray_cluster.address))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "name", ["commit_runtime", "bug_synth", "code_instruct", "equivalence_tests"]
)
def test_what_a_unit_carries_pickles(example: Path, name: str) -> None:
    """Candidates (with their ``extra``), the pipeline and its options travel to workers."""
    import itertools
    import pickle

    from repogym.pipelines import get_pipeline
    from repogym.pipelines._ray.worker import RemoteRun, Shipped
    from repogym.run.gate import TaskGate
    from repogym.sources import LocalGitSource

    pipeline = get_pipeline(name)
    options = pipeline.options_model()
    with LocalGitSource(example) as source:
        items = pipeline.candidates(source, options, "local__statkit", "HEAD")
        cands = [c for c in itertools.islice(items, 6) if not isinstance(c, tuple)]
    assert cands
    run = RemoteRun(
        "k",
        pipeline,
        options,
        "HEAD",
        "local",
        "statkit",
        "local",
        "local",
        gate=TaskGate,
        bundle=Shipped("d", b"bundle"),
    )
    for cand in cands:
        back = pickle.loads(pickle.dumps((run, cand)))
        assert back[1] == cand and back[0].options == options
        assert back[0].pipeline.name == name and back[0].gate is TaskGate
