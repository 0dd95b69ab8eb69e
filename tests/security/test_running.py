"""Tasks that pass the trust boundary and attack the host from inside the sandbox.

A build step and a verifier (with ``network_mode = "public"`` and ``${VAR}`` host templates)
look for the host's canary file, canary files in the host's /var and /opt, /etc/pip.conf and the
canary variable, and post what they find to a listener on the host's 127.0.0.1 and to a host
abstract UNIX socket. Through ``run``, ``verify`` and ``serve`` nothing may arrive anywhere; a
task folder named with terminal escape codes must reach the terminal escaped.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.sandbox.local import default_cache_root
from tests.security.conftest import Listener, tree_bytes
from tests.security.corpus import Host, running_dataset

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _clean(host: Host, *blobs: bytes | str) -> None:
    for blob in blobs:
        data = blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else blob
        assert host.token.encode() not in data
        assert host.env_token.encode() not in data


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, host: Host) -> Path:
    return running_dataset(tmp_path_factory.mktemp("running"), host)


def test_control_listener_records_what_reaches_it(listener: Listener) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", listener.port)) as s:
        s.sendall(b"control-bytes")
    before = len(listener.received)
    s2 = socket.socket(socket.AF_UNIX)
    s2.connect("\0" + listener.abstract_name)
    s2.sendall(b"control-abstract")
    s2.close()
    import time

    for _ in range(200):
        if b"control-abstract" in listener.received and b"control-bytes" in listener.received:
            break
        time.sleep(0.05)
    assert b"control-bytes" in listener.received[:before] + listener.received
    assert b"control-abstract" in listener.received


def test_run_nop_reaches_nothing_of_the_host(
    dataset: Path, host: Host, listener: Listener, tmp_path: Path
) -> None:
    before = listener.connections
    res = _cli("run", str(dataset), "--agent", "nop", "--out", str(tmp_path / "job"), cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr
    _clean(host, res.stdout, res.stderr, tree_bytes(tmp_path / "job"))
    assert listener.connections == before, listener.received[-400:]
    # The verifier asked for the canary variable; it was withheld and the run said so.
    assert f"withheld: host variable {host.env_name}" in " ".join(res.stderr.split())
    # The build and verifier probes ran (so "nothing found" is not "nothing tried").
    outputs = b"".join(
        p.read_bytes() for p in (tmp_path / "job").rglob("verifier-stdout.txt") if p.is_file()
    )
    assert b"blocked" in outputs and b"env=|" in outputs
    # Escape codes in a task folder's name reach the terminal visible, not raw.
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr
    assert "\\x1b" in res.stderr


def test_pass_env_is_the_only_way_in(dataset: Path, host: Host, tmp_path: Path) -> None:
    """Control: naming the variable hands it over, so the run above withheld it for real."""
    one = tmp_path / "one"
    one.mkdir()
    os.symlink(dataset / "probe-verifier-env", one / "probe-verifier-env")
    res = _cli(
        "run",
        str(dataset / "probe-verifier-env"),
        "--agent",
        "nop",
        "--pass-env",
        host.env_name,
        "--out",
        str(tmp_path / "job"),
        "--json",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert host.env_token.encode() in tree_bytes(tmp_path / "job")


def test_verify_reaches_nothing_of_the_host(
    dataset: Path, host: Host, listener: Listener, tmp_path: Path
) -> None:
    before = listener.connections
    res = _cli("verify", str(dataset), "--reruns", "0", "--no-write", "--json", cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr
    _clean(host, res.stdout, res.stderr)
    assert json.loads(res.stdout)["tasks"]
    assert listener.connections == before


def test_serve_reset_and_evaluate_reach_nothing_of_the_host(
    dataset: Path, host: Host, listener: Listener, tmp_path: Path
) -> None:
    pytest.importorskip("openenv.core")
    from openenv.core.generic_client import GenericEnvClient

    from tests.openenv.conftest import TOKEN, evaluate_action, start_server, stop_server

    before = listener.connections
    cmd = [
        sys.executable, "-m", "repogym.cli", "serve", str(dataset), "--port", "{port}",
        "--orchestrator-token", TOKEN,
    ]  # fmt: skip
    srv = start_server(cmd, tmp_path, tmp_path / "server.log")
    try:
        with GenericEnvClient(base_url=srv.url, message_timeout_s=300).sync() as env:
            for task_id in ("stranger/probe-build", "stranger/probe-verifier-env"):
                reset = env.reset(task_id=task_id)
                shown = env.step({"type": "exec", "command": "cat /work/* /etc/pip.conf; env"})
                result = env.step(evaluate_action())
                _clean(host, repr(reset), repr(shown), repr(result))
    finally:
        stop_server(srv)
    _clean(host, (tmp_path / "server.log").read_bytes())
    assert listener.connections == before


def test_layer_cache_holds_no_setuid_file(dataset: Path) -> None:
    """The probe-build step made a setuid-root copy of ``true``; the layer cache must not keep
    it (run after the runs above, which built it)."""
    layers = default_cache_root() / "layers"
    offenders = []
    for dirpath, _dirs, files in os.walk(layers):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID) and stat.S_ISREG(st.st_mode):
                offenders.append(os.path.join(dirpath, name))
            if stat.S_ISBLK(st.st_mode) or (stat.S_ISCHR(st.st_mode) and st.st_rdev != 0):
                offenders.append(os.path.join(dirpath, name))
    assert offenders == []
