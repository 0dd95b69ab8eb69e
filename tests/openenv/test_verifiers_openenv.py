"""The verifiers library's OpenEnv taskset (``verifiers`` 0.4, ``vf-eval``) against
``repogym serve --agent-submit``: a generic client that holds no orchestrator token gets the
verifier's reward through the agent's ``submit``.

verifiers runs in a cached Python 3.12 venv of its own (``verifiers[openenv]``); the "model" is
a scripted OpenAI-compatible endpoint on 127.0.0.1 whose replies are OpenEnv actions: the fix
then ``submit`` (reward 1.0), or ``submit`` alone (the verifier's 0.0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES
from tests.openenv.conftest import FIX, Server, free_port, serve_examples
from tests.venvs import cached_venv

pytestmark = pytest.mark.slow
VERIFIERS_SPEC = "verifiers[openenv]>=0.4,<0.5"
TASK = "textstats-word-count"

# A chat-completions endpoint answering the k-th user turn with REPLIES[k-1] (the last one
# repeated), streamed or not, as the request asks.
FAKE_MODEL = """\
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLIES = json.loads(open(sys.argv[2]).read())


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body, kind="application/json"):
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._send(json.dumps({"object": "list", "data": [{"id": "scripted"}]}).encode())

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["content-length"])))
        turns = sum(1 for m in req.get("messages", []) if m.get("role") == "user")
        text = REPLIES[min(max(turns, 1), len(REPLIES)) - 1]
        head = {"id": "c", "created": int(time.time()), "model": req.get("model")}
        if not req.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": "stop"}
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            body = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            return self._send(json.dumps(body).encode())
        events = []
        for delta, finish in (({"role": "assistant", "content": text}, None), ({}, "stop")):
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            events.append({**head, "object": "chat.completion.chunk", "choices": [choice]})
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\\n\\n" for e in events)
        self._send(body + b"data: [DONE]\\n\\n", "text/event-stream")


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@pytest.fixture(scope="module")
def vf_eval() -> Path:
    """``vf-eval`` of a cached venv with verifiers and its OpenEnv extra (skip without PyPI)."""
    probe = "import verifiers"
    return cached_venv("verifiers-0.4-openenv", [[VERIFIERS_SPEC]], probe=probe) / "vf-eval"


@pytest.fixture(scope="module")
def submit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_examples(tmp_path_factory, "--agent-submit")


def _eval(vf_eval: Path, server: Server, replies: list[dict], tmp: Path) -> dict:
    """One ``vf-eval`` rollout of the OpenEnv taskset whose model answers ``replies``; the
    rewards recorded in its trace."""
    (tmp / "replies.json").write_text(json.dumps([json.dumps(r) for r in replies]))
    (tmp / "model.py").write_text(FAKE_MODEL)
    port = free_port()
    model = subprocess.Popen(
        [sys.executable, str(tmp / "model.py"), str(port), str(tmp / "replies.json")]
    )
    (tmp / "eval.toml").write_text(
        f'model = "scripted"\npush = false\noutput_dir = "{tmp / "out"}"\n\n'
        f'[env.taskset]\nid = "openenv"\nbase_url = "{server.url}"\n'
        f'resets = [{{task_id = "{TASK}"}}]\n\n'
        '[env.player.runtime]\ntype = "subprocess"\n\n'
        f'[client]\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key_var = "SCRIPTED_KEY"\n'
    )
    try:
        res = subprocess.run(
            [str(vf_eval), "@", str(tmp / "eval.toml"), "--no-rich"],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp,
            env={**os.environ, "SCRIPTED_KEY": "unused"},
        )
    finally:
        model.kill()
        model.wait()
    traces = list((tmp / "out").glob("*/traces.jsonl"))
    assert res.returncode == 0 and len(traces) == 1, res.stdout[-3000:] + res.stderr[-3000:]
    (rollout,) = [json.loads(line) for line in traces[0].read_text().splitlines()]
    assert rollout["ok"] and not rollout["errors"], rollout["errors"]
    (trace,) = rollout["traces"]
    return trace["rewards"]


def test_verifiers_taskset_gets_the_reward(
    vf_eval: Path, submit_server: Server, tmp_path: Path
) -> None:
    source = (EXAMPLES / TASK / "environment" / "repo" / "textstats" / "counts.py").read_text()
    assert 'text.split(" ")' in source
    fixed = source.replace('text.split(" ")', FIX)
    write = {"type": "write", "path": "textstats/counts.py", "content": fixed}
    (tmp_path / "fix").mkdir()
    rewards = _eval(vf_eval, submit_server, [write, {"type": "submit"}], tmp_path / "fix")
    assert rewards["openenv_reward"]["score"] == 1.0
    # Submitting without a fix: the verifier's 0.0 (the reward is the verifier's, not a stub).
    (tmp_path / "nop").mkdir()
    rewards = _eval(vf_eval, submit_server, [{"type": "submit"}], tmp_path / "nop")
    assert rewards["openenv_reward"]["score"] == 0.0
