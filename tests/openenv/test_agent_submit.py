"""The opt-in agent ``submit``: terminal, once per episode, the reward only; attacks on it."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from repogym.openenv.environment import Pool, RepoAction, RepoEnvironment
from repogym.openenv.episode import TaskEnvironmentBuilder
from repogym.openenv.tasks import TaskSet
from repogym.sandbox import get_backend
from tests.conftest import EXAMPLES
from tests.openenv.conftest import FIX, TOKEN, Server, evaluate_action, serve_examples

pytestmark = pytest.mark.slow
TASK = "textstats-word-count"
BUG = 'text.split(" ")'


def _pool(root: Path, agent_submit: bool) -> Pool:
    builder = TaskEnvironmentBuilder(get_backend("local"))
    return Pool(TaskSet.load(root), builder, TOKEN, agent_submit=agent_submit)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    shutil.copytree(EXAMPLES / TASK, root / TASK)
    return root


@pytest.fixture
def env(root: Path) -> Iterator[RepoEnvironment]:
    env = RepoEnvironment(_pool(root, agent_submit=True))
    env.reset(task_id=TASK)
    yield env
    env.close()


def act(env: RepoEnvironment, **kwargs: object):  # type: ignore[no-untyped-def]
    return env.step(RepoAction(**kwargs))


def fix(env: RepoEnvironment) -> None:
    text = act(env, type="read", path="textstats/counts.py").content
    assert text and BUG in text
    act(env, type="write", path="textstats/counts.py", content=text.replace(BUG, FIX))


def test_submit_is_refused_without_the_flag(root: Path) -> None:
    env = RepoEnvironment(_pool(root, agent_submit=False))
    try:
        env.reset(task_id=TASK)
        fix(env)
        obs = act(env, type="submit")
        assert obs.error and "submit is off" in obs.error
        assert obs.reward == 0.0 and not obs.done and env.state.phase == "agent"
        # The trainer still grades, once.
        assert env.step(RepoAction(**evaluate_action())).reward == 1.0
    finally:
        env.close()


def test_submit_grades_once_and_ends_the_episode(env: RepoEnvironment) -> None:
    fix(env)
    obs = act(env, type="submit")
    assert obs.error is None and obs.reward == 1.0 and obs.done
    assert obs.stdout == "" and obs.reward_details is None  # the reward, not the test log
    assert env.state.phase == "done" and env.episode and env.episode.last_reward == 1.0
    # A second submit, any agent action, and the trainer's evaluate: refused, no second grade.
    for kwargs in (
        {"type": "submit"},
        {"type": "exec", "command": "true"},
        {"type": "write", "path": "x.txt", "content": "x"},
        evaluate_action(),
    ):
        again = act(env, **kwargs)
        assert again.error and "done" in again.error, (kwargs, again)
        assert again.done and again.reward == 1.0  # the one grade, repeated


def test_concurrent_submits_grade_once(env: RepoEnvironment) -> None:
    """Two submits racing on one episode: one is graded, the other refused."""
    results: list[object] = []
    barrier = threading.Barrier(2)

    def submit() -> None:
        barrier.wait()
        results.append(act(env, type="submit"))

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    graded = [r for r in results if r.error is None]  # type: ignore[attr-defined]
    refused = [r for r in results if r.error]  # type: ignore[attr-defined]
    assert len(graded) == 1 and len(refused) == 1, results
    assert graded[0].reward == 0.0 and graded[0].done  # type: ignore[attr-defined]


def test_submit_while_a_command_runs(env: RepoEnvironment) -> None:
    """A command still running when the agent submits (here: one that would write the fix a
    moment later) is killed, its late write never graded; later actions are refused."""
    late = f"sleep 3; sed -i 's/{BUG}/{FIX}/' textstats/counts.py; echo late > late.txt"
    running = threading.Thread(target=act, args=(env,), kwargs={"type": "exec", "command": late})
    running.start()
    time.sleep(0.5)
    obs = act(env, type="submit")
    running.join(timeout=120)
    assert obs.reward == 0.0 and obs.done and obs.error is None
    assert act(env, type="exec", command="cat late.txt").error


@pytest.fixture(scope="module")
def submit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_examples(tmp_path_factory, "--agent-submit")


def test_submit_over_the_wire(submit_server: Server) -> None:
    tools = httpx.get(f"{submit_server.url}/tools").json()["tools"]
    assert [t["name"] for t in tools] == ["exec", "read", "write", "list", "submit"]
    schema = httpx.get(f"{submit_server.url}/schema").json()["action"]
    assert schema["properties"]["type"]["enum"] == ["exec", "read", "write", "list", "submit"]
    with GenericEnvClient(base_url=submit_server.url, message_timeout_s=300).sync() as client:
        client.reset(task_id=TASK)
        step = client.step({"type": "list", "path": "."})
        assert step.reward == 0.0 and not step.done
        text = client.step({"type": "read", "path": "textstats/counts.py"}).observation["content"]
        client.step(
            {"type": "write", "path": "textstats/counts.py", "content": text.replace(BUG, FIX)}
        )
        result = client.step({"type": "submit"})
        assert result.reward == 1.0 and result.done
        again = client.step({"type": "submit"})
        assert again.observation["error"] and again.reward == 1.0 and again.done
        assert client.state()["phase"] == "done"
