"""Sessions sharing one network namespace (a task's services): they reach each other on the
loopback address; a private one reaches nothing else; closing leaves no slirp4netns."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec
from repogym.sandbox.local import LocalSandbox

SERVE = "python3 -m http.server {port} --directory /app >/dev/null 2>&1 &"
GET = (
    'python3 -c "import urllib.request;'
    "print(urllib.request.urlopen('http://127.0.0.1:{port}/marker', timeout=5).read().decode())\""
)
OUT = "python3 -c \"import socket;socket.create_connection(('pypi.org', 443), timeout=5)\""


def _slirps() -> set[int]:
    pids = set()
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and b"slirp4netns" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.add(int(pid))
        except OSError:
            pass
    return pids


@pytest.mark.parametrize("public", [False, True])
def test_shared_network(
    sandbox: LocalSandbox, py_env: tuple[BuiltEnvironment, EnvironmentSpec], public: bool
) -> None:
    built, spec = py_env
    before = _slirps()
    port = 8200 + public
    with sandbox.shared_network(public=public) as net:
        a = sandbox.start(built, spec, shared=net)
        b = sandbox.start(built, spec, shared=net)
        try:
            assert a.network is public and b.network is public
            a.exec(SERVE.format(port=port))
            for _ in range(50):
                got = b.exec(GET.format(port=port))
                if got.exit_code == 0:
                    break
                time.sleep(0.1)
            assert got.stdout.strip() == "ready", got.stderr
            assert (b.exec(OUT).exit_code == 0) is public
        finally:
            a.close()
            b.close()
    for _ in range(50):
        if _slirps() <= before:
            break
        time.sleep(0.1)
    assert _slirps() <= before
