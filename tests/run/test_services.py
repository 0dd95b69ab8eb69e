"""Compose sidecars and MCP servers of Harbor tasks, on the real local sandbox: a sidecar
reached by name from the oracle, healthchecks gating start-up, an unhealthy sidecar failing the
trial, the no-network policy holding for sidecars, nothing left running after a trial."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from repogym.run.agents import AgentContext, AgentOutcome, NopAgent, OracleAgent
from repogym.run.preflight import preflight
from repogym.run.trial import TrialRunner
from repogym.sandbox import Session, get_backend
from repogym.taskdir import load_task
from repogym.taskdir.compose import compose_refusals, load_compose
from tests.conftest import write_task

MAIN_DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"
HEAD = 'schema_version = "1.4"\n[task]\nname = "acme/{name}"\n'
# A tiny HTTP server: answers GET / with its SECRET (from the compose environment).
SERVER = """\
import http.server, os, sys

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ.get("SECRET", "none").encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
"""
SIDECAR_DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /srv\nCOPY server.py /srv/server.py\n"
FETCH = (
    'python3 -c "import urllib.request;'
    "print(urllib.request.urlopen('http://api:{port}/', timeout=5).read().decode())\""
)
TEST_SH = """#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = "s3cret" ]; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
"""


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner(get_backend("local"))


def _compose(
    port: int, *, command: str | None = None, healthcheck: str = "", extra: str = ""
) -> str:
    cmd = command or f'["python3", "/srv/server.py", "{port}"]'
    return (
        "services:\n"
        "  main:\n"
        "    depends_on:\n"
        "      api:\n"
        "        condition: service_healthy\n"
        "  api:\n"
        "    build: ./api\n"
        f"    command: {cmd}\n"
        "    environment:\n"
        "      SECRET: ${SECRET_VALUE:-s3cret}\n"
        f"    expose: [{port}]\n"
        + (
            healthcheck
            or "    healthcheck:\n"
            f'      test: ["CMD", "python3", "-c", "import socket; socket.create_connection'
            f"(('127.0.0.1', {port}), timeout=1)\"]\n"
            "      interval: 0.2s\n"
            "      retries: 50\n"
        )
        + extra
    )


def _task(root: Path, name: str, compose: str, *, toml_extra: str = "", port: int = 8765) -> Path:
    toml = HEAD.format(name=name) + toml_extra
    solve = f"#!/bin/bash\nset -e\n{FETCH.format(port=port)} > /app/answer.txt\n"
    return write_task(
        root,
        name,
        toml=toml,
        dockerfile=MAIN_DOCKERFILE,
        test_sh=TEST_SH,
        files={
            "environment/docker-compose.yaml": compose,
            "environment/api/Dockerfile": SIDECAR_DOCKERFILE,
            "environment/api/server.py": SERVER,
            "solution/solve.sh": solve,
        },
    )


def _pids_with(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker``."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            out.append(int(pid))
    return out


# ------------------------------------------------------------------------------ static


def test_compose_model_reads_harbor_conventions(tmp_path: Path) -> None:
    task = _task(tmp_path, "t", _compose(8001))
    compose = load_compose(task / "environment/docker-compose.yaml", {}, task)
    assert compose.order() == ["api", "main"]
    api = compose.services["api"]
    assert api.command == ["python3", "/srv/server.py", "8001"]
    assert api.environment == {"SECRET": "s3cret"}
    assert api.healthcheck is not None and api.healthcheck.interval_s == 0.2
    assert api.ports == [(8001, "tcp")]
    assert compose_refusals(compose) == []
    assert preflight(load_task(task)) == []


def test_unsupported_compose_parts_are_refused_with_reasons(tmp_path: Path) -> None:
    extra = (
        "  db:\n    image: postgres:16\n    network_mode: host\n    privileged: true\n"
        "    volumes: ['./data:/var/lib/postgresql']\n    expose: [8002]\n"
    )
    task = _task(tmp_path, "t", _compose(8002, extra=extra))
    reasons = preflight(load_task(task))
    assert any("network_mode" in r and "'db'" in r for r in reasons), reasons
    assert any("privileged" in r for r in reasons)
    assert any("host bind mounts" in r for r in reasons)
    assert any("both use port 8002/tcp" in r for r in reasons)


def test_mcp_servers_must_be_task_services(tmp_path: Path) -> None:
    mcp = (
        '[[environment.mcp_servers]]\nname = "api"\ntransport = "http"\n'
        'url = "http://api:8003/mcp"\n'
        '[[environment.mcp_servers]]\nname = "tool"\ntransport = "stdio"\ncommand = "x"\n'
    )
    ok = _task(tmp_path, "ok", _compose(8003), toml_extra=mcp)
    assert preflight(load_task(ok)) == []
    far = mcp.replace("http://api:8003/mcp", "https://mcp.example.com/mcp")
    bad = _task(tmp_path, "bad", _compose(8003), toml_extra=far)
    reasons = preflight(load_task(bad))
    assert len(reasons) == 1 and "mcp.example.com" in reasons[0] and "'api'" in reasons[0]


# ------------------------------------------------------------------------------ trials


class _McpSpy:
    """Records the MCP servers the trial hands to the agent; does nothing else."""

    name = "spy"

    def __init__(self) -> None:
        self.seen: list[dict[str, object]] = []

    def run(self, session: Session, task: object, ctx: AgentContext) -> AgentOutcome:
        self.seen = [s.to_json() for s in ctx.mcp_servers]
        return AgentOutcome(exit_code=0)


def test_sidecar_reached_by_name_oracle_1_nop_0(runner: TrialRunner, tmp_path: Path) -> None:
    mcp = '[[environment.mcp_servers]]\nname = "api"\ntransport = "sse"\nurl = "http://api:8004/sse"\n'
    task = load_task(_task(tmp_path, "t", _compose(8004), toml_extra=mcp, port=8004))
    oracle = runner.run(task, OracleAgent(), out_dir=tmp_path / "oracle")
    assert oracle.reward == 1.0, (oracle.error, oracle.verifier_stdout)
    services = oracle.result["sandbox"]["services"]
    assert services["api"]["healthy"] is True and services["api"]["command"][-1] == "8004"
    assert oracle.result["sandbox"]["network"] == "public"
    assert (tmp_path / "oracle" / "services" / "api.build.log").is_file()
    nop = runner.run(task, NopAgent())
    assert nop.reward == 0.0, (nop.error, nop.verifier_stdout)
    spy = _McpSpy()
    runner.run(task, spy)
    assert spy.seen == [{"name": "api", "transport": "sse", "url": "http://api:8004/sse"}]


def test_healthcheck_gates_start_and_nothing_is_left(runner: TrialRunner, tmp_path: Path) -> None:
    marker = f"gate-{uuid.uuid4().hex[:8]}"
    # The server only listens after a delay: main may only start once the check passes.
    command = f'["sh", "-c", "sleep 1.5; exec python3 /srv/server.py 8005 {marker}"]'
    task = load_task(_task(tmp_path, "t", _compose(8005, command=command), port=8005))
    outcome = runner.run(task, OracleAgent())
    assert outcome.reward == 1.0, (outcome.error, outcome.verifier_stdout)
    assert outcome.result["sandbox"]["services"]["api"]["ready_s"] >= 1.0
    assert _pids_with(marker) == []


def test_unhealthy_sidecar_fails_the_trial(runner: TrialRunner, tmp_path: Path) -> None:
    healthcheck = (
        "    healthcheck:\n      test: ['CMD-SHELL', 'exit 1']\n"
        "      interval: 0.1s\n      retries: 3\n"
    )
    task = load_task(_task(tmp_path, "t", _compose(8006, healthcheck=healthcheck), port=8006))
    outcome = runner.run(task, OracleAgent())
    assert outcome.reward is None and outcome.error is not None
    assert outcome.error.startswith("ServiceError")
    assert "'api' never became healthy" in outcome.error and "3 times" in outcome.error
    assert "\n" not in outcome.result["exception_info"]["exception_message"]
    assert _pids_with("/srv/server.py 8006") == []


def test_no_network_sidecar_reaches_main_but_not_outside(
    runner: TrialRunner, tmp_path: Path
) -> None:
    probe = (
        "import socket, urllib.request\\n"
        "try:\\n    socket.create_connection(('pypi.org', 443), timeout=3); out = 'outside'\\n"
        "except OSError: out = 'blocked'\\n"
        "print(out, end='')\\n"
    )
    marker = f"nonet-{uuid.uuid4().hex[:8]}"
    command = (
        f'["sh", "-c", "printf \\"{probe}\\" > /srv/probe.py; '
        f'SECRET=$$(python3 /srv/probe.py) exec python3 /srv/server.py 8007 {marker}"]'
    )
    toml = '[environment]\nnetwork_mode = "no-network"\n'
    task = load_task(
        _task(tmp_path, "t", _compose(8007, command=command), toml_extra=toml, port=8007)
    )
    solve = f"#!/bin/bash\n{FETCH.format(port=8007)} > /app/answer.txt\n"
    (task.path / "solution" / "solve.sh").write_text(solve)
    outcome = runner.run(task, OracleAgent(), out_dir=tmp_path / "out")
    # The sidecar answered the main session (same private network) with what it could reach.
    assert outcome.result["sandbox"]["network"] == "private"
    assert outcome.error is None, outcome.error
    assert outcome.reward == 0.0  # the answer is the probe's verdict, not the secret

    class Read:
        name = "read"

        def run(self, session: Session, task: object, ctx: AgentContext) -> AgentOutcome:
            res = session.exec(FETCH.format(port=8007), network=ctx.network)
            self.answer = res.stdout.strip()
            return AgentOutcome(exit_code=res.exit_code)

    reader = Read()
    runner.run(task, reader)
    assert reader.answer == "blocked"
    assert _pids_with(marker) == []


def test_image_sidecar_and_backend_refusal(runner: TrialRunner, tmp_path: Path) -> None:
    compose = (
        "services:\n  web:\n    image: python:3.11-slim\n"
        '    command: ["python3", "-m", "http.server", "8008", "--directory", "/etc"]\n'
        "    expose: [8008]\n"
    )
    solve = (
        '#!/bin/bash\nset -e\nfor i in $(seq 50); do python3 -c "import urllib.request;'
        "urllib.request.urlopen('http://web:8008/hostname', timeout=2)\" && break; sleep 0.1; done\n"
        'python3 -c "import urllib.request;'
        "urllib.request.urlopen('http://web:8008/hostname', timeout=2)\"\n"
        "echo s3cret > /app/answer.txt\n"
    )
    path = write_task(
        tmp_path,
        "img",
        toml=HEAD.format(name="img"),
        dockerfile=MAIN_DOCKERFILE,
        test_sh=TEST_SH,
        files={"environment/docker-compose.yaml": compose, "solution/solve.sh": solve},
    )
    task = load_task(path)

    class NoSharing:
        name = "elsewhere"

    assert any("need the local backend" in r for r in preflight(task, backend=NoSharing()))
    outcome = runner.run(task, OracleAgent())
    assert outcome.reward == 1.0, (outcome.error, outcome.verifier_stdout)
    assert outcome.result["sandbox"]["services"]["web"]["command"][0] == "python3"
