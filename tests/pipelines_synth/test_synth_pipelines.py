"""``bug_synth`` and ``code_instruct`` on the embedded example repository: real generation on
the local sandbox, then the emitted tasks are checked as a user would (validate, verify, the
answer kept out of everything the agent sees)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.example_repo import build_example_repo
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.workflows import generate
from tests.sources.conftest import pin_git_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def statkit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        pin_git_env(mp)
        return build_example_repo(tmp_path_factory.mktemp("repo") / "statkit")


def _generate(repo: Path, out: Path, pipeline: str, limit: int, **options: object):  # type: ignore[no-untyped-def]
    return generate(
        GenerationInput(
            repo=str(repo),
            pipeline=pipeline,
            out=out,
            limit=limit,
            jobs=2,
            # the red-team gate has tests of its own (tests/adversarial/test_redteam_gate.py)
            options={"adversarial": False, **options},
        )
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args], capture_output=True, text=True, timeout=900
    )


def _gold_lines(task: Path) -> list[str]:
    """The lines the gold patch adds back (the answer)."""
    patch = (task / "solution" / "patch.diff").read_text()
    return [
        ln[1:].strip()
        for ln in patch.splitlines()
        if ln.startswith("+") and not ln.startswith("+++") and len(ln[1:].strip()) > 6
    ]


def _agent_visible(task: Path) -> str:
    """The instruction and every file of the environment's build context."""
    parts = [(task / "instruction.md").read_text()]
    for path in sorted((task / "environment").rglob("*")):
        if path.is_file():
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def test_bug_synth_emits_verified_tasks_without_leaking_the_mutation(
    statkit: Path, tmp_path: Path
) -> None:
    result = _generate(statkit, tmp_path / "ds", "bug_synth", 3)
    kept = [o for o in result.outcomes if o.kept]
    assert len(kept) == 3, [(o.reason, o.detail) for o in result.outcomes]
    reasons = {o.reason for o in result.outcomes if not o.kept}
    assert reasons <= {
        "no test fails (the edit survives)",
        "breaks too much of the suite",
        "same failures as another edit",
        "function not called by the tests",
        "verify: broken",
        "tests too weak (mutants survive)",
    }, reasons
    for outcome in kept:
        task = outcome.task_dir
        assert task is not None
        loaded = load_task(task)
        sub = loaded.repo2env["bug_synth"]
        assert sub["fail_to_pass"] and loaded.repo2env["evaluation"]["status"] == "verified"
        edit = json.loads((task / "solution" / "edit.json").read_text())
        assert edit["path"] == "src/statkit/stats.py"
        # The environment holds the mutant; the gold patch undoes it; nothing agent-visible
        # holds the original line.
        visible = _agent_visible(task)
        for line in _gold_lines(task):
            assert line not in visible, (task.name, line)
        instruction = (task / "instruction.md").read_text()
        assert edit["kind"] not in instruction and "mutat" not in instruction.lower()
        assert "## Expected behaviour" in instruction
    res = _cli("validate", "--deep", str(tmp_path / "ds"))
    assert res.returncode == 0, res.stdout + res.stderr
    res = _cli("verify", str(tmp_path / "ds"), "--reruns", "1", "--no-write", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    verdicts = json.loads(res.stdout)["tasks"]
    assert {v["status"] for v in verdicts} == {"verified"}


def test_code_instruct_stubs_a_function_and_quotes_its_docstring(
    statkit: Path, tmp_path: Path
) -> None:
    result = _generate(statkit, tmp_path / "ds", "code_instruct", 2)
    kept = [o for o in result.outcomes if o.kept]
    assert len(kept) == 2, [(o.reason, o.detail) for o in result.outcomes]
    for outcome in kept:
        task = outcome.task_dir
        assert task is not None
        edit = json.loads((task / "solution" / "edit.json").read_text())
        instruction = (task / "instruction.md").read_text()
        assert f"`{edit['function']}`" in instruction and "NotImplementedError" in instruction
        stub = (task / "environment" / "repo" / edit["path"]).read_text()
        assert "raise NotImplementedError" in stub
        visible = _agent_visible(task)
        for line in _gold_lines(task):
            assert line not in visible, (task.name, line)
    res = _cli("verify", str(tmp_path / "ds"), "--reruns", "0", "--no-write", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


def test_options_are_checked_before_any_work(statkit: Path, tmp_path: Path) -> None:
    res = _cli(
        "generate", "--repo", str(statkit), "--pipeline", "bug_synth", "--out",
        str(tmp_path / "x"), "--opt", "max_break_share=2",
    )  # fmt: skip
    assert res.returncode == 2 and "max_break_share" in res.stderr
    res = _cli(
        "generate", "--repo", str(statkit), "--pipeline", "bug_synth", "--out",
        str(tmp_path / "y"), "--opt", "operators=nonsense,compare",
    )  # fmt: skip
    assert res.returncode == 2 and "nonsense" in res.stderr, res.stderr


def test_resume_goes_on_where_the_last_run_stopped(statkit: Path, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    first = _generate(statkit, out, "bug_synth", 1)
    assert [o.kept for o in first.outcomes].count(True) == 1
    seen = {o.candidate.key for o in first.outcomes}
    second = generate(
        GenerationInput(
            repo=str(statkit), pipeline="bug_synth", out=out, limit=1, jobs=2, resume=True
        )
    )
    again = {o.candidate.key for o in second.outcomes}
    assert not seen & again  # nothing examined twice
    assert len(list((out / "tasks").iterdir())) == 2
