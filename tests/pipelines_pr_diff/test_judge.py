"""The optional LLM judge of pr_diff tasks, against the local OpenAI-compatible stub: in the real
sandbox (host settings reach the verifier through [verifier.env] templates, and only those the
user passed with --pass-env; ok changes the
reward through llm_judge; HTTP 500, garbage and an unreachable endpoint still forward the reward
from the other components and record judge_status; the key is never written) and on the host
(judge_diff through repogym.llm.LLM with the same prompt)."""

from __future__ import annotations

import dataclasses
import json
import socket

import pytest

from repogym.llm import LLM, LLMError
from repogym.run.agents import CommandAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.shipped.diff_reward import judge_messages, score_diff
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.taskdir.trust import HostLimits
from repogym.verify.judge import JudgeError, judge_diff
from tests.hostnet import routed_ipv4
from tests.llm.stub_servers import error, openai_ok, openai_stub
from tests.pipelines_pr_diff.history import OPTS

pytestmark = pytest.mark.slow

KEY = "sk-judge-secret-1234567890"
JUDGE_VARS = ("REPOGYM_JUDGE_URL", "REPOGYM_JUDGE_MODEL", "REPOGYM_JUDGE_API_KEY")
# Right function, other names: a valid diff that differs from the gold, so the judge is asked.
CLOSE = "printf '\\n\\ndef multiply(x, y):\\n    return x * y\\n' >> pkg/calc.py"


# Networked sandboxes never reach the host's loopback: the judge stub listens on the host's
# routed address, as a judge on another machine would.
ROUTED = routed_ipv4()


def routed_stub(*script):
    if ROUTED is None:
        pytest.skip("this host has no routed IPv4 address for the sandbox to reach")
    return openai_stub(*script, host=ROUTED)


@pytest.fixture(scope="module")
def task(pr_repo, tmp_path_factory: pytest.TempPathFactory):
    from repogym.workflows import generate

    out = tmp_path_factory.mktemp("out")
    # The judge lives on the host: the verifier phase needs the network (opt-in).
    options = {**OPTS, "verifier_network": "public"}
    generate(GenerationInput(repo=str(pr_repo), pipeline="pr_diff", out=out, options=options))
    return load_task(out / "tasks" / "local__calc-1")


@pytest.fixture
def runner() -> TrialRunner:
    return TrialRunner(get_backend("local"))


def _judge_env(monkeypatch: pytest.MonkeyPatch, url: str, task):
    """Set the judge's variables on the host and pass them to the task (``--pass-env``)."""
    monkeypatch.setenv("REPOGYM_JUDGE_URL", url)
    monkeypatch.setenv("REPOGYM_JUDGE_MODEL", "stub-judge")
    monkeypatch.setenv("REPOGYM_JUDGE_API_KEY", KEY)
    passed = HostLimits(pass_env=JUDGE_VARS).host_env()
    return dataclasses.replace(task, host_env=passed)


def _baseline(task, runner) -> float:
    out = runner.run(task, CommandAgent(CLOSE))
    assert out.reading.details["judge_status"] == "off"
    assert "llm_judge" not in out.reading.rewards
    return out.reward


def test_judge_ok_changes_the_reward(task, runner, monkeypatch, tmp_path) -> None:
    base = _baseline(task, runner)
    with routed_stub(openai_ok('{"score": 1.0, "reason": "same behaviour"}')) as stub:
        passed = _judge_env(monkeypatch, stub.base_url + "/v1", task)
        out = runner.run(passed, CommandAgent(CLOSE), out_dir=tmp_path / "trial")
    assert out.reading.details["judge_status"] == "ok"
    assert out.reading.rewards["llm_judge"] == 1.0
    assert out.reward > base
    weights = out.reading.details["weights"]
    expected = sum(weights[k] * out.reading.rewards[k] for k in weights)
    assert out.reward == pytest.approx(expected, abs=1e-6)
    # One request, OpenAI-shaped, with the shared prompt, the model and the key from the host.
    assert len(stub.requests) == 1
    req = stub.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["json"]["model"] == "stub-judge"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    messages = req["json"]["messages"]
    assert messages[0] == judge_messages("", "", "")[0]
    assert "multiply" in messages[1]["content"]
    # The key reaches the verifier's process only: nowhere in the task or the trial's files.
    for folder in (task.path, tmp_path / "trial"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (error(500, "overloaded"), "error: HTTP 500"),
        (openai_ok("Looks reasonable to me."), "error: unparseable answer"),
        (openai_ok('{"score": 7}'), "error: unparseable answer"),
    ],
)
def test_judge_failure_still_forwards_the_reward(task, runner, monkeypatch, reply, status) -> None:
    base = _baseline(task, runner)
    with routed_stub(reply) as stub:
        passed = _judge_env(monkeypatch, stub.base_url + "/v1", task)
        out = runner.run(passed, CommandAgent(CLOSE))
    assert len(stub.requests) == 1
    assert out.reward == base  # the judge's weight went back to the other components
    assert "llm_judge" not in out.reading.rewards
    assert out.reading.details["judge_status"].startswith(status)
    assert KEY not in json.dumps(out.result)


def test_judge_unreachable(task, runner, monkeypatch) -> None:
    base = _baseline(task, runner)
    with socket.socket() as s:  # a port with nothing listening
        s.bind((ROUTED or "127.0.0.1", 0))
        port = s.getsockname()[1]
    passed = _judge_env(monkeypatch, f"http://{ROUTED or '127.0.0.1'}:{port}/v1", task)
    out = runner.run(passed, CommandAgent(CLOSE))
    assert out.reward == base
    assert out.reading.details["judge_status"].startswith("error: cannot connect")


def test_gold_and_empty_do_not_call_the_judge(task, runner, monkeypatch) -> None:
    with routed_stub(openai_ok('{"score": 0.0}')) as stub:
        passed = _judge_env(monkeypatch, stub.base_url + "/v1", task)
        gold = runner.run(passed, OracleAgent())
        empty = runner.run(passed, CommandAgent("true"))
    assert stub.requests == []
    assert gold.reward == 1.0
    assert gold.reading.details["judge_status"].startswith("skipped (prediction identical")
    assert empty.reward == 0.0
    assert empty.reading.details["judge_status"].startswith("skipped (no valid diff")


def test_host_variables_not_passed_never_reach_the_verifier(task, runner, monkeypatch) -> None:
    """The judge's settings (an API key among them) are on the host but the user did not pass
    them: the verifier sees nothing and the judge stays off. Passing the URL alone passes the
    URL alone: the request carries neither the key nor the model."""
    with routed_stub(openai_ok('{"score": 1.0}')) as stub:
        _judge_env(monkeypatch, stub.base_url + "/v1", task)
        out = runner.run(task, CommandAgent(CLOSE))
        assert out.reading.details["judge_status"] == "off"
        assert stub.requests == []
        only_url = dataclasses.replace(
            task, host_env=HostLimits(pass_env=("REPOGYM_JUDGE_URL",)).host_env()
        )
        partial = runner.run(only_url, CommandAgent(CLOSE))
    assert len(stub.requests) == 1
    assert KEY not in json.dumps(stub.requests[0])
    assert stub.requests[0]["json"].get("model") != "stub-judge"
    assert KEY not in json.dumps(out.result) and KEY not in json.dumps(partial.result)


# ------------------------------------------------------------------------------ host side


def _diffs() -> tuple[str, str]:
    from repogym.shipped.diff_reward import file_diff

    old = "def add(a, b):\n    return a + b\n"
    gold = file_diff("calc.py", old, old + "\n\ndef mul(a, b):\n    return a * b\n")
    pred = file_diff("calc.py", old, old + "\n\ndef mul(x, y):\n    return x * y\n")
    return pred, gold


def test_judge_diff_on_the_host() -> None:
    pred, gold = _diffs()
    with openai_stub(openai_ok('```json\n{"score": 0.8, "reason": "ok"}\n```')) as stub:
        llm = LLM("openai/stub-judge", endpoint=stub.base_url + "/v1", api_key=KEY, max_retries=0)
        score = judge_diff(pred, gold, "Add mul", llm)
    assert score == 0.8
    assert stub.requests[0]["json"]["messages"] == judge_messages(pred, gold, "Add mul")
    result = score_diff(pred, gold, judge=score)
    assert result["components"]["llm_judge"] == 0.8 and result["weights"]["llm_judge"] > 0


def test_judge_diff_failures_on_the_host() -> None:
    pred, gold = _diffs()
    with openai_stub(openai_ok("no idea")) as stub:
        llm = LLM("openai/stub-judge", endpoint=stub.base_url + "/v1", api_key=KEY, max_retries=0)
        with pytest.raises(JudgeError, match="no score"):
            judge_diff(pred, gold, "Add mul", llm)
    with openai_stub(error(500)) as stub:
        llm = LLM("openai/stub-judge", endpoint=stub.base_url + "/v1", api_key=KEY, max_retries=0)
        with pytest.raises(LLMError) as info:
            judge_diff(pred, gold, "Add mul", llm)
    assert KEY not in str(info.value)


def test_llm_rewrite_of_instructions(pr_repo, tmp_path, monkeypatch) -> None:
    """generate --llm: the rewrite replaces the statement, pr_diff's footer stays; a rewrite that
    repeats a line of the gold is rejected and the deterministic instruction kept."""
    from typer.testing import CliRunner

    from repogym.cli import app

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rewrite = "# Multiplication is missing\n\nThe calculator cannot multiply two numbers yet."
    leaky = '# Subtract\n\nAdd a function documented as """Return the difference a - b."""'
    out = tmp_path / "out"
    with openai_stub(openai_ok(leaky), openai_ok(rewrite)) as stub:
        args = ["generate", "--repo", str(pr_repo), "--pipeline", "pr_diff", "--out", str(out)]
        for key, value in OPTS.items():
            args += ["--opt", f"{key}={value}"]
        args += ["--llm", "openai/stub-writer", "--llm-endpoint", stub.base_url + "/v1"]
        res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert len(stub.requests) == 2  # newest first: #2 (leaky reply), then #1
    first = load_task(out / "tasks" / "local__calc-1")
    text = first.instruction()
    assert text.startswith("# Multiplication is missing\n")
    assert "Nothing is run to grade it" in text and "Hidden tests" not in text
    assert first.config.metadata["repo2env"]["synthesis_llm"] == "openai/stub-writer"
    second = load_task(out / "tasks" / "local__calc-2")
    assert second.instruction().startswith("# Add subtraction to the calculator\n")
    status = second.config.metadata["repogym"]["instruction_rewrite"]["status"]
    assert status == "rejected"
    assert second.config.metadata["repo2env"]["synthesis_llm"] == "none"
