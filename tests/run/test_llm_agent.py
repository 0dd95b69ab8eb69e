"""The built-in LLM agent against local stub servers that speak the OpenAI and Anthropic chat
APIs and play scripted tool calls; real trials on the local sandbox, real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.llm import LLM
from repogym.run.agent_tools import CommandOutput, ToolError
from repogym.run.job import run_job
from repogym.run.llm_agent import (
    SYSTEM_PROMPT,
    LLMAgentOptions,
    parse_agent_options,
    run_loop,
)
from repogym.run.trajectory import TrajectoryRecorder
from repogym.taskdir import load_task
from tests.conftest import EXAMPLES
from tests.llm.stub_servers import (
    anthropic_stub,
    anthropic_tools,
    error,
    openai_stub,
    openai_tools,
    tool_outputs,
)

SECRET = "sk-agent-QQ7-distinctive-secret-9931"
TEXTSTATS = EXAMPLES / "textstats-word-count"
BUGGY = '    if not text:\n        return 0\n    return len(text.split(" "))'
FIXED = "    return len(text.split())"


@pytest.fixture(autouse=True)
def _no_env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _files_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file())


def _saw(needle: str, then: Any) -> Any:
    """A scripted reply that checks the model was shown ``needle`` by the last tool call."""

    def reply(request: dict[str, Any]) -> Any:
        outputs = tool_outputs(request)
        assert outputs and needle in outputs[-1], outputs[-1:] or request
        return then

    return reply


# -- a scripted model solves the example task ---------------------------------------------------


def _solve_script(make: Any) -> list[Any]:
    return [
        make([("bash", {"command": "cat textstats/counts.py"})], "Let me look."),
        _saw(
            'return len(text.split(" "))',
            make(
                [
                    (
                        "str_replace",
                        {"path": "textstats/counts.py", "old_str": BUGGY, "new_str": FIXED},
                    )
                ]
            ),
        ),
        _saw(
            "edited textstats/counts.py",
            make([("bash", {"command": "python -m unittest -q tests.test_counts 2>&1 | tail -3"})]),
        ),
        _saw("OK", make([("finish", {"summary": "word_count splits on any whitespace"})])),
    ]


def test_scripted_openai_model_solves_the_example(tmp_path: Path) -> None:
    def make(calls: Any, text: str = "") -> Any:
        return openai_tools(calls, text, token_ids=True, logprobs=True)

    task = load_task(TEXTSTATS)
    with openai_stub(*_solve_script(make)) as stub:
        outcomes, summary, job = run_job(
            [task],
            "llm:vllm/qwen-stub",
            agent_options={"endpoint": stub.base_url + "/v1", "api_key": SECRET},
            out_dir=tmp_path / "job",
        )
        requests = stub.requests
    [outcome] = outcomes
    assert outcome.error is None, outcome.result
    assert outcome.reward == 1.0
    agent = outcome.result["agent_result"]
    assert agent["stop_reason"] == "finished"
    assert agent["steps"] == 4 and agent["tool_calls"] == 4
    assert agent["usage"] == {
        "input_tokens": 400,
        "output_tokens": 80,
        "cost_usd": None,  # a self-hosted model has no price
        "model_calls": 4,
    }
    assert agent["model"] == "vllm/qwen-stub"
    # The model was offered the five tools and asked for token ids and logprobs (vllm).
    first = requests[0]["json"]
    assert [t["function"]["name"] for t in first["tools"]] == [
        "bash",
        "read_file",
        "write_file",
        "str_replace",
        "finish",
    ]
    assert first["logprobs"] is True and first["return_token_ids"] is True
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][1]["content"] == task.instruction()
    assert requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"

    trajectory = json.loads((outcome.path.parent / "agent" / "trajectory.json").read_text())
    assert trajectory["schema_version"].startswith("ATIF-v1.")
    steps = trajectory["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    assert [s["source"] for s in steps] == ["system", "user"] + ["agent"] * 4
    agent_steps = steps[2:]
    for step in agent_steps:
        ids = {c["tool_call_id"] for c in step["tool_calls"]}
        assert {r["source_call_id"] for r in step["observation"]["results"]} == ids
        metrics = step["metrics"]
        assert metrics["prompt_token_ids"] == list(range(1, 101))
        assert metrics["completion_token_ids"] == list(range(1000, 1020))
        assert len(metrics["logprobs"]) == 20
    assert "def word_count" in agent_steps[0]["observation"]["results"][0]["content"]
    assert trajectory["final_metrics"]["total_prompt_tokens"] == 400
    assert trajectory["final_metrics"]["extra"]["stop_reason"] == "finished"
    # The key reaches the HTTP client only.
    assert SECRET not in _files_text(tmp_path / "job")
    assert json.loads(job.read_text())["agent_options"]["endpoint"].startswith("http://127.0.0.1")


def test_scripted_anthropic_model_solves_the_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    task = load_task(TEXTSTATS)
    with anthropic_stub(*_solve_script(anthropic_tools)) as stub:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
        outcomes, _, _ = run_job(
            [task], "llm:anthropic/claude-sonnet-4-20250514", out_dir=tmp_path / "job"
        )
        requests = stub.requests
    [outcome] = outcomes
    assert outcome.reward == 1.0, outcome.result
    usage = outcome.result["agent_result"]["usage"]
    assert usage["model_calls"] == 4
    assert usage["cost_usd"] == pytest.approx(4 * (100 * 3.0 + 20 * 15.0) / 1e6)
    second = requests[1]["json"]
    assert "system" in second and second["tools"][0]["input_schema"]["required"] == ["command"]
    # Tool results go back as tool_result blocks in a user turn; turns alternate.
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
    sent = requests[0]["headers"]  # older SDKs send x-api-key, newer ones a bearer token
    assert SECRET in (sent.get("x-api-key") or sent.get("authorization") or "")
    assert SECRET not in _files_text(tmp_path / "job")


# -- the loop on an in-memory workspace: limits, retries, malformed replies ----------------------


class MemoryWorkspace:
    """Files in a dict; ``bash`` echoes its command (or sleeps for ``sleep N``)."""

    workdir = "/work"

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.commands: list[tuple[str, float]] = []

    def bash(self, command: str, timeout_s: float) -> CommandOutput:
        self.commands.append((command, timeout_s))
        if command.startswith("sleep"):
            import time

            time.sleep(min(float(command.split()[1]), timeout_s))
            return CommandOutput("", None, timed_out=True)
        return CommandOutput(f"ran: {command}\n" + "x" * 50_000 * ("big" in command), 0)

    def read_text(self, path: str) -> str:
        if path not in self.files:
            raise ToolError(f"{path}: no such file")
        return self.files[path]

    def write_text(self, path: str, content: str) -> None:
        self.files[path] = content


def _loop(stub: Any, spec: str = "openai/stub", time_limit_s: float = 60, **opts: Any):  # type: ignore[no-untyped-def]
    llm = LLM(spec, endpoint=stub.base_url + "/v1", backoff_s=0.001)
    ws = MemoryWorkspace()
    recorder = TrajectoryRecorder(session_id="t", agent_name="a", model_name=spec, tools=[])
    result = run_loop(
        llm,
        ws,
        "do the thing",
        LLMAgentOptions(**opts),
        time_limit_s=time_limit_s,
        recorder=recorder,
        network=False,
    )
    return result, ws, recorder.to_json(stop_reason=result.stop_reason)


def test_max_steps_stops_a_looping_model() -> None:
    with openai_stub(openai_tools([("bash", {"command": "echo again"})])) as stub:
        result, ws, traj = _loop(stub, max_steps=3)
        assert len(stub.requests) == 3
    assert result.stop_reason == "max_steps" and result.model_calls == 3
    assert len(ws.commands) == 3
    assert traj["final_metrics"]["extra"]["stop_reason"] == "max_steps"


def test_token_and_cost_limits_stop_the_run() -> None:
    with openai_stub(openai_tools([("bash", {"command": "echo"})])) as stub:
        result, _, _ = _loop(stub, max_tokens=300)  # 120 tokens per call
        assert result.stop_reason == "max_tokens" and result.model_calls == 3
        assert stub.requests[2]["json"]["max_tokens"] == 60  # the budget left, not 4096
    with openai_stub(openai_tools([("bash", {"command": "echo"})])) as stub:
        # gpt-4o-mini: 100 × 0.15 + 20 × 0.60 per million = 2.7e-5 USD per call
        result, _, _ = _loop(stub, spec="openai/gpt-4o-mini", max_cost_usd=5e-5)
    assert result.stop_reason == "max_cost" and result.model_calls == 2
    assert result.cost_usd == pytest.approx(5.4e-5)


def test_wall_time_limit_caps_commands_and_stops() -> None:
    with openai_stub(openai_tools([("bash", {"command": "sleep 30", "timeout": 600})])) as stub:
        result, ws, _ = _loop(stub, time_limit_s=1.5)
    assert result.stop_reason == "time_limit"
    assert ws.commands[0][1] <= 1.5  # the command's timeout is held to the time left


def test_long_output_is_truncated_with_a_note() -> None:
    script = [openai_tools([("bash", {"command": "big"})]), openai_tools([("finish", {})])]
    with openai_stub(*script) as stub:
        result, _, traj = _loop(stub, max_observation_chars=1000)
        sent = tool_outputs(stub.requests[1]["json"])[0]
    assert result.stop_reason == "finished"
    assert len(sent) < 1200 and "characters omitted" in sent and "ran: big" in sent
    assert traj["steps"][2]["observation"]["results"][0]["content"] == sent


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limited_and_failing_model_is_retried(status: int) -> None:
    script = [
        error(status, "slow down", {"retry-after": "0"}),
        error(status, "slow down", {"retry-after": "0"}),
        openai_tools([("finish", {"summary": "done"})]),
    ]
    with openai_stub(*script) as stub:
        result, _, _ = _loop(stub)
        assert len(stub.requests) == 3
    assert result.stop_reason == "finished" and result.error is None


def test_persistent_failure_ends_the_run_with_an_error() -> None:
    with openai_stub(error(401, "bad key")) as stub:
        result, _, traj = _loop(stub)
        assert len(stub.requests) == 1  # a client error is not retried
    assert result.stop_reason == "llm_error"
    assert "HTTP 401" in (result.error or "") and "bad key" in (result.error or "")
    assert [s["source"] for s in traj["steps"]] == ["system", "user"]


def test_malformed_tool_calls_are_answered_not_fatal() -> None:
    script = [
        openai_tools([("bash", '{"command": "echo hi"')]),  # truncated JSON
        openai_tools([("bash", '["echo", "hi"]')]),  # JSON, but not an object
        openai_tools([("rm_rf", {"path": "/"})]),  # no such tool
        openai_tools([("bash", {"cmd": "echo hi"})]),  # wrong argument name
        openai_tools([("str_replace", {"path": "a.txt", "old_str": "x", "new_str": "y"})]),
        openai_tools([], "I think I am done."),  # text only: nudged
        openai_tools([("finish", {})]),
    ]
    with openai_stub(*script) as stub:
        result, ws, traj = _loop(stub)
        last = stub.requests[-1]["json"]["messages"]
    assert result.stop_reason == "finished" and not ws.commands
    outputs = [m["content"] for m in last if m["role"] == "tool"]
    assert "not valid JSON" in outputs[0]
    assert "must be a JSON object" in outputs[1]
    assert "unknown tool 'rm_rf'" in outputs[2]
    assert "missing argument 'command'" in outputs[3]
    assert "no such file" in outputs[4]
    assert any(m["role"] == "user" and "no tool call" in m["content"] for m in last)
    # The history sent back is valid JSON everywhere; the raw text is kept in the trajectory.
    for m in last:
        for call in m.get("tool_calls") or []:
            json.loads(call["function"]["arguments"])
    first_call = traj["steps"][2]["tool_calls"][0]
    assert first_call["arguments"] == {}
    assert first_call["extra"]["raw_arguments"] == '{"command": "echo hi"'


def test_a_model_that_never_calls_tools_is_stopped() -> None:
    with openai_stub(openai_tools([], "thinking…")) as stub:
        result, _, _ = _loop(stub, max_no_tool_replies=3)
        assert len(stub.requests) == 3
    assert result.stop_reason == "no_tool_calls"


def test_str_replace_needs_a_unique_match() -> None:
    script = [
        openai_tools([("write_file", {"path": "a.py", "content": "x = 1\nx = 1\n"})]),
        openai_tools([("str_replace", {"path": "a.py", "old_str": "x = 1", "new_str": "y"})]),
        openai_tools([("read_file", {"path": "a.py", "start_line": 2})]),
        openai_tools([("finish", {})]),
    ]
    with openai_stub(*script) as stub:
        _, ws, _ = _loop(stub)
        outputs = tool_outputs(stub.requests[-1]["json"])
    assert "occurs 2 times" in outputs[1]
    assert ws.files["a.py"] == "x = 1\nx = 1\n"
    assert outputs[2] == "     2\tx = 1"


# -- options and the command line ---------------------------------------------------------------


def test_options_are_validated_with_one_line_errors() -> None:
    assert parse_agent_options({"max_steps": "7"}).max_steps == 7
    with pytest.raises(ValueError, match="--agent-opt max_step: unknown option"):
        parse_agent_options({"max_step": "7"})
    with pytest.raises(ValueError, match="--agent-opt max_steps:"):
        parse_agent_options({"max_steps": "many"})
    public = parse_agent_options(
        {"api_key": SECRET, "endpoint": "http://user:pw@127.0.0.1:9/v1"}
    ).public()
    assert "api_key" not in public and "pw" not in json.dumps(public)


def test_cli_bad_agent_input_exits_2() -> None:
    runner = CliRunner()
    cases = [
        ["--agent", "llm:openai/gpt-4o-mini"],  # no key in the environment
        ["--agent", "llm:nonsense"],
        ["--agent", "llm:vllm/m", "--agent-opt", "max_steps=0"],
        ["--agent", "llm:vllm/m", "--agent-opt", "endpoint"],
        ["--agent", "oracle", "--agent-opt", "max_steps=3"],
    ]
    for extra in cases:
        res = runner.invoke(app, ["run", str(TEXTSTATS), *extra])
        assert res.exit_code == 2, (extra, res.output)
        assert "Traceback" not in res.output


def test_docs_show_the_real_system_prompt_and_tools() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    for line in SYSTEM_PROMPT.splitlines():
        if line.strip() and "{" not in line:
            assert line in docs, line
    for name in ("bash", "read_file", "write_file", "str_replace", "finish"):
        assert f"`{name}`" in docs
    for option in LLMAgentOptions.model_fields:
        assert f"`{option}`" in docs, option


# -- the tools act with the agent user's permissions --------------------------------------------

USER_TOML = """\
schema_version = "1.4"

[task]
name = "acme/as-nobody"
description = "A test task."

[agent]
user = "nobody"

[environment]
network_mode = "no-network"
"""
USER_DOCKERFILE = """\
FROM python:3.11-slim
RUN mkdir -p /app && chown nobody /app && echo s3cret > /root-only.txt && chmod 600 /root-only.txt
WORKDIR /app
"""
USER_TEST = """\
#!/bin/bash
ok=1
[ "$(stat -c %U /app/ok.txt)" = nobody ] || ok=0
[ -e /etc/evil.txt ] && ok=0
[ -e /usr/local/bin/evil ] && ok=0
echo $ok > /logs/verifier/reward.txt
"""


def test_file_tools_have_only_the_agent_users_rights(tmp_path: Path) -> None:
    from tests.conftest import write_task

    task = load_task(
        write_task(
            tmp_path,
            "as-nobody",
            toml=USER_TOML,
            dockerfile=USER_DOCKERFILE,
            test_sh=USER_TEST,
        )
    )
    script = [
        openai_tools([("write_file", {"path": "ok.txt", "content": "mine"})]),
        openai_tools([("write_file", {"path": "/etc/evil.txt", "content": "x"})]),
        openai_tools([("write_file", {"path": "/usr/local/bin/evil", "content": "x"})]),
        openai_tools([("read_file", {"path": "/root-only.txt"})]),
        openai_tools([("str_replace", {"path": "/root-only.txt", "old_str": "s", "new_str": "t"})]),
        openai_tools([("finish", {})]),
    ]
    with openai_stub(*script) as stub:
        outcomes, _, _ = run_job(
            [task],
            "llm:vllm/stub",
            agent_options={"endpoint": stub.base_url + "/v1"},
            out_dir=tmp_path / "job",
        )
        outputs = tool_outputs(stub.requests[-1]["json"])
    assert outcomes[0].reward == 1.0, (outcomes[0].result, outputs)
    assert outputs[0].startswith("wrote 4 bytes")
    assert "cannot write" in outputs[1] and "cannot write" in outputs[2]
    assert "not a readable file" in outputs[3] and "not a readable file" in outputs[4]
    assert "s3cret" not in "".join(outputs)


def test_cli_run_with_the_llm_agent_prints_usage(tmp_path: Path) -> None:
    script = [openai_tools([("bash", {"command": "ls"})]), openai_tools([("finish", {})])]
    with openai_stub(*script) as stub:
        res = CliRunner().invoke(
            app,
            [
                "run",
                str(EXAMPLES / "hello-file"),
                "--agent",
                "llm:openai/gpt-4o-mini",
                "--agent-opt",
                f"endpoint={stub.base_url}/v1",
                "--agent-opt",
                f"api_key={SECRET}",
                "--out",
                str(tmp_path / "job"),
            ],
        )
    assert res.exit_code == 0, res.output
    assert "model: 2 call(s), 200 tokens in / 40 out, $0.0001; stopped: finished 1" in res.output
    assert SECRET not in _files_text(tmp_path / "job")
