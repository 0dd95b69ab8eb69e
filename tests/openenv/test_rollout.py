"""`repogym rollout`: the built-in agent drives a live `repogym serve` through OpenEnv's client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from tests.llm.stub_servers import openai_stub, openai_tools
from tests.openenv.conftest import TOKEN, Server
from tests.run.test_llm_agent import _solve_script

pytestmark = pytest.mark.slow


def _rollout(server: Server, endpoint: str, out: Path, *extra: str) -> tuple[int, dict]:
    res = CliRunner().invoke(
        app,
        [
            "rollout",
            "--openenv",
            server.url,
            "--agent",
            "llm:vllm/stub",
            "--agent-opt",
            f"endpoint={endpoint}",
            "--task-id",
            "textstats-word-count",
            "--out",
            str(out),
            "--json",
            *extra,
        ],
    )
    return res.exit_code, json.loads(res.stdout) if res.stdout.strip().startswith("{") else {
        "output": res.output
    }


def test_rollout_solves_and_nop_scores_zero(server: Server, tmp_path: Path) -> None:
    def make(calls, text=""):  # type: ignore[no-untyped-def]
        return openai_tools(calls, text, token_ids=True)

    with openai_stub(*_solve_script(make)) as stub:
        code, job = _rollout(
            server, stub.base_url + "/v1", tmp_path / "a", "--orchestrator-token", TOKEN
        )
    assert code == 0, job
    [trial] = job["trials"]
    assert trial["reward"] == 1.0 and trial["error"] is None
    result = json.loads((tmp_path / "a" / trial["result"]).read_text())
    assert result["agent_result"]["stop_reason"] == "finished"
    assert result["verifier_result"]["details"]["resolved"] is True
    assert result["verification"]["mode"] in ("clean_room", "in_place")
    trajectory = json.loads(
        (tmp_path / "a" / "textstats-word-count__1/agent/trajectory.json").read_text()
    )
    assert trajectory["steps"][2]["metrics"]["completion_token_ids"]
    # The model never sees the token.
    assert TOKEN not in json.dumps(trajectory)

    with openai_stub(openai_tools([("finish", {})])) as stub:
        code, job = _rollout(
            server, stub.base_url + "/v1", tmp_path / "b", "--orchestrator-token", TOKEN
        )
    assert code == 0 and job["trials"][0]["reward"] == 0.0


def test_rollout_without_token_is_recorded_ungraded(server: Server, tmp_path: Path) -> None:
    with openai_stub(
        openai_tools([("bash", {"command": "ls"})]), openai_tools([("finish", {})])
    ) as stub:
        code, job = _rollout(server, stub.base_url + "/v1", tmp_path / "c")
    assert code == 1
    [trial] = job["trials"]
    assert trial["reward"] is None and "not graded" in trial["error"]


def test_a_refused_evaluate_grades_nothing(server: Server, tmp_path: Path) -> None:
    """A wrong orchestrator token: the server refuses ``evaluate`` with a finite 0.0 (RFC 008's
    every-step reward), which is no grade: the trial records no reward and says why."""
    with openai_stub(
        openai_tools([("bash", {"command": "ls"})]), openai_tools([("finish", {})])
    ) as stub:
        code, job = _rollout(
            server, stub.base_url + "/v1", tmp_path / "d", "--orchestrator-token", "wrong"
        )
    assert code == 1, job
    [trial] = job["trials"]
    assert trial["reward"] is None and "evaluate" in trial["error"], trial


def test_rollout_bad_input_exits_2(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (
        ["--openenv", "ftp://x", "--agent", "llm:vllm/m", "--agent-opt", "endpoint=http://x"],
        ["--openenv", "http://127.0.0.1:9", "--agent", "oracle"],
        [
            "--openenv",
            "http://127.0.0.1:9",
            "--agent",
            "llm:vllm/m",
            "--agent-opt",
            "endpoint=http://x",
        ],
    ):
        res = runner.invoke(app, ["rollout", *args])
        assert res.exit_code == 2, (args, res.output)
        assert "Traceback" not in res.output
