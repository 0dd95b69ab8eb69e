"""Attacks by a `command:` agent in real trials on the local sandbox; none may get its way.

The target task hides a secret in /tests and /solution and pays reward 1 only if the secret shows
up in the working directory — i.e. only if an attack succeeded. Every attack must end with 0.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from repogym.run.agents import CommandAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.taskdir import load_task
from tests.conftest import write_task

pytestmark = pytest.mark.slow
SECRET = "SECRET-" + uuid.uuid4().hex

TASK_TOML = """\
schema_version = "1.4"
[agent]
timeout_sec = {agent_timeout}
[verifier]
timeout_sec = 60.0
[environment]
network_mode = "no-network"
storage_mb = 64
memory_mb = 512
workdir = "/work"
"""

# Pays 1 when the secret leaked into /work, else 0 — unless a planted reward survives.
LEAK_CHECK = """\
#!/bin/bash
if grep -rqs "{secret}" /work; then r=1; else r=0; fi
[ -e /logs/verifier/reward.txt ] && r=planted
echo "$r" > /logs/verifier/reward.txt
"""


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner(get_backend("local"))


def leak_task(root: Path, agent_timeout: float = 20.0) -> Path:
    return write_task(
        root,
        "leak-" + uuid.uuid4().hex[:6],
        toml=TASK_TOML.format(agent_timeout=agent_timeout),
        dockerfile="FROM debian:bookworm\nWORKDIR /work\n",
        test_sh=LEAK_CHECK.format(secret=SECRET),
        files={
            "tests/secret.txt": SECRET + "\n",
            "solution/solve.sh": f"#!/bin/bash\necho {SECRET} > /work/answer.txt\n",
        },
    )


def attack(runner: TrialRunner, tmp_path: Path, command: str, **kw: float) -> float | None:
    task = load_task(leak_task(tmp_path, **kw))
    outcome = runner.run(task, CommandAgent(command))
    assert outcome.reading is not None, outcome.error
    return outcome.reward


def test_control_the_leak_detector_pays_when_secret_present(runner, tmp_path) -> None:
    assert attack(runner, tmp_path, f"echo {SECRET} > /work/x") == 1.0


@pytest.mark.parametrize(
    "command",
    [
        "cat /tests/test.sh /tests/secret.txt > /work/stolen 2>&1",
        "cat /solution/solve.sh > /work/stolen 2>&1; bash /solution/solve.sh",
        "find / -name 'secret.txt' -o -name 'solve.sh' 2>/dev/null | xargs cat > /work/stolen",
        "grep -rs SECRET- / --exclude-dir=proc --exclude-dir=sys > /work/stolen 2>/dev/null; true",
    ],
    ids=["read-tests", "read-solution", "find-files", "grep-filesystem"],
)
def test_cannot_read_tests_or_solution(runner, tmp_path, command) -> None:
    assert attack(runner, tmp_path, command, agent_timeout=5.0) == 0.0


def test_symlink_to_tests_reads_nothing(runner, tmp_path) -> None:
    # A link planted now, and a background reader waiting for the verifier phase.
    cmd = (
        "ln -s /tests /work/t; ln -s /tests/secret.txt /work/s; "
        "(for i in $(seq 100); do cat /work/t/secret.txt >> /work/got 2>/dev/null; sleep 0.05; done) "
        "& sleep 0.2"
    )
    assert attack(runner, tmp_path, cmd) == 0.0


def test_planted_reward_does_not_survive(runner, tmp_path) -> None:
    cmd = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo 1 > /logs/verifier/reward.json"
    assert attack(runner, tmp_path, cmd) == 0.0


def test_background_planter_is_stopped_before_verifier(runner, tmp_path) -> None:
    cmd = (
        "nohup bash -c 'while true; do mkdir -p /logs/verifier; "
        "echo 1 > /logs/verifier/reward.txt; sleep 0.01; done' >/dev/null 2>&1 & "
        "setsid bash -c 'while true; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; "
        "sleep 0.01; done' >/dev/null 2>&1 & sleep 0.3"
    )
    assert attack(runner, tmp_path, cmd) == 0.0


def test_no_network_only_loopback(runner, tmp_path) -> None:
    # A server on the host's loopback hands out the secret to anyone who connects.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    served = []

    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(SECRET.encode())
            served.append(True)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    cmd = (
        f"python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), 3); "
        f"open('/work/net','wb').write(s.recv(100))\" 2>/work/err; "
        "ls /sys/class/net > /work/ifaces; "
        "python3 -c \"import socket; socket.create_connection(('8.8.8.8', 53), 3)\" 2>>/work/err; true"
    )
    try:
        assert attack(runner, tmp_path, cmd) == 0.0
    finally:
        stop.set()
        thread.join(timeout=5)
        srv.close()
    assert not served


def _host_processes_with(marker: str, wait_s: float = 5.0) -> list[int]:
    """Host pids whose command line holds ``marker``, after giving kills a moment to land."""
    deadline = time.monotonic() + wait_s
    while True:
        found = _scan(marker)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _scan(marker: str) -> list[int]:
    found = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline and int(pid) != me:
            found.append(int(pid))
    return found


def test_timeout_ends_trial_and_kills_everything(runner, tmp_path) -> None:
    marker = "987654.321"  # a sleep length no other process uses
    cmd = f"(sleep {marker} &) ; nohup sleep {marker} >/dev/null 2>&1 & setsid sleep {marker} & sleep {marker}"
    start = time.monotonic()
    task = load_task(leak_task(tmp_path, agent_timeout=2.0))
    outcome = runner.run(task, CommandAgent(cmd))
    assert time.monotonic() - start < 60
    assert outcome.result["agent_result"]["timed_out"] is True
    assert outcome.result["exception_info"]["exception_type"] == "AgentTimeoutError"
    assert outcome.reward == 0.0  # the verifier still ran and decided
    assert _host_processes_with(marker) == []


def test_fork_bomb_is_contained(runner, tmp_path) -> None:
    name = "bomb" + uuid.uuid4().hex[:8]
    cmd = f"{name}() {{ {name} | {name} & }}; {name}; sleep 3"
    task = load_task(leak_task(tmp_path, agent_timeout=10.0))
    outcome = runner.run(task, CommandAgent(cmd))
    assert outcome.reward == 0.0, outcome.error
    assert _host_processes_with(name) == []


def test_disk_fill_stops_at_storage_limit(runner, tmp_path) -> None:
    free_before = os.statvfs("/").f_bavail
    cmd = (
        "dd if=/dev/zero of=/work/big bs=1M count=4096 2>/work/dd.err; ls -l /work/big > /work/size"
    )
    task = load_task(leak_task(tmp_path))
    outcome = runner.run(task, CommandAgent(cmd))
    # The agent broke its own environment: no reward is paid (0, or None with the reason).
    assert outcome.reward in (0.0, None), outcome.result
    if outcome.reward is None:
        assert "No space left" in (outcome.error or "")
    # 64 MB storage limit: the host lost no more than a little (nothing of 4 GB).
    lost_mb = (free_before - os.statvfs("/").f_bavail) * os.statvfs("/").f_frsize / 2**20
    assert lost_mb < 512


def test_cannot_write_on_host(runner, tmp_path) -> None:
    tag = uuid.uuid4().hex
    targets = [
        f"/tmp/pwned-{tag}",
        f"/root/pwned-{tag}",
        f"{tmp_path}/pwned-{tag}",
        f"/etc/pwned-{tag}",
    ]
    cmd = "; ".join(f"echo x > {t} 2>/dev/null" for t in targets) + "; true"
    attack(runner, tmp_path, cmd)
    for target in targets:
        assert not Path(target).exists(), target
