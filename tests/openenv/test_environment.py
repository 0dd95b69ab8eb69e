"""The environment in process, on the local sandbox: the invariants, each with a test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from repogym.openenv.environment import Pool, RepoAction, RepoEnvironment
from repogym.openenv.episode import TaskEnvironmentBuilder
from repogym.openenv.tasks import TaskNotServable, TaskSet
from repogym.sandbox import get_backend
from tests.conftest import EXAMPLES, write_task
from tests.openenv.conftest import TOKEN, evaluate_action

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Pool:
    root = tmp_path_factory.mktemp("tasks")
    shutil.copytree(EXAMPLES / "textstats-word-count", root / "textstats-word-count")
    # A verifier that writes no reward at all.
    silent = root / "silent"
    shutil.copytree(EXAMPLES / "textstats-word-count", silent)
    (silent / "task.toml").write_text(
        (silent / "task.toml").read_text().replace("textstats-word-count", "silent")
    )
    (silent / "tests" / "test.sh").write_text("#!/bin/bash\necho 'ran, wrote nothing'\n")
    write_task(root, "zz-text-only", dockerfile=None)
    return Pool(TaskSet.load(root), TaskEnvironmentBuilder(get_backend("local")), TOKEN)


@pytest.fixture
def env(pool: Pool) -> Iterator[RepoEnvironment]:
    env = RepoEnvironment(pool)
    yield env
    env.close()


def act(env: RepoEnvironment, **kwargs: object):  # type: ignore[no-untyped-def]
    return env.step(RepoAction(**kwargs))


def test_reset_observation_and_state(env: RepoEnvironment) -> None:
    obs = env.reset(task_id="repogym-examples/textstats-word-count")
    assert obs.task_id == "textstats-word-count" and obs.workdir == "/workspace"
    assert "word_count" in (obs.instruction or "")
    assert obs.reward == 0.0 and not obs.done
    assert act(env, type="exec", command="true").reward == 0.0
    state = env.state
    assert state.task_id == "textstats-word-count" and state.step_count == 1
    assert state.phase == "agent" and state.episode_id


def test_agents_cannot_grade_or_solve(env: RepoEnvironment) -> None:
    env.reset(task_id="textstats-word-count")
    for kind in ("evaluate", "solve"):
        for meta in ({}, {"orchestrator_token": "guess"}):
            obs = act(env, type=kind, metadata=meta)
            assert obs.error and "orchestration" in obs.error and obs.reward == 0.0
    assert env.state.phase == "agent"
    # The oracle really is reachable for the trainer, and /solution is gone afterwards.
    obs = act(env, type="solve", metadata={"orchestrator_token": TOKEN})
    assert obs.error is None, obs
    assert act(env, type="exec", command="test -e /solution").exit_code == 1
    obs = env.step(RepoAction(**evaluate_action()))
    assert obs.reward == 1.0 and obs.done


def test_paths_stay_in_workdir(env: RepoEnvironment) -> None:
    env.reset(task_id="textstats-word-count")
    assert act(env, type="read", path="textstats/counts.py").content
    for path in ("/tests/test.sh", "/solution/solve.sh", "../etc/passwd", "/etc/passwd"):
        assert "outside" in (act(env, type="read", path=path).error or "")
        assert "outside" in (act(env, type="write", path=path, content="x").error or "")
        assert "outside" in (act(env, type="list", path=path).error or "")
    act(env, type="exec", command="ln -s /etc etc_link && ln -s / root_link")
    assert "symlink" in (act(env, type="read", path="etc_link/passwd").error or "")
    assert "symlink" in (act(env, type="write", path="root_link/tmp/x", content="x").error or "")
    assert "symlink" in (act(env, type="list", path="root_link").error or "")
    written = act(env, type="write", path="new/dir/file.txt", content="hello")
    assert written.error is None
    assert act(env, type="read", path="/workspace/new/dir/file.txt").content == "hello"
    names = {e["name"] for e in act(env, type="list", path=".").entries or []}
    assert {"textstats", "new"} <= names


def test_planted_reward_is_cleared_before_verifier(env: RepoEnvironment) -> None:
    env.reset(task_id="textstats-word-count")
    plant = (
        "mkdir -p /logs/verifier && echo 1.0 > /logs/verifier/reward.txt; "
        "(sleep 2; echo 1.0 > /logs/verifier/reward.txt) >/dev/null 2>&1 &"
    )
    act(env, type="exec", command=plant)
    obs = env.step(RepoAction(**evaluate_action()))
    assert obs.reward == 0.0, obs
    assert obs.metadata["reward_details"]["resolved"] is False


def test_no_reward_file_means_none_and_error(env: RepoEnvironment) -> None:
    env.reset(task_id="silent")
    act(env, type="exec", command="mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt")
    obs = env.step(RepoAction(**evaluate_action()))
    assert obs.done and obs.reward is None and obs.rewards is None
    assert obs.error and "no reward" in obs.error
    # The episode is over: agent actions are refused until the next reset.
    assert "done" in (act(env, type="exec", command="true").error or "")


def test_close_releases_sandbox(pool: Pool) -> None:
    env = RepoEnvironment(pool)
    env.reset(index=0)
    assert pool.open_sandboxes() >= 1
    env.close()
    env.close()
    assert env.episode is None


def test_text_only_task_is_refused(env: RepoEnvironment) -> None:
    with pytest.raises(TaskNotServable, match="text-only"):
        env.reset(task_id="zz-text-only")
    assert env.episode is None and env.state.phase == "idle"
