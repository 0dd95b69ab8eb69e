"""ATIF v1.8 trajectories written, v1.7 ones still read; Harbor's task digest recorded beside
the content hash in a trial's ``result.json`` (without Harbor: its own value is checked in
``tests/integrations/test_atif_harbor_digest.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from repogym.llm import ToolCall, ToolTurn
from repogym.run.agents import NopAgent
from repogym.run.models import TrialResult
from repogym.run.trajectory import (
    ATIF_VERSION,
    TrajectoryError,
    TrajectoryRecorder,
    read_trajectory,
)
from repogym.run.trial import TrialRunner
from repogym.sandbox.fake import FakeSandbox
from repogym.taskdir import content_hash, load_task, set_content_hash
from repogym.taskdir.harbor_digest import harbor_digest, harbor_digest_files, unsupported_reason
from tests.conftest import EXAMPLES

# A trajectory as repogym wrote it before v1.8 (the shape of TrajectoryRecorder's output).
V17 = {
    "schema_version": "ATIF-v1.7",
    "session_id": "textstats-word-count__1",
    "agent": {"name": "llm", "version": "0.1.0", "model_name": "vllm/stub"},
    "steps": [
        {
            "step_id": 1,
            "timestamp": "2026-01-02T03:04:05+00:00",
            "source": "system",
            "message": "s",
        },
        {"step_id": 2, "source": "user", "message": "Fix word_count."},
        {
            "step_id": 3,
            "source": "agent",
            "model_name": "vllm/stub",
            "message": "",
            "llm_call_count": 1,
            "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {}}],
            "observation": {"results": [{"source_call_id": "c1", "content": "ok"}]},
            "metrics": {"prompt_tokens": 10, "completion_tokens": 2},
        },
    ],
    "final_metrics": {"total_prompt_tokens": 10, "total_steps": 3},
}


def full_trajectory() -> dict[str, Any]:
    """A recorder's document using every field it can write."""
    rec = TrajectoryRecorder(
        session_id="s-1",
        agent_name="llm",
        model_name="vllm/stub",
        tools=[{"name": "bash", "parameters": {"type": "object"}}],
        extra={"max_turns": 3},
    )
    rec.system("You are a coding agent.")
    rec.user("Fix it.")
    turn = ToolTurn(
        text="Looking.",
        tool_calls=[
            ToolCall("c1", "bash", {"command": "ls"}, '{"command": "ls"}'),
            ToolCall("c2", "bash", None, "{broken", error="not JSON"),
        ],
        message={},
        finish_reason="tool_calls",
        input_tokens=120,
        output_tokens=3,
        cost_usd=0.0012,
        model="vllm/stub",
        provider="vllm",
        latency_s=0.25,
        reasoning="list files first",
        cached_tokens=100,
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4, 5, 6],
        logprobs=[-0.1, -0.2, -0.3],
    )
    step = rec.agent_turn(turn)
    rec.observe(step, "c1", "README.md\n", False)
    rec.observe(step, "c2", "arguments were not JSON", True)
    rec.system("A reply without a tool call: call finish when done.")
    return rec.to_json(stop_reason="max_turns", notes="stopped at the limit")


def test_recorder_writes_v18_and_reads_back(tmp_path: Path) -> None:
    assert ATIF_VERSION == "ATIF-v1.8"
    doc = full_trajectory()
    assert doc["schema_version"] == "ATIF-v1.8"
    path = tmp_path / "agent" / "trajectory.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    back = read_trajectory(path)
    assert back == doc
    assert [s["step_id"] for s in back["steps"]] == [1, 2, 3, 4]
    assert back["steps"][2]["metrics"]["cached_tokens"] == 100


def test_a_v17_trajectory_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(V17))
    doc = read_trajectory(path)
    assert doc["schema_version"] == "ATIF-v1.7"
    assert doc["steps"][2]["observation"]["results"][0]["content"] == "ok"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "cannot read"),
        ("[]", "not a JSON object"),
        (json.dumps({**V17, "schema_version": "ATIF-v2.0"}), "is not ATIF v1.x"),
        (json.dumps({**V17, "schema_version": "ATIF-v1.8-rc"}), "is not ATIF v1.x"),
        (json.dumps({k: v for k, v in V17.items() if k != "agent"}), "needs an agent"),
        (json.dumps({**V17, "steps": [1]}), "every step must be an object"),
    ],
)
def test_what_is_not_an_atif_v1_trajectory_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(text)
    with pytest.raises(TrajectoryError, match=message):
        read_trajectory(path)


# ------------------------------------------------------------------ Harbor's task digest


def test_digest_covers_harbors_files_only(tmp_path: Path) -> None:
    task = tmp_path / "t"
    shutil.copytree(EXAMPLES / "hello-file", task)
    before = harbor_digest(task)
    assert before is not None and before.startswith("sha256:") and len(before) == 71
    files = harbor_digest_files(task)
    assert files[0] == "environment/Dockerfile" and "task.toml" in files
    # Outside Harbor's selection: other root files, caches, editor files, .harborignore.
    (task / "notes.txt").write_text("x")
    (task / "environment" / "__pycache__").mkdir()
    (task / "environment" / "__pycache__" / "m.cpython-312.pyc").write_bytes(b"\0")
    (task / "tests" / "old.sh~").write_text("x")
    (task / "solution" / ".DS_Store").write_text("x")
    (task / "tests" / ".harborignore").write_text("# only a comment\n")
    assert harbor_digest(task) == before
    # Inside it: README.md, a root trajectory.json, a steps/ tree, a changed byte.
    for rel in ("README.md", "trajectory.json", "steps/one/tests/test.sh"):
        copy = tmp_path / rel.replace("/", "_")
        shutil.copytree(task, copy)
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text("x")
        assert harbor_digest(copy) not in (None, before), rel
    (task / "instruction.md").write_text((task / "instruction.md").read_text() + " ")
    assert harbor_digest(task) != before


def test_ignore_rules_of_a_task_give_no_digest_rather_than_a_wrong_one(tmp_path: Path) -> None:
    task = tmp_path / "t"
    shutil.copytree(EXAMPLES / "hello-file", task)
    (task / "tests" / ".harborignore").write_text("*.log\n")
    assert "has ignore rules" in (unsupported_reason(task) or "")
    assert harbor_digest(task) is None
    (task / "tests" / ".harborignore").unlink()
    (task / ".gitignore").write_text("*.log\n")
    assert ".gitignore" in (unsupported_reason(task) or "")
    assert harbor_digest(task) is None
    assert harbor_digest(tmp_path / "missing") is None
    (task / ".gitignore").unlink()
    assert harbor_digest(task) is not None
    (task / "README.md").mkdir()  # Harbor cannot hash it either: no digest, no exception
    assert harbor_digest(task) is None


def test_trial_records_the_digest_beside_the_content_hash(tmp_path: Path) -> None:
    path = tmp_path / "hello-file"
    shutil.copytree(EXAMPLES / "hello-file", path)
    set_content_hash(path)
    task = load_task(path)
    runner = TrialRunner(FakeSandbox(host=True))
    outcome = runner.run(task, NopAgent(), out_dir=tmp_path / "trial")
    record = TrialResult.read(tmp_path / "trial" / "result.json")
    assert record.task_checksum == content_hash(path)
    assert record.task_digest == harbor_digest(path) == outcome.result["task_digest"]
    keys = list(json.loads((tmp_path / "trial" / "result.json").read_text()))
    assert keys.index("task_digest") == keys.index("task_checksum") + 1
    # Recording an evaluation into task.toml keeps the content hash; Harbor's digest hashes
    # task.toml's bytes, so it moves — which is why it is recorded per trial, not in the task.
    with (path / "task.toml").open("a") as toml:
        toml.write("\n[metadata.repo2env.evaluation]\noracle_reward = 1.0\n")
    assert content_hash(path) == record.task_checksum
    assert harbor_digest(path) != record.task_digest
