"""The Harbor environment plugin (``repogym.integrations.harbor``) under the real ``harbor run``.

Harbor needs Python >= 3.12 while repogym's own venv may be 3.11, so the slow tests make (once,
cached under ``~/.cache/repogym-tests/``, keyed by Harbor's version and this checkout's path) a
Python 3.12 venv holding ``harbor==HARBOR_VERSION`` and this checkout installed editable (with
its docker extra, for ``test_harbor_docker.py``), then run ``harbor run -p DATASET -a oracle|nop -e repogym.integrations.harbor:RepogymEnvironment``
over the two example tasks, a task generated here from a small git repository, an attack on that
task (its "solution" plants a conftest.py hook and rewrites the hidden tests) and a task repogym
refuses. Rewards are read from Harbor's own trial and job result files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repogym.integrations._harbor_support import find_task_dir, merge_into, tree_paths, under
from tests.adversarial.test_canary_attacks import SHORT_CIRCUIT
from tests.adversarial.test_judge_attacks import FLIP
from tests.conftest import EXAMPLES, ROOT
from tests.run.test_foreign_harbor import _separate_task, _steps_task
from tests.venvs import cached_venv

HARBOR_VERSION = "0.26.0"
IMPORT_PATH = "repogym.integrations.harbor:RepogymEnvironment"

# The "solution" of the attack task: no fix, a pytest hook that reports every test as passed,
# the hidden test rewritten, a file planted outside the working tree and a process that keeps
# writing a reward of 1 where the verifier writes its own.
ATTACK = """\
#!/bin/bash
cd /workspace
cat > conftest.py <<'EOF'
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
EOF
printf 'def test_rectangle():\\n    pass\\n' > tests/test_area.py
echo planted > /etc/planted-by-agent
(while true; do echo 1 > /logs/verifier/reward.txt; sleep 0.1; done) >/dev/null 2>&1 &
"""

# Judge attacks of tests/adversarial/test_judge_attacks.py, as "solutions" of copies of the
# generated task: names built at run time, so no text of the verifier's appears.
JUDGE_ATTACKS = {
    # reward files written by the code under test when it is imported, and again at exit
    "shapes-rewards": (
        "import atexit, os\n"
        "def _w():\n"
        "    d = bytes.fromhex('2f6c6f67732f7665726966696572').decode()\n"
        "    try:\n"
        "        os.makedirs(d, exist_ok=True)\n"
        "        open(os.path.join(d, 'reward' + '.txt'), 'w').write('1')\n"
        "        open(os.path.join(d, 'reward' + '.json'), 'w').write('{\"reward\": 1}')\n"
        "    except OSError:\n"
        "        pass\n"
        "_w()\n"
        "getattr(atexit, 'reg' + 'ister')(_w)\n"
    ),
    # the runner's report objects patched from a UTF-7 source file
    "shapes-utf7": "# -*- coding: utf-7 -*-\n" + FLIP.encode("utf-7").decode("ascii") + "\n",
    # every test call answered "done" by a hook registered with pytest's plugin manager: the
    # tests pass without running, and so do the canaries the judge planted
    "shapes-short-circuit": SHORT_CIRCUIT,
}


def judge_attack(code: str) -> str:
    """A solve.sh that writes ``code`` as the package's ``__init__.py`` (and fixes nothing)."""
    return "#!/bin/bash\ncat > /workspace/src/shapes/__init__.py <<'EOF'\n" + code + "EOF\n"


# ------------------------------------------------------------------ without Harbor


def test_import_repogym_does_not_import_harbor() -> None:
    code = "import sys, repogym, repogym.integrations; print('harbor' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_task_folder_is_found_above_harbors_environment_dir(tmp_path: Path) -> None:
    (tmp_path / "t" / "environment").mkdir(parents=True)
    (tmp_path / "t" / "steps" / "one" / "tests").mkdir(parents=True)
    (tmp_path / "t" / "task.toml").write_text("")
    assert find_task_dir(tmp_path / "t" / "environment") == (tmp_path / "t").resolve()
    assert find_task_dir(tmp_path / "t" / "steps" / "one" / "tests") == (tmp_path / "t").resolve()
    assert find_task_dir(tmp_path / "elsewhere") is None


def test_verifier_uploads_are_told_apart() -> None:
    assert under("/tests", "/tests") and under("/tests/test.sh", "/tests")
    assert under("//tests/", "/tests") and under("/x/../tests/a", "/tests")
    assert not under("/testsuite", "/tests") and not under("/solution", "/tests")


def test_downloads_never_bring_links_to_host_files(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "sub").mkdir(parents=True)
    (src / "reward.txt").write_text("1\n")
    (src / "sub" / "log.txt").write_text("log\n")
    (src / "inside").symlink_to("sub/log.txt")
    (src / "reward.json").symlink_to("/etc/passwd")
    (src / "sub" / "up").symlink_to("../../outside")
    dest.mkdir()
    (dest / "kept.txt").write_text("host\n")
    assert tree_paths(src) == [
        "inside",
        "reward.json",
        "reward.txt",
        "sub",
        "sub/log.txt",
        "sub/up",
    ]
    assert sorted(merge_into(src, dest)) == ["reward.json", "sub/up"]
    assert (dest / "reward.txt").read_text() == "1\n" and (dest / "kept.txt").exists()
    assert os.readlink(dest / "inside") == "sub/log.txt"
    assert not (dest / "reward.json").exists() and not (dest / "sub" / "up").is_symlink()


# ------------------------------------------------------------------ with Harbor


@pytest.fixture(scope="module")
def harbor_bin() -> Path:
    """``harbor`` of a cached Python 3.12 venv with Harbor and this checkout (editable)."""
    return harbor_venv(HARBOR_VERSION)


def harbor_venv(version: str) -> Path:
    """``harbor`` of a cached Python 3.12 venv with ``harbor==version`` and this checkout
    (editable, with its docker extra); skips the test when the venv cannot be made."""
    steps = [[f"harbor=={version}", "-e", f"{ROOT}[docker]"]]
    return cached_venv(f"harbor-{version}", steps, probe="import harbor", checkout=True) / "harbor"


def _small_repo_task(out: Path) -> Path:
    """A commit_runtime task generated from a two-commit repository (clean-room verified)."""
    from repogym.spec import GenerationInput
    from repogym.workflows import generate
    from tests.sources.conftest import pin_git_env

    repo = shapes_repo(out / "shapes")
    mp = pytest.MonkeyPatch()
    try:
        pin_git_env(mp)
        generate(GenerationInput(repo=str(repo), pipeline="commit_runtime", out=out / "gen"))
    finally:
        mp.undo()
    (task,) = (out / "gen" / "tasks").iterdir()
    return task


def shapes_repo(path: Path) -> Path:
    """A two-commit git repository whose second commit fixes a bug its new test catches."""
    from tests.pipelines.shapes import AREA_V1, PYPROJECT
    from tests.sources.conftest import GitRepo, pin_git_env

    mp = pytest.MonkeyPatch()
    try:
        pin_git_env(mp)
        repo = GitRepo(path)
        repo.write("pyproject.toml", PYPROJECT)
        repo.write("src/shapes/__init__.py", "")
        repo.write("src/shapes/area.py", AREA_V1)
        repo.write(
            "tests/test_area.py",
            "from shapes.area import rectangle, square\n\n\n"
            "def test_square():\n    assert square(3) == 9\n",
        )
        repo.commit("Initial shapes package")
        repo.write("src/shapes/area.py", AREA_V1.replace("width + height", "width * height"))
        repo.write(
            "tests/test_area.py",
            (repo.path / "tests/test_area.py").read_text()
            + "\n\ndef test_rectangle():\n    assert rectangle(2, 5) == 10\n",
        )
        repo.commit("Fix rectangle area\n\nrectangle(2, 5) returned 7: width times height.")
    finally:
        mp.undo()
    return path


@pytest.fixture(scope="module")
def jobs(harbor_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``harbor run`` per agent over the dataset; {"trials": {(task, agent): result},
    "jobs": {agent: job result}, "dir": jobs folder}."""
    root = tmp_path_factory.mktemp("harbor")
    dataset = root / "dataset"
    dataset.mkdir()
    for name in ("hello-file", "textstats-word-count"):
        shutil.copytree(EXAMPLES / name, dataset / name)
    generated = _small_repo_task(root)
    shutil.copytree(generated, dataset / "shapes")
    shutil.copytree(generated, dataset / "shapes-attack")
    (dataset / "shapes-attack" / "solution" / "solve.sh").write_text(ATTACK)
    for name, code in JUDGE_ATTACKS.items():
        shutil.copytree(generated, dataset / name)
        (dataset / name / "solution" / "solve.sh").write_text(judge_attack(code))
    shutil.copytree(EXAMPLES / "hello-file", dataset / "broken")
    _steps_task(dataset)  # "steps": two steps, verified in the agent's session after each
    _separate_task(dataset)  # "sep": a separate verifier environment (a second instance)
    (dataset / "broken" / "environment" / "Dockerfile").write_text("FROM debian\nFROBNICATE x\n")

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        HARBOR_TELEMETRY="0",  # no usage report (it also imports litellm: seconds)
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        XDG_CONFIG_HOME=str(root / "config"),
    )
    out = root / "jobs"
    for agent in ("oracle", "nop"):
        cmd = [str(harbor_bin), "run", "-p", str(dataset), "-a", agent, "-e", IMPORT_PATH]
        cmd += ["--ek", "backend=local", "-o", str(out), "--job-name", agent, "-n", "2"]
        proc = subprocess.run(
            [*cmd, "-y", "-q"], cwd=root, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = {}
    for path in out.glob("*/*/result.json"):
        result = json.loads(path.read_text())
        task = Path(result["task_id"]["path"]).name
        trials[(task, result["agent_info"]["name"])] = result | {"_dir": str(path.parent)}
    return {
        "trials": trials,
        "jobs": {a: json.loads((out / a / "result.json").read_text()) for a in ("oracle", "nop")},
    }


def _reward(result: dict[str, Any]) -> float | None:
    assert result["exception_info"] is None, result["exception_info"]
    return (result["verifier_result"] or {}).get("rewards", {}).get("reward")


def _report(result: dict[str, Any]) -> dict[str, Any]:
    path = Path(result["_dir"]) / "repogym-verification.json"
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_oracle_pays_and_nop_does_not(jobs: dict[str, Any]) -> None:
    trials = jobs["trials"]
    for task in ("hello-file", "textstats-word-count", "shapes", "steps", "sep"):
        assert _reward(trials[(task, "oracle")]) == 1.0, task
        assert _reward(trials[(task, "nop")]) == 0.0, task
    # Harbor's job summary agrees: every trial counted, the refused task the only error.
    for agent in ("oracle", "nop"):
        stats = jobs["jobs"][agent]["stats"]
        assert stats["n_completed_trials"] == 7 + len(JUDGE_ATTACKS)
        assert stats["n_errored_trials"] == 1
    steps = trials[("steps", "oracle")]["step_results"]
    assert [s["verifier_result"]["rewards"]["reward"] for s in steps] == [1, 1]
    # The generated task declares a clean room: only the fix reached the verifier.
    report = _report(trials[("shapes", "oracle")])
    assert report["mode"] == "clean_room" and report["applied"] == ["src/shapes/area.py"]
    # The example declares a clean room too: its greeting file is all that reaches the verifier.
    hello = _report(trials[("hello-file", "oracle")])
    assert hello["mode"] == "clean_room" and hello["applied"] == ["greeting.txt"]
    sep = Path(trials[("sep", "oracle")]["_dir"])
    assert (sep / "repogym-build-main.log").is_file()
    assert (sep / "repogym-build-verifier.log").is_file()
    verifier_dir = Path(trials[("shapes", "oracle")]["_dir"]) / "verifier"
    assert (verifier_dir / "reward.txt").read_text().strip() == "1"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_clean_room_does_not_pay_a_planted_hook(jobs: dict[str, Any]) -> None:
    attack = jobs["trials"][("shapes-attack", "oracle")]
    assert _reward(attack) == 0.0
    report = _report(attack)
    assert report["mode"] == "clean_room" and report["applied"] == []
    dropped = {d["path"]: d["reason"] for d in report["dropped"]}
    assert dropped["conftest.py"].startswith("protected")
    assert any(p == "tests" or p.startswith("tests/") for p in dropped), dropped


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_judge_attacks_earn_nothing_through_the_plugin(jobs: dict[str, Any]) -> None:
    for name in JUDGE_ATTACKS:
        attack = jobs["trials"][(name, "oracle")]
        assert _reward(attack) == 0.0, name
        assert _report(attack)["applied"] == ["src/shapes/__init__.py"], name


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_task_repogym_cannot_run_fails_with_one_line(jobs: dict[str, Any]) -> None:
    for agent in ("oracle", "nop"):
        exc = jobs["trials"][("broken", agent)]["exception_info"]
        assert exc["exception_type"] == "RepogymEnvironmentError"
        message = exc["exception_message"]
        assert message.startswith("repogym cannot run broken: ") and "FROBNICATE" in message
        assert "\n" not in message


def test_llm_agent_trajectory_loads_with_harbors_own_model(
    harbor_bin: Path, tmp_path: Path
) -> None:
    """The built-in agent's ``agent/trajectory.json`` (token ids, logprobs, a malformed call,
    a nudge) validates with Harbor's ``Trajectory`` model in Harbor's own venv."""
    from repogym.run.job import run_job
    from repogym.taskdir import load_task
    from tests.llm.stub_servers import openai_stub, openai_tools
    from tests.run.test_llm_agent import _solve_script

    def make(calls: Any, text: str = "") -> Any:
        return openai_tools(calls, text, token_ids=True, logprobs=True)

    script = [
        openai_tools([("bash", "{broken")]),
        openai_tools([], "thinking"),
        *_solve_script(make),
    ]
    # _solve_script checks the last tool output before each reply: start it after the noise.
    script[2] = make([("bash", {"command": "cat textstats/counts.py"})])
    with openai_stub(*script) as stub:
        outcomes, _, _ = run_job(
            [load_task(EXAMPLES / "textstats-word-count")],
            "llm:vllm/stub",
            agent_options={"endpoint": stub.base_url + "/v1"},
            out_dir=tmp_path / "job",
        )
    assert outcomes[0].reward == 1.0, outcomes[0].result
    path = tmp_path / "job" / "textstats-word-count__1" / "agent" / "trajectory.json"
    code = (
        "import json, sys\n"
        "from harbor.models.trajectories import Trajectory\n"
        "t = Trajectory.model_validate(json.load(open(sys.argv[1])))\n"
        "print(len(t.steps), t.final_metrics.total_prompt_tokens,"
        " len(t.steps[-1].metrics.completion_token_ids))\n"
    )
    proc = subprocess.run(
        [str(harbor_bin.parent / "python"), "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps, prompt_tokens, completion_ids = proc.stdout.split()
    assert int(steps) == 2 + 6 + 1  # system, user, six model calls, one nudge
    assert int(prompt_tokens) == 600 and int(completion_ids) == 20
