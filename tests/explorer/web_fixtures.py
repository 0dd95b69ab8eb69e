"""Shared pieces of the explorer web tests: a Harbor dataset with planted answers, and the app
served by a real uvicorn on 127.0.0.1 in a thread."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "tasks"

# Every answer planted below carries this prefix; no response may ever contain it.
MARK = "ZQXANSWER"
XSS = '<script>alert("xss")</script>'

_TASK_TOML = """schema_version = "1.4"

[task]
name = "web-tests/leaky"
description = 'Leaky task {xss} for the web tests'
keywords = ["security"]

[metadata]
difficulty = "hard"
category = "security"
gold_answer = "{mark}-toml-gold"
expected_output = "{mark}-toml-expected"

[metadata.grader]
reference_solution = "{mark}-toml-reference"
notes = "nested metadata"

[verifier]
timeout_sec = 60.0

[environment]
network_mode = "no-network"
"""

_TEST_SH = """#!/bin/bash
# the grader: answers written into it must be masked
EXPECTED_ANSWER="{mark}-script-var"
cat > /tmp/expected.txt <<'EOF'
{mark}-script-heredoc
EOF
if diff -q /app/out.txt /tmp/expected.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def planted_dataset(root: Path) -> Path:
    """A Harbor dataset ``secret-set`` whose task hides answers everywhere answers hide.

    Also plants a file outside the task and a symlink inside the task pointing at it.
    """
    ds = root / "secret-set"
    task = ds / "leaky-task"
    (task / "environment").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "tests").mkdir()
    (task / "task.toml").write_text(_TASK_TOML.format(mark=MARK, xss=XSS))
    (task / "instruction.md").write_text(
        f"# Leaky\n\nWrite the right output. {XSS}\n\n<img src=x onerror=alert(1)>\n\n"
        "[click](javascript:alert(1))\n\n```bash\necho hello\n```\n"
    )
    (task / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\n")
    (task / "environment" / "main.py").write_text(
        'def main():\n    """Entry point."""\n    return 41\n'
        + "\n".join(f"# filler line {i}" for i in range(40))
        + "\n"
    )
    (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\necho {MARK}-solution > out.txt\n")
    (task / "solution" / "patch.diff").write_text(f"+{MARK}-gold-patch\n")
    (task / "tests" / "test.sh").write_text(_TEST_SH.format(mark=MARK))
    (task / "tests" / "expected_output.txt").write_text(f"{MARK}-expected-file\n")
    (task / "tests" / "rubric.json").write_text(f'{{"criteria": "{MARK}-rubric"}}\n')
    (task / "tests" / "hidden.patch").write_text(f"+{MARK}-hidden-test-patch\n")
    (task / "tests" / "config.json").write_text(
        f'{{"timeout": 5, "checks": {{"answer": "{MARK}-json-answer"}}}}\n'
    )
    outside = root / "outside-secret.txt"
    outside.write_text(f"{MARK}-outside-the-task\n")
    os.symlink(os.path.relpath(outside, task / "environment"), task / "environment" / "link.txt")
    os.symlink("/etc/passwd", task / "environment" / "passwd")
    # a second, ordinary task so search has something to find
    other = ds / "plain-task"
    (other / "environment").mkdir(parents=True)
    (other / "tests").mkdir()
    (other / "task.toml").write_text(
        'schema_version = "1.4"\n[task]\nname = "web-tests/plain"\n'
        'description = "Count the words in a file"\n[metadata]\ndifficulty = "easy"\n'
        'category = "text"\n[environment]\nnetwork_mode = "no-network"\n'
    )
    (other / "instruction.md").write_text("Count the words in `words.txt`.\n")
    (other / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\n")
    (other / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    return ds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(app: object, *, lifespan: str = "off") -> Iterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 (a free port) in a thread; yields the base URL.
    ``lifespan="on"`` runs the app's startup and shutdown (the MCP endpoints start with it)."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


def serve_with_lifespan(app: object) -> contextlib.AbstractContextManager[str]:
    """:func:`serve` with the app's lifespan on."""
    return serve(app, lifespan="on")
