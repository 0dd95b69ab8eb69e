"""The sandbox network: its own namespace wired out by slirp4netns, never the host's.

A build ``RUN`` step and a public session try to reach services that only the host's loopback
or its abstract UNIX socket namespace offer (a listener on 127.0.0.1, a ``\\0name`` socket):
both must fail, while a listener on the host's routed address (eth0) is reachable. No
internet is needed: the routed address is the host's own.
"""

from __future__ import annotations

import json
import socket
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, SandboxError, _host
from repogym.sandbox.local import LocalSandbox
from tests.hostnet import routed_ipv4
from tests.sandbox.conftest import make_context, processes_with

Env = tuple[BuiltEnvironment, EnvironmentSpec]

PROBE = textwrap.dedent(
    """\
    import json, socket, sys
    cfg = json.loads(sys.argv[1])
    out = {}
    def tcp(name, host, port, timeout=3):
        try:
            with socket.create_connection((host, port), timeout=timeout) as c:
                c.sendall(b"PWNED " + name.encode())
                c.settimeout(3)
                out[name] = "connected:" + c.recv(100).decode()
        except OSError as exc:
            out[name] = "refused:" + type(exc).__name__
    tcp("loopback", "127.0.0.1", cfg["loopback"])
    tcp("gateway", "10.0.2.2", cfg["loopback"])
    tcp("alias", "10.0.2.5", cfg["loopback"], 1)  # no such host: a timeout
    if cfg.get("routed"):
        tcp("routed", cfg["routed"][0], cfg["routed"][1])
    try:
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        u.settimeout(3)
        u.connect("\\0" + cfg["abstract"])
        u.sendall(b"PWNED abstract")
        out["abstract"] = "connected"
    except OSError as exc:
        out["abstract"] = "refused:" + type(exc).__name__
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        out["raw"] = "allowed"
    except (OSError, AttributeError) as exc:
        out["raw"] = "refused:" + type(exc).__name__
    print(json.dumps(out))
    """
)


@dataclass
class Listener:
    """A host service that records whatever reaches it (and answers ``ok``)."""

    sock: socket.socket
    received: list[bytes] = field(default_factory=list)

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(100))
                    conn.sendall(b"ok")
                except OSError:
                    pass


@dataclass
class HostServices:
    loopback: Listener
    abstract: Listener
    abstract_name: str
    routed: Listener | None
    routed_addr: tuple[str, int] | None

    def config(self) -> str:
        return json.dumps(
            {
                "loopback": self.loopback.sock.getsockname()[1],
                "abstract": self.abstract_name,
                "routed": list(self.routed_addr) if self.routed_addr else None,
            }
        )

    def reset(self) -> None:
        for lst in (self.loopback, self.abstract, self.routed):
            if lst is not None:
                lst.received.clear()


def _listen(sock: socket.socket) -> Listener:
    sock.listen(16)
    lst = Listener(sock)
    threading.Thread(target=lst.serve, daemon=True).start()
    return lst


@pytest.fixture(scope="module")
def host_services() -> Iterator[HostServices]:
    lo = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lo.bind(("127.0.0.1", 0))
    name = f"repogym-test-{uuid.uuid4().hex}"
    ab = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ab.bind("\0" + name)
    routed = routed_addr = None
    ip = routed_ipv4()
    if ip:
        r = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        r.bind((ip, 0))
        routed, routed_addr = _listen(r), (ip, r.getsockname()[1])
    services = HostServices(_listen(lo), _listen(ab), name, routed, routed_addr)
    # The listeners work from the host itself: a refusal inside is the sandbox's doing.
    with socket.create_connection(("127.0.0.1", lo.getsockname()[1]), timeout=3) as c:
        c.sendall(b"self-test")
    time.sleep(0.1)
    assert services.loopback.received == [b"self-test"]
    services.reset()
    yield services
    for s in (lo, ab, *([routed.sock] if routed else [])):
        s.close()


def _assert_isolated(out: dict[str, str], services: HostServices) -> None:
    assert out["loopback"].startswith("refused"), out
    assert out["gateway"].startswith("refused"), out
    assert out["alias"].startswith("refused"), out
    assert out["abstract"].startswith("refused"), out
    assert out["raw"].startswith("refused"), out  # no CAP_NET_RAW: no hand-made frames
    time.sleep(0.2)
    assert services.loopback.received == []
    assert services.abstract.received == []


def test_build_run_step_cannot_reach_host_loopback_or_abstract_sockets(
    sandbox: LocalSandbox, host_services: HostServices, tmp_path: Path
) -> None:
    host_services.reset()
    ctx = make_context(
        tmp_path / "ctx",
        f"""\
        FROM python:3.11-slim
        COPY probe.py /probe.py
        RUN python3 /probe.py '{host_services.config()}' > /probe.json
        """,
        {"probe.py": PROBE},
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    built = sandbox.build(spec)
    with sandbox.start(built, spec) as s:
        out = json.loads(s.read("/probe.json"))
    _assert_isolated(out, host_services)
    if host_services.routed is not None:  # the build step had a (routed) network
        assert out["routed"] == "connected:ok", out
        assert host_services.routed.received == [b"PWNED routed"]


def test_public_session_reaches_routed_host_but_not_its_loopback(
    sandbox: LocalSandbox, py_env: Env, host_services: HostServices
) -> None:
    host_services.reset()
    built, spec = py_env
    with sandbox.start(built, replace(spec, network_mode="public")) as s:
        s.write("/probe.py", PROBE)
        res = s.exec(["python3", "/probe.py", host_services.config()])
        assert res.exit_code == 0, res.stderr
        out = json.loads(res.stdout)
        _assert_isolated(out, host_services)
        if host_services.routed is None:
            pytest.skip("this host has no routed IPv4 address")
        assert out["routed"] == "connected:ok", out
        assert host_services.routed.received == [b"PWNED routed"]
        # A no-network command inside the public session: not even the routed host.
        res = s.exec(["python3", "/probe.py", host_services.config()], network=False)
        assert json.loads(res.stdout)["routed"].startswith("refused")


def test_network_override_in_a_session_without_network(
    sandbox: LocalSandbox, py_env: Env, host_services: HostServices
) -> None:
    host_services.reset()
    built, spec = py_env
    assert spec.network_mode == "no-network"
    with sandbox.start(built, spec) as s:
        s.write("/probe.py", PROBE)
        res = s.exec(["python3", "/probe.py", host_services.config()])
        if host_services.routed is not None:
            assert json.loads(res.stdout)["routed"].startswith("refused")
        res = s.exec(["python3", "/probe.py", host_services.config()], network=True)
        assert res.exit_code == 0, res.stderr
        out = json.loads(res.stdout)
        _assert_isolated(out, host_services)
        if host_services.routed is not None:
            assert out["routed"] == "connected:ok", out


def test_dns_points_at_the_user_mode_resolver(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    with sandbox.start(built, replace(spec, network_mode="public")) as s:
        assert s.read("/etc/resolv.conf").decode() == "nameserver 10.0.2.3\n"
        res = s.exec("ip -4 route 2>/dev/null || cat /proc/net/route; getent hosts localhost")
        assert res.exit_code == 0, res.stderr
        assert "localhost" in res.stdout
        # The resolver is on tap0's network (slirp forwards it to the host's nameserver).
        routes = s.read("/proc/net/route").decode()
        assert "tap0" in routes
        try:
            host_can_resolve = bool(socket.getaddrinfo("pypi.org", 443))
        except OSError:
            host_can_resolve = False
        if host_can_resolve:
            res = s.exec(["getent", "hosts", "pypi.org"], timeout_s=30)
            assert res.exit_code == 0 and "pypi.org" in res.stdout, res.stderr


def test_slirp_ends_with_the_session(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    with sandbox.start(built, replace(spec, network_mode="public")) as s:
        mine = processes_with(f" {s.init_pid} tap0")
        assert len(mine) == 1  # one slirp4netns, attached to this sandbox's namespace
    deadline = time.monotonic() + 10
    while processes_with(f" {s.init_pid} tap0") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_with(f" {s.init_pid} tap0")
    before = len(processes_with("slirp4netns"))
    with sandbox.start(built, spec) as s:
        assert s.exec("true", network=True).exit_code == 0
        assert len(processes_with("slirp4netns")) == before + 1
    deadline = time.monotonic() + 10
    while len(processes_with("slirp4netns")) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_with("slirp4netns")) == before


def test_missing_slirp4netns_is_a_clear_error_not_the_host_network(
    sandbox: LocalSandbox, py_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    built, spec = py_env
    monkeypatch.setattr(_host, "find_slirp", lambda: None)
    monkeypatch.setattr(_host, "apt_install", lambda *_a, **_k: None)
    with pytest.raises(SandboxError) as info:
        sandbox.start(built, replace(spec, network_mode="public"))
    msg = str(info.value)
    assert "slirp4netns is missing" in msg and "apt-get install slirp4netns" in msg
    assert "\n" not in msg
    with sandbox.start(built, spec) as s:  # no network needed: works without it
        assert s.exec("true").exit_code == 0
        with pytest.raises(SandboxError, match="slirp4netns is missing"):
            s.exec("true", network=True)
