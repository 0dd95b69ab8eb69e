"""Rollouts through the explorer's runs API: the trial code of ``repogym run`` on the local
sandbox, live events over SSE, records in SQLite, shared by tasks with the same content hash.
Tests whose checks are the explorer's bookkeeping (sharing, refusals, restarts, the time limit,
masking) run on the fake sandbox (``FAKE``): no isolation is needed for them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repogym.explorer.runs import RunLimits
from repogym.explorer.runs.service import ORACLE_OUTPUT
from repogym.explorer.runs.store import RunRecord, RunStore
from repogym.taskdir import update_task_toml
from tests.explorer.web_fixtures import EXAMPLES
from tests.explorer_runs.fixtures import FAKE, TEXTSTATS, Visitor, copy_task, explorer
from tests.llm.stub_servers import openai_stub, openai_tools, tool_outputs

pytest.importorskip("uvicorn")

SECRET = "sk-visitor-ZX81-distinctive-key-5521"
BUGGY = '    if not text:\n        return 0\n    return len(text.split(" "))'
FIXED = "    return len(text.split())"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with explorer(tmp_path_factory.mktemp("runs"), limits=RunLimits(allow_command=True)) as ex:
        yield ex


def test_oracle_and_nop_runs_stream_their_events_and_are_graded(site) -> None:  # type: ignore[no-untyped-def]
    v = Visitor(site.base)
    oracle = v.run(agent="oracle")
    nop = v.run(agent="nop")
    assert (oracle["status"], oracle["reward"], oracle["details"]["resolved"]) == (
        "done",
        1.0,
        True,
    )
    assert (nop["status"], nop["reward"]) == ("done", 0.0)
    kinds = [e["kind"] for e in oracle["streamed"]]
    assert kinds[:3] == ["status", "status", "phase"]
    for kind in ("agent_output", "verifier_output", "reward"):
        assert kind in kinds
    phases = [
        (e["data"]["phase"], e["data"]["state"]) for e in oracle["streamed"] if e["kind"] == "phase"
    ]
    assert phases == [
        ("environment_setup", "start"),
        ("environment_setup", "end"),
        ("agent_execution", "start"),
        ("agent_execution", "end"),
        ("verifier", "start"),
        ("verifier", "end"),
    ]
    assert oracle["streamed"][-1]["data"] == {"status": "done"}
    # what was streamed is what was stored, in order
    assert oracle["streamed"] == oracle["events"]
    assert [e["seq"] for e in oracle["events"]] == list(range(1, len(oracle["events"]) + 1))
    # the oracle's own output is never shown (it may print the answer); this oracle's patch
    # applier prints nothing, and nothing is left as it is
    [out] = [e for e in oracle["events"] if e["kind"] == "agent_output"]
    assert out["data"]["text"] in ("", ORACLE_OUTPUT)
    [verdict] = [e for e in oracle["events"] if e["kind"] == "verifier_output"]
    assert "test_word_count" in verdict["data"]["text"]
    # a reader that reconnects with Last-Event-ID / ?after= gets the rest only
    rest = v.follow(oracle["id"], after=5)
    assert [e["seq"] for e in rest] == list(range(6, len(oracle["events"]) + 1))

    listed = v.http.get("/api/runs", params={"env": "tasks", "task": TEXTSTATS}).json()["runs"]
    ids = [r["id"] for r in listed]
    assert ids.index(nop["id"]) < ids.index(oracle["id"])  # newest first
    assert all(r["mine"] for r in listed if r["id"] in (nop["id"], oracle["id"]))
    assert all("owner" not in r for r in listed)

    page = v.http.get(f"/r/{oracle['id']}").text
    assert "Verifier finished" in page and 'data-live="0"' in page
    compare = v.http.get("/compare", params={"ids": f"{oracle['id']},{nop['id']}"})
    assert compare.status_code == 200
    assert compare.text.count('class="ccol"') == 2
    runs_page = v.http.get("/runs", params={"env": "tasks", "task": TEXTSTATS}).text
    assert oracle["id"] in runs_page and nop["id"] in runs_page
    task_page = v.http.get(f"/t/tasks/{TEXTSTATS}").text
    assert 'id="runs"' in task_page


def test_llm_run_uses_the_visitors_key_and_never_keeps_it(tmp_path: Path) -> None:
    def make(calls, text=""):  # type: ignore[no-untyped-def]
        return openai_tools(calls, text)

    def after(needle, then):  # type: ignore[no-untyped-def]
        def reply(request):  # type: ignore[no-untyped-def]
            assert needle in tool_outputs(request)[-1]
            return then

        return reply

    script = [
        make([("bash", {"command": "cat textstats/counts.py"})]),
        after(
            "text.split",
            make(
                [
                    (
                        "str_replace",
                        {"path": "textstats/counts.py", "old_str": BUGGY, "new_str": FIXED},
                    )
                ]
            ),
        ),
        after("edited", make([("finish", {"summary": "split on any whitespace"})])),
    ]
    limits = RunLimits(allow_internal_endpoints=True)
    with openai_stub(*script) as stub, explorer(tmp_path / "runs", limits=limits) as ex:
        v = Visitor(ex.base)
        rec = v.run(
            agent="llm",
            provider="vllm",
            model="stub-model",
            endpoint=stub.base_url + "/v1",
            api_key=SECRET,
            max_steps=10,
        )
        seen = stub.requests
    assert rec["reward"] == 1.0 and rec["agent"] == "llm:vllm/stub-model"
    assert rec["usage"]["model_calls"] == 3
    tools = [e["data"] for e in rec["events"] if e["kind"] == "tool"]
    assert [t["name"] for t in tools] == ["bash", "str_replace", "finish"]
    assert "def word_count" in tools[0]["output"]
    # the fixed line is the answer: masked wherever an event would show it
    assert "len(text.split())" not in json.dumps(rec["events"])
    assert "withheld" in json.dumps(tools[1]["arguments"])
    # the key reached the model endpoint, and nothing else
    assert all(r["headers"].get("authorization") == f"Bearer {SECRET}" for r in seen)
    assert SECRET not in json.dumps(rec)
    for f in (tmp_path / "runs").rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f
            assert b"127.0.0.1:" + str(stub.port).encode() not in f.read_bytes(), f


def test_same_task_in_two_datasets_shares_its_runs(tmp_path: Path) -> None:
    copy_task(tmp_path / "alpha")
    copy_task(tmp_path / "beta")
    paths = [str(tmp_path / "alpha"), str(tmp_path / "beta")]
    with explorer(tmp_path / "runs", paths, sandbox=FAKE) as ex:
        v = Visitor(ex.base)
        rec = v.run(env="alpha", agent="nop")
        from_beta = v.http.get("/api/runs", params={"env": "beta", "task": TEXTSTATS}).json()
        assert [r["id"] for r in from_beta["runs"]] == [rec["id"]]
        env_list = v.http.get("/api/runs", params={"env": "beta"}).json()["runs"]
        assert [r["id"] for r in env_list] == [rec["id"]]
        assert rec["key"].startswith("sha256:")


def test_a_task_changed_since_indexing_is_not_run(tmp_path: Path) -> None:
    """The page shows the indexed task; a folder whose content hash no longer matches it is
    refused rather than run under the old task's name."""
    task = copy_task(tmp_path / "ds")
    with explorer(tmp_path / "runs", [str(tmp_path / "ds")], sandbox=FAKE) as ex:
        v = Visitor(ex.base)
        v.run(env="ds", agent="nop")
        (task / "instruction.md").write_text("changed\n")
        refused = v.start(env="ds", task=TEXTSTATS, agent="nop")
        assert refused.status_code == 409 and "changed since it was indexed" in refused.text


def test_records_survive_a_restart_and_unfinished_runs_are_closed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with explorer(runs, sandbox=FAKE) as ex:
        done = Visitor(ex.base).run(agent="nop")
    store = RunStore(runs)
    store.add(
        RunRecord("feedfacecafe0001", done["key"], "tasks", TEXTSTATS, "nop", "running", "x", 1.0)
    )
    store.close()
    with explorer(runs, sandbox=FAKE) as ex:
        v = Visitor(ex.base)
        again = v.http.get(f"/api/runs/{done['id']}").json()
        assert again["reward"] == 0.0 and again["events"] == done["events"]
    store = RunStore(runs)
    stale = store.get("feedfacecafe0001")
    assert stale is not None and stale.status == "error" and "stopped" in (stale.error or "")


def test_a_run_is_held_to_the_operators_time_limit(tmp_path: Path) -> None:
    limits = RunLimits(allow_command=True, time_limit_s=2)
    with explorer(tmp_path / "runs", limits=limits, sandbox=FAKE) as ex:
        rec = Visitor(ex.base).run(agent="command", command="sleep 60")
    assert rec["status"] == "done" and rec["reward"] == 0.0
    assert "AgentTimeoutError" in rec["error"] and "2 s" in rec["error"]
    assert rec["duration_s"] < 30


def test_answers_in_outputs_are_masked(tmp_path: Path) -> None:
    """A verifier that prints its withheld expected output, and an agent that prints it, show
    neither on the run's page or in its events."""
    ds = tmp_path / "ds"
    task = ds / "greet"
    shutil.copytree(EXAMPLES / "hello-file", task)
    answer = "Sesame-open-42-withheld-line"
    (task / "tests" / "expected_greeting.txt").write_text(answer + "\n")
    (task / "tests" / "test.sh").write_text(
        "#!/usr/bin/env bash\nmkdir -p /logs/verifier\n"
        'echo "want: $(cat /tests/expected_greeting.txt)"\n'
        'if [ "$(cat /app/greeting.txt 2>/dev/null)" = "$(cat /tests/expected_greeting.txt)" ];'
        " then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    )
    (task / "instruction.md").write_text(
        "Write the greeting the grader expects to /app/greeting.txt.\n"
    )
    (task / "solution" / "solve.sh").write_text(
        f"#!/usr/bin/env bash\nprintf '{answer}\\n' | tee /app/greeting.txt\n"
    )
    update_task_toml(task)  # the copy's own content hash (the explorer checks it before a run)
    limits = RunLimits(allow_command=True)
    with explorer(tmp_path / "runs", [str(ds)], limits=limits, sandbox=FAKE) as ex:
        v = Visitor(ex.base)
        oracle = v.run(env="ds", task="greet", agent="oracle")
        guess = v.run(env="ds", task="greet", agent="command", command=f"echo {answer}; echo hi")
        page = v.http.get(f"/r/{guess['id']}").text
    assert oracle["reward"] == 1.0 and guess["reward"] == 0.0
    for rec in (oracle, guess):
        assert answer not in json.dumps(rec)
    assert answer not in page and "withheld" in page
    [out] = [e for e in guess["events"] if e["kind"] == "agent_output"]
    assert out["data"]["text"].splitlines()[1] == "hi"  # other lines stay


def test_the_oracles_own_words_are_replaced() -> None:
    """Whatever an oracle prints (it may print the answer) is replaced before any reader sees
    it; other agents' output is kept."""
    from types import SimpleNamespace

    from repogym.explorer.runs.mask import AnswerMask
    from repogym.explorer.runs.service import LiveRun

    for agent, want in (("oracle", ORACLE_OUTPUT), ("nop", "patching file counts.py")):
        live = LiveRun(SimpleNamespace(agent=agent), AnswerMask(set()))  # type: ignore[arg-type]
        live.emit("agent_output", {"text": "patching file counts.py"})
        assert live.events[-1]["data"]["text"] == want
