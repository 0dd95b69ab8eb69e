"""An image's own ``/tests`` (reference data its Dockerfile puts there) is seen by the verifier
beneath the task's tests, as on Harbor, but always **as built**: what an agent wrote into
``/tests`` never reaches the verifier. Real local sandbox, both verification modes, on the local
sandbox and on a real Docker engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.taskdir import load_task
from tests.conftest import write_task

DOCKERFILE = (
    "FROM debian:bookworm-slim\nWORKDIR /app\n"
    "COPY ref/ /tests/ref/\nCOPY which.txt /tests/which.txt\n"
)
# What the verifier saw goes to its stdout; the reward needs the image's data as built, the
# task's own file over the image's one of the same name, nothing planted, and the fix.
TEST_SH = """#!/bin/bash
echo "data=$(cat /tests/ref/data.txt) which=$(cat /tests/which.txt) planted=$(ls /tests/planted 2>&1)"
if [ "$(cat /tests/ref/data.txt)" = image-data ] && [ "$(cat /tests/which.txt)" = task ] \\
   && [ ! -e /tests/planted ] && [ -f /app/fixed ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_task(
        tmp_path_factory.mktemp("image-tests"),
        "image-tests",
        dockerfile=DOCKERFILE,
        test_sh=TEST_SH,
        files={
            "environment/ref/data.txt": "image-data\n",
            "environment/which.txt": "image\n",
            "tests/which.txt": "task\n",
            "solution/solve.sh": "#!/bin/bash\ntouch /app/fixed\n",
        },
    )


@pytest.fixture(
    scope="module",
    params=[
        ("local", "in_place"),
        ("local", "clean_room"),
        ("docker", "in_place"),
        ("docker", "clean_room"),
    ],
    ids="-".join,
)
def runner(request: pytest.FixtureRequest) -> TrialRunner:
    backend, mode = request.param
    if backend == "docker":
        request.getfixturevalue("engine")  # a real engine, offline, stand-in slim images
    return TrialRunner(get_backend(backend), verification=mode)


def test_the_verifier_sees_the_images_tests_beneath_the_tasks(
    runner: TrialRunner, task_dir: Path
) -> None:
    task = load_task(task_dir)
    oracle = runner.run(task, OracleAgent())
    assert oracle.reward == 1.0, oracle.verifier_stdout
    assert "data=image-data which=task" in oracle.verifier_stdout
    assert runner.run(task, NopAgent()).reward == 0.0


def test_what_the_agent_writes_into_tests_never_reaches_the_verifier(
    runner: TrialRunner, task_dir: Path
) -> None:
    """The attack: the agent rewrites the image's reference data and plants a file in /tests
    (a conftest.py would do the same). The verifier sees the image as built."""
    attack = CommandAgent(
        "touch /app/fixed && echo forged > /tests/ref/data.txt && echo x > /tests/planted"
        " && echo forged > /tests/which.txt && cat /tests/ref/data.txt"
    )
    outcome = runner.run(load_task(task_dir), attack)
    assert "data=image-data which=task" in outcome.verifier_stdout, outcome.verifier_stdout
    assert "forged" not in outcome.verifier_stdout
    assert outcome.reward == 1.0  # the fix counts; nothing the agent forged does


def test_an_agent_that_empties_tests_loses_only_the_images_files(
    runner: TrialRunner, task_dir: Path
) -> None:
    """Locally in place, an emptied /tests says the image had none (the agent harmed only
    itself). The clean room starts from the image as built, so its files are back; on Docker
    the agent could not empty it (/tests is a read-only volume there)."""
    attack = CommandAgent("touch /app/fixed && rm -rf /tests/* && ls -A /tests | wc -l")
    outcome = runner.run(load_task(task_dir), attack)
    assert "which=task" in outcome.verifier_stdout  # the task's tests are always there
    if runner.verification == "clean_room" or runner.backend.name == "docker":
        assert "data=image-data" in outcome.verifier_stdout
        assert outcome.reward == 1.0
    else:
        assert "data= " in outcome.verifier_stdout
        assert outcome.reward == 0.0


def test_a_verifier_may_write_beside_its_tests_and_nothing_lasts(
    runner: TrialRunner, tmp_path: Path
) -> None:
    """As on Harbor, a verifier may write into /tests (a score file, a cache) on the local
    backend; each run gets a fresh copy and the task's own folder never changes. The docker
    backend keeps /tests a read-only volume."""
    test_sh = (
        "#!/bin/bash\n"
        "if [ -e /tests/score.txt ]; then echo stale > /logs/verifier/reward.txt; exit; fi\n"
        "if echo 1 > /tests/score.txt 2>/dev/null; then cp /tests/score.txt"
        " /logs/verifier/reward.txt; else echo 0.5 > /logs/verifier/reward.txt; fi\n"
    )
    task_dir = write_task(
        tmp_path,
        "writes-tests",
        dockerfile=DOCKERFILE,
        test_sh=test_sh,
        files={"environment/ref/data.txt": "x\n", "environment/which.txt": "x\n"},
    )
    before = sorted(p.name for p in (task_dir / "tests").iterdir())
    for _ in range(2):  # the second run must not find the first one's file
        outcome = runner.run(load_task(task_dir), NopAgent())
        want = 0.5 if runner.backend.name == "docker" else 1.0
        assert outcome.reward == want, outcome.verifier_stdout
    assert sorted(p.name for p in (task_dir / "tests").iterdir()) == before


def test_code_run_as_the_tests_own_user_cannot_change_the_copied_tests(tmp_path: Path) -> None:
    """The attack on a writable /tests: the code under test (run, as repogym's judge runs it, by
    a user of its own) rewrites a test file or plants one beside the tests. The copy is
    root-owned, so both fail and the verifier reads its own files."""
    test_sh = (
        "#!/bin/bash\n"
        "setpriv --reuid=54321 --regid=54321 --clear-groups sh -c"
        " 'echo forged > /tests/which.txt; echo x > /tests/planted' 2>/dev/null\n"
        'if [ "$(cat /tests/which.txt)" = task ] && [ ! -e /tests/planted ]; then\n'
        "  echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    task_dir = write_task(
        tmp_path,
        "tests-owner",
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\n",
        test_sh=test_sh,
        files={"tests/which.txt": "task\n"},
    )
    outcome = TrialRunner(get_backend("local")).run(load_task(task_dir), NopAgent())
    assert outcome.reward == 1.0, outcome.verifier_stdout
