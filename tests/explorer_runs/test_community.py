"""The community view over real runs: two scripted agents (oracle, nop) over the example tasks
on the local sandbox, a leaderboard with the right pass rates, and a private dataset whose runs
appear on no public page."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from repogym.explorer.community import Community, wilson_interval
from repogym.explorer.runs import RunLimits, RunService
from repogym.explorer.runs.locate import TaskLocator
from repogym.explorer.store import open_store
from repogym.explorer.web import create_app
from tests.explorer.web_fixtures import EXAMPLES, serve
from tests.explorer_runs.fixtures import TEXTSTATS, Visitor

HELLO = "hello-file"
SECRET = "secretdsq"
"""A private dataset: a copy of the examples under a name found nowhere else."""


class PrivateMarked:
    """The catalog as it is, with the environment :data:`SECRET` marked private (as a private
    Hub dataset indexed with ``--include-private`` is)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def env(self, env_id: str) -> dict[str, Any] | None:
        env = self._store.env(env_id)
        return None if env is None else {**env, "private": env_id == SECRET or env["private"]}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """The explorer (local sandbox) after four public runs and one private one: its base URL
    and the run ids by (env, agent, task)."""
    root = tmp_path_factory.mktemp("community")
    shutil.copytree(EXAMPLES, root / SECRET)
    paths = [str(EXAMPLES), str(root / SECRET)]
    store = PrivateMarked(open_store(paths))
    service = RunService(store, TaskLocator(store, paths), root / "runs", RunLimits())
    ids: dict[str, str] = {}
    try:
        with serve(create_app(store, runs=service, mcp=False)) as base:
            with httpx.Client(base_url=base) as http:
                before = http.get("/api/community/untried", params={"env": "tasks"}).json()
                assert (before["tasks"], before["untried"]) == (2, 2)
            visitor = Visitor(base)
            try:
                for agent in ("oracle", "nop"):
                    for task in (HELLO, TEXTSTATS):
                        rec = visitor.run(env="tasks", task=task, agent=agent)
                        assert rec["status"] == "done", rec
                        ids[f"tasks/{agent}/{task}"] = rec["id"]
                rec = visitor.run(env=SECRET, task=TEXTSTATS, agent="oracle")
                ids["secret"] = rec["id"]
                assert rec["reward"] == 1.0
            finally:
                visitor.close()
            yield base, ids
    finally:
        service.close()


def test_the_leaderboard_shows_both_agents_with_their_pass_rates(
    site: tuple[str, dict[str, str]],
) -> None:
    base, _ = site
    rows = httpx.get(f"{base}/api/community/leaderboard").json()["rows"]
    by_agent = {r["agent"]: r for r in rows}
    assert set(by_agent) == {"oracle", "nop"}, rows  # the private run is in no row
    oracle, nop = by_agent["oracle"], by_agent["nop"]
    assert (oracle["group"], oracle["runs"], oracle["passes"], oracle["tasks"]) == (
        "tasks",
        2,
        2,
        2,
    )
    assert oracle["pass_rate"] == 1.0 and nop["pass_rate"] == 0.0
    assert (nop["runs"], nop["tasks"]) == (2, 2)
    low, high = wilson_interval(2, 2)
    assert (oracle["ci_low"], oracle["ci_high"]) == (round(low, 4), round(high, 4))
    assert 0.3 < oracle["ci_low"] < 0.4 and oracle["ci_high"] == 1.0
    assert rows[0]["agent"] == "oracle"  # best first within the group
    for by in ("domain", "category"):
        got = httpx.get(f"{base}/api/community/leaderboard", params={"by": by}).json()["rows"]
        totals: dict[str, int] = {}
        for r in got:
            totals[r["agent"]] = totals.get(r["agent"], 0) + r["runs"]
            assert r["pass_rate"] == (1.0 if r["agent"] == "oracle" else 0.0)
        assert totals == {"oracle": 2, "nop": 2}, got
        if by == "category":  # the example tasks' own categories
            assert {r["group"] for r in got} == {"bugfix", "files"}


def test_rollouts_are_public_graded_runs_without_any_visitor_data(
    site: tuple[str, dict[str, str]],
) -> None:
    base, ids = site
    runs = httpx.get(f"{base}/api/community/rollouts").json()["rollouts"]
    assert {r["id"] for r in runs} == {v for k, v in ids.items() if k != "secret"}
    for r in runs:
        assert r["env"] == "tasks" and r["graded"]
        assert not {"owner", "usage", "details", "mine", "key"} & set(r)
    assert sum(r["passed"] for r in runs) == 2


def test_untried_tasks_and_a_private_dataset_stay_out_of_every_public_page(
    site: tuple[str, dict[str, str]],
) -> None:
    base, ids = site
    with httpx.Client(base_url=base) as http:
        after = http.get("/api/community/untried", params={"env": "tasks"}).json()
        assert (after["tasks"], after["untried"], after["items"]) == (2, 0, [])
        assert http.get("/api/community/untried", params={"env": SECRET}).status_code == 404
        assert http.get("/api/community/rollouts", params={"env": SECRET}).status_code == 404
        page = http.get("/community")
        assert page.status_code == 200
        assert "oracle" in page.text and "100 %" in page.text and "0 %" in page.text
        # A stranger sees the private run nowhere: not on community pages, not in run lists,
        # not at its own address.
        for path in (
            "/community",
            "/community?by=category",
            "/api/community/rollouts",
            "/api/community/leaderboard",
        ):
            text = http.get(path).text
            assert ids["secret"] not in text and SECRET not in text, path
        for path in (
            f"/runs?env={SECRET}",
            f"/api/runs?env={SECRET}",
            f"/api/runs?env={SECRET}&task={TEXTSTATS}",
        ):
            assert ids["secret"] not in http.get(path).text, path
        assert http.get(f"/api/runs/{ids['secret']}").status_code == 404
        assert http.get(f"/r/{ids['secret']}").status_code == 404
        # public runs stay public
        assert http.get(f"/api/runs/{ids['tasks/oracle/' + HELLO]}").status_code == 200


def test_no_community_view_when_runs_are_kept_to_their_owners(tmp_path: Path) -> None:
    store = open_store([str(EXAMPLES)])
    service = RunService(
        store,
        TaskLocator(store, [str(EXAMPLES)]),
        tmp_path / "runs",
        RunLimits(visibility="owner"),
    )
    try:
        with serve(create_app(store, runs=service, mcp=False)) as base:
            for path in ("/community", "/api/community/rollouts", "/api/community/leaderboard"):
                r = httpx.get(base + path)
                assert r.status_code == 404 and "whoever started them" in r.text, path
    finally:
        service.close()


def test_the_wilson_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(5, 10)
    assert abs(low - 0.2366) < 1e-3 and abs(high - 0.7634) < 1e-3
    assert wilson_interval(0, 4)[0] == 0.0 and wilson_interval(4, 4)[1] == 1.0


def test_hidden_environments_and_removed_runs_leave_the_community_view(tmp_path: Path) -> None:
    store = open_store([str(EXAMPLES)])
    from repogym.explorer.runs.store import RunRecord, RunStore

    runs = RunStore(tmp_path)
    for i, reward in enumerate((1.0, 0.0)):
        runs.add(
            RunRecord(
                id=f"r{i}",
                key="k",
                env="tasks",
                task=HELLO,
                agent="oracle",
                status="done",
                owner="o",
                created=float(i),
                reward=reward,
                finished=float(i),
            )
        )
    assert len(Community(store, runs).rollouts()) == 2
    assert Community(store, runs, hidden=lambda env: env == "tasks").rollouts() == []
    assert Community(store, runs, hidden=lambda env: env == "tasks").untried("tasks") is None
    kept = Community(store, runs, removed=lambda run: run == "r0")
    assert [r["id"] for r in kept.rollouts()] == ["r1"]
    assert kept.leaderboard()[0]["runs"] == 1
