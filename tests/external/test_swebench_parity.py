"""``repogym export --format swebench`` graded by the ``swebench`` package itself, no Docker.

For each exported instance, the harness's steps are replayed in the task's own local sandbox: the
built environment is made the git work tree the harness expects at ``/testbed`` (what an image for
these instances must provide, docs/integrations.md), the model patch (the gold patch, or none
for ``nop``) goes in with swebench's own ``GIT_APPLY_CMDS``, then the eval script swebench builds
from the instance (``make_test_spec``, with its exit-code line) runs, and its log is graded by
swebench's ``get_eval_report`` (its log parser, its F2P/P2P rules) in a venv of its own holding
``swebench==SWEBENCH_VERSION`` (cached under ``~/.cache/repogym-tests/``). Its resolved verdict
must agree with repogym's own verifier on the same task and agent: oracle reward 1 ⇔ resolved,
nop reward 0 ⇔ not resolved, and a patch that fixes the bug but regresses a pass-to-pass test is
resolved by neither (repogym's graded example pays it in part, below 1). Tasks: one generated from a git repository (pytest) and the unittest example,
whose source is rebuilt as a git repository so the export has a commit date.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from repogym.hub.swebench import EVAL_WORKDIR, export_swebench
from repogym.run.agents import Agent, CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner, environment_spec
from repogym.sandbox import get_backend
from repogym.taskdir import Task, load_task
from tests.conftest import EXAMPLES
from tests.venvs import cached_venv

pytestmark = [pytest.mark.slow, pytest.mark.external]

SWEBENCH_VERSION = "5.0.2"

# Run in swebench's venv: "script" prints the eval script and the patch commands swebench uses;
# "grade" prints swebench's report for a log.
DRIVER = """\
import json, sys
from swebench.harness.grading import get_eval_report
from swebench.harness.run_evaluation import GIT_APPLY_CMDS
from swebench.harness.utils import make_test_spec

mode, instance_file = sys.argv[1], sys.argv[2]
instance = json.loads(open(instance_file).read())
spec = make_test_spec(instance)
if mode == "script":
    print(json.dumps({"eval_script": spec.eval_script, "apply": GIT_APPLY_CMDS}))
else:
    prediction = {"instance_id": instance["instance_id"], "model_name_or_path": "repogym",
                  "model_patch": sys.argv[4]}
    report = get_eval_report(spec, prediction, sys.argv[3], include_tests_status=True)
    print(json.dumps(report[instance["instance_id"]]))
"""


@pytest.fixture(scope="module")
def swebench_python() -> Path:
    """Python of a cached venv holding ``swebench==SWEBENCH_VERSION``."""
    steps = [[f"swebench=={SWEBENCH_VERSION}"]]
    probe = "import swebench.harness.grading"
    return cached_venv(f"swebench-{SWEBENCH_VERSION}", steps, probe=probe, python="3.11") / "python"


def _driver(python: Path, tmp: Path, *args: str) -> dict[str, Any]:
    driver = tmp / "swebench_driver.py"
    driver.write_text(DRIVER)
    res = subprocess.run(
        [str(python), str(driver), *args], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def harness_log(task: Task, instance: dict[str, Any], patch: str, python: Path, tmp: Path) -> str:
    """The test log swebench's harness would record for ``patch`` (empty: none applied)."""
    instance_file = tmp / f"{instance['instance_id']}.json"
    instance_file.write_text(json.dumps(instance))
    plan = _driver(python, tmp, "script", str(instance_file))
    backend = get_backend("local")
    built = TrialRunner(backend).build(task)
    workdir = task.config.environment.workdir if task.config.environment else None
    with backend.start(built, environment_spec(task, backend)) as session:
        setup = (
            f"ln -s {workdir or '/workspace'} {EVAL_WORKDIR} && cd {EVAL_WORKDIR} && git init -q"
            " && git add -A && git -c user.name=r -c user.email=r@g commit -qm base"
        )
        res = session.exec(["bash", "-c", setup])
        assert res.exit_code == 0, res.stderr
        if patch:
            session.write("/tmp/patch.diff", patch.encode())
            for cmd in plan["apply"]:
                res = session.exec(["bash", "-c", f"{cmd} /tmp/patch.diff"], cwd=EVAL_WORKDIR)
                if res.exit_code == 0:
                    break
            assert res.exit_code == 0, f"the model patch did not apply: {res.stderr}"
        session.write("/eval.sh", plan["eval_script"].encode())
        res = session.exec(["bash", "-c", "/bin/bash /eval.sh 2>&1"], timeout_s=300)
    return res.stdout


def _apply_command(patch: str) -> str:
    """An agent command that applies ``patch`` in the working tree (what a model would do)."""
    return f"cat > /tmp/model.diff <<'EOF_MODEL'\n{patch}EOF_MODEL\ngit apply /tmp/model.diff"


def _parity(
    task: Task, instance: dict[str, Any], python: Path, tmp: Path, wrong: str | None = None
) -> None:
    """oracle, nop (and ``wrong``, a patch that regresses a P2P test): swebench's verdict on
    the harness log is repogym's reward."""
    runner = TrialRunner(get_backend("local"))
    cases: list[tuple[str, Agent, str, float]] = [
        ("oracle", OracleAgent(), instance["patch"], 1.0),
        ("nop", NopAgent(), "", 0.0),
    ]
    if wrong is not None:
        cases.append(("wrong", CommandAgent(_apply_command(wrong)), wrong, 0.0))
    for label, agent, patch, expected in cases:
        outcome = runner.run(task, agent)
        ours = outcome.reward
        assert outcome.reading is not None
        log = tmp / f"{instance['instance_id']}-{label}.log"
        log.write_text(harness_log(task, instance, patch, python, tmp))
        report = _driver(
            python, tmp, "grade", str(tmp / f"{instance['instance_id']}.json"), str(log), patch
        )
        status = report.get("tests_status", {})
        print(label, "reward", ours, "swebench resolved", report["resolved"], status)
        assert report["patch_successfully_applied"], log.read_text()[-2000:]
        # a graded task pays a regressing fix in part (f2p rate × p2p rate): never 1
        assert ours == expected if label != "wrong" else ours is not None and ours < 1.0
        assert report["resolved"] is (ours == 1.0), log.read_text()[-3000:]
        assert report["resolved"] is outcome.reading.details["resolved"]
        if label == "oracle":  # every expected test was found in the log, and passed
            assert status["FAIL_TO_PASS"]["success"] == json.loads(instance["FAIL_TO_PASS"])
            assert status["PASS_TO_PASS"]["success"] == json.loads(instance["PASS_TO_PASS"])
        elif label == "nop":
            assert status["FAIL_TO_PASS"]["failure"]
        else:
            assert status["PASS_TO_PASS"]["failure"]


def test_generated_pytest_task_agrees(swebench_python: Path, tmp_path: Path) -> None:
    from tests.integrations.test_harbor_plugin import _small_repo_task

    task_dir = _small_repo_task(tmp_path)
    result = export_swebench(task_dir, tmp_path / "out.jsonl", source=tmp_path / "shapes")
    assert not result.skipped
    (instance,) = result.instances
    assert instance["log_parser"] == "parse_log_pytest"
    assert json.loads(instance["PASS_TO_PASS"]), "the task has a P2P test to keep"
    _parity(load_task(task_dir), instance, swebench_python, tmp_path)


def test_unittest_example_agrees(swebench_python: Path, tmp_path: Path) -> None:
    from tests.sources.conftest import GitRepo, pin_git_env

    task_dir = EXAMPLES / "textstats-word-count"
    mp = pytest.MonkeyPatch()
    try:
        pin_git_env(mp)
        repo = GitRepo(tmp_path / "textstats")
        for f in sorted((task_dir / "environment" / "repo").rglob("*.py")):
            rel = f.relative_to(task_dir / "environment" / "repo").as_posix()
            repo.write(rel, f.read_text())
        repo.commit("textstats")
        repo.git("branch", "-m", "example")  # the example's ref
    finally:
        mp.undo()
    result = export_swebench(task_dir, tmp_path / "out.jsonl", source=repo.path)
    (instance,) = result.instances
    assert instance["log_parser"] == "parse_log_django"
    assert instance["created_at"].startswith("20")
    # word_count fixed, char_count broken: a P2P regression
    counts = repo.path / "textstats" / "counts.py"
    fixed = counts.read_text().replace('text.split(" ")', "text.split()")
    counts.write_text(fixed.replace("return len(text)\n", "return len(text) + 1\n"))
    wrong = repo.git("diff") + "\n"
    repo.git("checkout", "--", ".")
    _parity(load_task(task_dir), instance, swebench_python, tmp_path, wrong=wrong)
